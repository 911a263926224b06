package dataset

import (
	"fmt"
)

// Images is an in-memory labelled image classification set.
type Images struct {
	// N images of H×W pixels with C channels.
	N, H, W, C int
	// Pixels holds the images in NHWC order: pixel (n, y, x, c) is
	// Pixels[((n·H + y)·W + x)·C + c]; len(Pixels) = N·H·W·C.
	Pixels []uint8
	// Labels[n] is the class of image n, in [0, len(Classes)).
	Labels []int32
	// Classes names the classes, indexed by label.
	Classes []string
}

// Validate reports whether the sizes of Pixels and Labels agree with N, H,
// W and C and every label names a class.
func (m *Images) Validate() error {
	if m.N < 0 || m.H <= 0 || m.W <= 0 || m.C <= 0 {
		return fmt.Errorf("dataset: images: bad dimensions N=%d H=%d W=%d C=%d", m.N, m.H, m.W, m.C)
	}
	if want := m.N * m.H * m.W * m.C; len(m.Pixels) != want {
		return fmt.Errorf("dataset: images: %d pixel bytes for N·H·W·C = %d·%d·%d·%d = %d", len(m.Pixels), m.N, m.H, m.W, m.C, want)
	}
	if len(m.Labels) != m.N {
		return fmt.Errorf("dataset: images: %d labels for %d images", len(m.Labels), m.N)
	}
	if len(m.Classes) == 0 {
		return fmt.Errorf("dataset: images: no classes")
	}
	for i, l := range m.Labels {
		if l < 0 || int(l) >= len(m.Classes) {
			return fmt.Errorf("dataset: images: label %d of image %d outside [0, %d)", l, i, len(m.Classes))
		}
	}
	return nil
}

// Image returns the H·W·C pixels of image i (HWC order), sharing storage
// with m.Pixels.
func (m *Images) Image(i int) []uint8 {
	sz := m.H * m.W * m.C
	return m.Pixels[i*sz : (i+1)*sz : (i+1)*sz]
}

// Head returns the first n images of m (all of them when n ≥ m.N), sharing
// storage with m.
func (m *Images) Head(n int) *Images {
	if n < 0 {
		panic(fmt.Sprintf("dataset: Head(%d): want n ≥ 0", n))
	}
	return m.span(0, min(n, m.N))
}

// Tail returns the last n images of m (all of them when n ≥ m.N), sharing
// storage with m.
func (m *Images) Tail(n int) *Images {
	if n < 0 {
		panic(fmt.Sprintf("dataset: Tail(%d): want n ≥ 0", n))
	}
	return m.span(m.N-min(n, m.N), m.N)
}

// span returns images [lo, hi) of m, sharing storage with m; appending to
// its slices never writes into m.
func (m *Images) span(lo, hi int) *Images {
	sz := m.H * m.W * m.C
	s := *m
	s.N = hi - lo
	s.Pixels = m.Pixels[lo*sz : hi*sz : hi*sz]
	s.Labels = m.Labels[lo:hi:hi]
	return &s
}

// NewImagesFromIDX builds single-channel Images from an IDX array of uint8
// images [N, H, W] and an IDX array of uint8 labels [N], each label below
// len(classes).
func NewImagesFromIDX(images, labels *IDX, classes []string) (*Images, error) {
	if images.Type != IDXUint8 || len(images.Dims) != 3 {
		return nil, fmt.Errorf("dataset: images: IDX %s %v: want uint8 [N, H, W]", images.Type, images.Dims)
	}
	if labels.Type != IDXUint8 || len(labels.Dims) != 1 {
		return nil, fmt.Errorf("dataset: labels: IDX %s %v: want uint8 [N]", labels.Type, labels.Dims)
	}
	if images.Dims[0] != labels.Dims[0] {
		return nil, fmt.Errorf("dataset: %d images but %d labels", images.Dims[0], labels.Dims[0])
	}
	m := &Images{
		N: images.Dims[0], H: images.Dims[1], W: images.Dims[2], C: 1,
		Pixels:  images.Data,
		Labels:  make([]int32, len(labels.Data)),
		Classes: classes,
	}
	for i, l := range labels.Data {
		m.Labels[i] = int32(l)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}
