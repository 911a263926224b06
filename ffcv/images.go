package ffcv

import (
	"context"
	"fmt"
	"strconv"

	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/ffcv/beton"
)

// ReadImagesOptions configures ReadImages.
type ReadImagesOptions struct {
	// Image and Label name the fields ("image" and "label" when empty).
	Image, Label string
	// NumClasses is the number of classes; labels must lie in
	// [0, NumClasses). Zero means the largest label plus one.
	NumClasses int
	// Workers decode the images (GOMAXPROCS when 0).
	Workers int
}

// ReadImages reads a whole .beton file of labelled images into memory as a
// dataset.Images, for the in-memory trainer. The image field is either an
// image field whose images all have one size (raw or JPEG, decoded) or a
// uint8 ndarray field of shape (H, W) or (H, W, C); the label field is an
// int field. The classes are named by their labels ("0", "1", …).
func ReadImages(ctx context.Context, path string, opt ReadImagesOptions) (*dataset.Images, error) {
	if opt.Image == "" {
		opt.Image = "image"
	}
	if opt.Label == "" {
		opt.Label = "label"
	}
	r, err := beton.Open(path, beton.ReadOptions{})
	if err != nil {
		return nil, fmt.Errorf("ffcv: read images: %w", err)
	}
	defer r.Close()
	fi, ok := r.FieldIndex(opt.Image)
	if !ok {
		return nil, fmt.Errorf("ffcv: read images: %s: no field %q", path, opt.Image)
	}
	li, ok := r.FieldIndex(opt.Label)
	if !ok || r.Fields()[li].Type != beton.IntType {
		return nil, fmt.Errorf("ffcv: read images: %s: no int field %q for the labels", path, opt.Label)
	}
	var dec Op
	switch f := r.Fields()[fi]; f.Type {
	case beton.RGBImageType:
		dec = SimpleImageDecoder{}
	case beton.NDArrayType:
		dec = NDArrayDecoder{}
	default:
		return nil, fmt.Errorf("ffcv: read images: %s: field %q is a %v field, want images or a uint8 ndarray", path, opt.Image, f.Type)
	}
	pipes := map[string]Pipeline{}
	for _, f := range r.Fields() {
		pipes[f.Name] = nil
	}
	pipes[opt.Image] = Pipeline{dec}
	pipes[opt.Label] = Pipeline{IntDecoder{}, Squeeze{}}
	n := r.NumSamples()
	if n == 0 {
		return nil, fmt.Errorf("ffcv: read images: %s: no samples", path)
	}
	l, err := NewLoader(r, Options{BatchSize: min(n, 256), KeepLast: true, Workers: opt.Workers, Pipelines: pipes})
	if err != nil {
		return nil, fmt.Errorf("ffcv: read images: %s: %w", path, err)
	}
	defer l.Close()
	p := l.pipes[0]
	if p.name != opt.Image {
		p = l.pipes[1]
	}
	if !p.isImage {
		return nil, fmt.Errorf("ffcv: read images: %s: field %q holds %s %v arrays, want uint8 (H, W) or (H, W, C)", path, opt.Image, p.info.DType, p.info.Shape)
	}
	m := &dataset.Images{N: n, H: p.h, W: p.w, C: p.c, Pixels: make([]uint8, 0, n*p.h*p.w*p.c), Labels: make([]int32, 0, n)}
	maxLabel := int64(-1)
	for b, err := range l.Epoch(ctx) {
		if err != nil {
			return nil, fmt.Errorf("ffcv: read images: %s: %w", path, err)
		}
		m.Pixels = append(m.Pixels, b.Column(opt.Image).Uint8s()...)
		for k, y := range b.Column(opt.Label).Int64s() {
			if y < 0 || y >= 1<<31-1 {
				return nil, fmt.Errorf("ffcv: read images: %s: sample %d: label %d is not a class index", path, b.Indices[k], y)
			}
			if opt.NumClasses > 0 && y >= int64(opt.NumClasses) {
				return nil, fmt.Errorf("ffcv: read images: %s: sample %d: label %d outside the %d classes", path, b.Indices[k], y, opt.NumClasses)
			}
			maxLabel = max(maxLabel, y)
			m.Labels = append(m.Labels, int32(y))
		}
	}
	k := opt.NumClasses
	if k == 0 {
		k = int(maxLabel) + 1
	}
	m.Classes = make([]string, k)
	for i := range m.Classes {
		m.Classes[i] = strconv.Itoa(i)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("ffcv: read images: %s: %w", path, err)
	}
	return m, nil
}
