package dataset

import "testing"

func TestImagesHead(t *testing.T) {
	m := &Images{N: 3, H: 1, W: 2, C: 1, Pixels: []uint8{1, 2, 3, 4, 5, 6}, Labels: []int32{0, 1, 0}, Classes: []string{"a", "b"}}
	h := m.Head(2)
	if h.N != 2 || len(h.Pixels) != 4 || len(h.Labels) != 2 || h.Image(1)[1] != 4 {
		t.Errorf("Head(2) = %+v, want the first 2 images", h)
	}
	if err := h.Validate(); err != nil {
		t.Error(err)
	}
	if got := m.Head(10); got.N != 3 {
		t.Errorf("Head(10).N = %d, want all 3", got.N)
	}
	h.Pixels = append(h.Pixels, 9)
	if m.Pixels[4] != 5 {
		t.Error("appending to the head changed the images after it")
	}
}
