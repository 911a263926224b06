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

func TestImagesTail(t *testing.T) {
	m := &Images{N: 3, H: 1, W: 2, C: 1, Pixels: []uint8{1, 2, 3, 4, 5, 6}, Labels: []int32{0, 1, 0}, Classes: []string{"a", "b"}}
	tl := m.Tail(2)
	if tl.N != 2 || len(tl.Pixels) != 4 || tl.Labels[0] != 1 || tl.Image(0)[0] != 3 || tl.Image(1)[1] != 6 {
		t.Errorf("Tail(2) = %+v, want the last 2 images", tl)
	}
	if err := tl.Validate(); err != nil {
		t.Error(err)
	}
	if got := m.Tail(10); got.N != 3 || got.Image(0)[0] != 1 {
		t.Errorf("Tail(10) = %+v, want all 3", got)
	}
	if got := m.Tail(0); got.N != 0 || len(got.Pixels) != 0 {
		t.Errorf("Tail(0) = %+v, want none", got)
	}
}
