package ffcv

import (
	"context"
	"fmt"
	"slices"

	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/tensor"
)

// ColumnType returns the element type and the shape of one sample (without
// the batch axis) of the loaded field name, as its pipeline leaves it, and
// whether the field is loaded.
func (l *Loader) ColumnType(name string) (tensor.DType, []int, bool) {
	for _, c := range l.slots[0].cols {
		if c.Name == name {
			return c.DType, slices.Clone(c.shape[1:]), true
		}
	}
	return 0, nil, false
}

// ImageStream hands out a Loader's batches of labelled images as tensors,
// the form a training loop takes (train.Data): the images float32
// [B, C, H, W] and the labels int64 [B]. Each batch is copied out of the
// Loader's ring, so the ring's slot is free again at once and the workers
// keep preparing the batches ahead while the step runs.
//
// The image field's pipeline must end with ToCHW and Normalize (float32),
// the label field's with Squeeze (IntDecoder). Positions are the Loader's.
type ImageStream struct {
	l            *Loader
	image, label string
	c, h, w      int
	classes      int
	device       tensor.Device
}

// ImageStreamOptions configures NewImageStream.
type ImageStreamOptions struct {
	// Image and Label name the fields ("image" and "label" when empty).
	Image, Label string
	// Classes is the number of classes (> 0): the model's outputs.
	Classes int
	// Device holds the batch tensors (tensor.DefaultDevice() when nil).
	Device tensor.Device
}

// NewImageStream returns the ImageStream over l. It takes l over: Close
// closes it.
func NewImageStream(l *Loader, opt ImageStreamOptions) (*ImageStream, error) {
	if opt.Image == "" {
		opt.Image = "image"
	}
	if opt.Label == "" {
		opt.Label = "label"
	}
	if opt.Classes <= 0 {
		return nil, fmt.Errorf("ffcv: image stream: %d classes: want > 0", opt.Classes)
	}
	dt, shape, ok := l.ColumnType(opt.Image)
	if !ok {
		return nil, fmt.Errorf("ffcv: image stream: field %q is not loaded", opt.Image)
	}
	if dt != tensor.Float32 || len(shape) != 3 {
		return nil, fmt.Errorf("ffcv: image stream: field %q gives %v %v per sample: want float32 [C, H, W] (end its pipeline with ToCHW and Normalize)", opt.Image, dt, shape)
	}
	ldt, lshape, ok := l.ColumnType(opt.Label)
	if !ok {
		return nil, fmt.Errorf("ffcv: image stream: field %q is not loaded", opt.Label)
	}
	if ldt != tensor.Int64 || len(lshape) != 0 {
		return nil, fmt.Errorf("ffcv: image stream: field %q gives %v %v per sample: want an int64 scalar (IntDecoder, Squeeze)", opt.Label, ldt, lshape)
	}
	return &ImageStream{
		l: l, image: opt.Image, label: opt.Label,
		c: shape[0], h: shape[1], w: shape[2], classes: opt.Classes, device: opt.Device,
	}, nil
}

// Loader returns the stream's Loader.
func (s *ImageStream) Loader() *Loader { return s.l }

// Shape returns the batches' channels, height and width and the number of
// classes.
func (s *ImageStream) Shape() (c, h, w, classes int) { return s.c, s.h, s.w, s.classes }

// Len returns the number of samples the Loader's rank visits per epoch.
func (s *ImageStream) Len() int { return s.l.Len() }

// BatchesPerEpoch returns the number of batches per epoch.
func (s *ImageStream) BatchesPerEpoch() int { return s.l.BatchesPerEpoch() }

// Position returns the position of the next batch.
func (s *ImageStream) Position() dataset.Position {
	p := s.l.Position()
	return dataset.Position{Epoch: p.Epoch, Batch: p.Batch}
}

// Seek moves to p; see Loader.Seek.
func (s *ImageStream) Seek(p dataset.Position) error {
	return s.l.Seek(Position{Epoch: p.Epoch, Batch: p.Batch})
}

// Next returns the batch at Position() as tensors that the caller releases,
// or io.EOF at the end of an epoch; see Loader.Next. Labels outside
// [0, classes) are an error.
func (s *ImageStream) Next(ctx context.Context) (dataset.Batch, error) {
	b, err := s.l.Next(ctx)
	if err != nil {
		return dataset.Batch{}, err // io.EOF at the end of an epoch
	}
	defer b.Release()
	labels := b.Column(s.label)
	for i, y := range labels.Int64s() {
		if y < 0 || y >= int64(s.classes) {
			return dataset.Batch{}, fmt.Errorf("ffcv: image stream: sample %d: label %d outside [0, %d)", b.Indices[i], y, s.classes)
		}
	}
	var opts []tensor.Option
	if s.device != nil {
		opts = append(opts, tensor.On(s.device))
	}
	return dataset.Batch{
		Pos:     dataset.Position{Epoch: b.Pos.Epoch, Batch: b.Pos.Batch},
		X:       b.Column(s.image).Tensor(opts...),
		Y:       labels.Tensor(opts...),
		Indices: slices.Clone(b.Indices),
	}, nil
}

// Close closes the Loader.
func (s *ImageStream) Close() error { return s.l.Close() }
