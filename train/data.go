package train

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/flockml/flock/dataset"
)

// Batches is where a Trainer's batches come from: a data set cut into
// batches, epoch after epoch, in an order that is a pure function of the
// position, so that a run resumes exactly where a checkpoint left it. Any
// inputs and targets will do (images and labels, token ids and the next
// ones, features and values): the model and the Task give them meaning.
// TensorData holds samples in memory.
//
// The order must depend on nothing but (seed, epoch, rank, world) and
// augmentations on nothing but (seed, epoch, sample).
type Batches interface {
	// Len returns the number of samples this rank visits per epoch.
	Len() int
	// BatchesPerEpoch returns the number of batches per epoch.
	BatchesPerEpoch() int
	// Position returns the position of the next batch.
	Position() dataset.Position
	// Seek moves to p: the next batch is batch p.Batch of epoch p.Epoch.
	Seek(p dataset.Position) error
	// Next returns the batch at Position() and moves past it: inputs X
	// and targets Y whose first axis is the batch's, which the caller
	// releases. At the end of an epoch it returns io.EOF and moves to the
	// start of the next one.
	Next(ctx context.Context) (dataset.Batch, error)
}

// Data is Batches of images for classification, from which New and
// NewWithData size a model of package nn/models: images float32
// [B, C, H, W] and labels int64 [B]. dataset.Loader over images in memory
// (ImagesData) and package ffcv's streaming loader over a .beton file
// (ffcv.ImageStream) are Data.
type Data interface {
	Batches
	// Shape returns the images' channels, height and width as the batches
	// hold them, and the number of classes.
	Shape() (c, h, w, classes int)
}

// ImagesData is Data over images in memory: a dataset.Loader and the images
// it cuts.
type ImagesData struct {
	*dataset.Loader
	Images *dataset.Images
}

var _ Data = ImagesData{}

// NewImagesData returns the Data of m cut by a dataset.Loader with opt.
func NewImagesData(m *dataset.Images, opt dataset.LoaderOptions) (ImagesData, error) {
	l, err := dataset.NewLoader(m, opt)
	if err != nil {
		return ImagesData{}, fmt.Errorf("train: %w", err)
	}
	return ImagesData{Loader: l, Images: m}, nil
}

// Shape returns the images' shape and number of classes.
func (d ImagesData) Shape() (c, h, w, classes int) {
	return d.Images.C, d.Images.H, d.Images.W, len(d.Images.Classes)
}

// Next returns the next batch, or io.EOF at the end of an epoch.
func (d ImagesData) Next(context.Context) (dataset.Batch, error) {
	if b, ok := d.Loader.Next(); ok {
		return b, nil
	}
	return dataset.Batch{}, io.EOF
}

// NewWithData builds a Trainer as New does, over batches from trainData and,
// when testData is not nil, evaluating on testData (which should visit the
// whole test set once per epoch, in a fixed order). The model's input and
// number of classes come from trainData. Config.TrainImages is the data's
// business: trainData is used as it is.
func NewWithData(cfg Config, trainData, testData Data, opts Options) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if trainData == nil {
		return nil, errors.New("train: no training set")
	}
	if opts.CheckpointEvery < 0 {
		return nil, fmt.Errorf("train: checkpoint every %d steps: want ≥ 0", opts.CheckpointEvery)
	}
	if opts.CheckpointPath != "" {
		if err := checkCheckpointPath(opts.CheckpointPath); err != nil {
			return nil, err
		}
	}
	c, h, w, k := trainData.Shape()
	if testData != nil {
		tc, th, tw, tk := testData.Shape()
		if tc != c || th != h || tw != w || tk != k {
			return nil, fmt.Errorf("train: test images %d×%d×%d in %d classes differ from training images %d×%d×%d in %d classes",
				tc, th, tw, tk, c, h, w, k)
		}
	}
	if trainData.BatchesPerEpoch() == 0 {
		return nil, fmt.Errorf("train: the training set gives no batch (%d images)", trainData.Len())
	}
	sched, err := cfg.LRSchedule(trainData.BatchesPerEpoch())
	if err != nil {
		return nil, err
	}
	return newTrainer(cfg, trainData, testData, sched, opts)
}
