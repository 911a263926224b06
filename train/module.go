package train

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/tensor"
)

// NewModule builds a Trainer for a model of the caller's: any nn.Layer,
// trained on task (Classification, Regression or one's own) over the
// batches of trainData, evaluated on testData (nil: no evaluation). The
// Trainer owns the model (Close releases it) and moves it to cfg.Device.
// cfg.Model only names the model in logs and checkpoints; the optimizer,
// the schedule, the seed, the epochs and every strategy are cfg's, as for
// New — Local SGD with QSR trains a user's model as it trains a ResNet.
// Config.TrainImages is the data's business.
func NewModule(cfg Config, model nn.Layer, task Task, trainData, testData Batches, opts Options) (*Trainer, error) {
	if err := cfg.validateRun(); err != nil {
		return nil, err
	}
	switch {
	case model == nil:
		return nil, errors.New("train: no model")
	case task == nil:
		return nil, errors.New("train: no task")
	case trainData == nil:
		return nil, errors.New("train: no training set")
	case trainData.BatchesPerEpoch() == 0:
		return nil, fmt.Errorf("train: the training set gives no batch (%d samples)", trainData.Len())
	case opts.CheckpointEvery < 0:
		return nil, fmt.Errorf("train: checkpoint every %d steps: want ≥ 0", opts.CheckpointEvery)
	}
	if opts.CheckpointPath != "" {
		if err := checkCheckpointPath(opts.CheckpointPath); err != nil {
			return nil, err
		}
	}
	sched, err := cfg.LRSchedule(trainData.BatchesPerEpoch())
	if err != nil {
		return nil, err
	}
	return newTrainerOf(cfg, model, task, tensor.NewGenerator(cfg.Seed), trainData, testData, sched, opts)
}

// TensorData is Batches over samples held in memory: inputs X [N, …] and
// targets Y [N, …] of any dtypes, cut along their first axis into batches
// of opt.BatchSize, each epoch in the order of dataset.Permutation(N,
// opt.Seed, epoch) when opt.Shuffle, and shared by opt.World ranks as
// dataset.Loader shares images (rank r takes every World-th sample of the
// order from the r-th, ⌊N/World⌋ in all). Batches are made on opt.Device;
// opt.Mean and opt.Std are not used.
type TensorData struct {
	x, y    *tensor.Tensor
	opt     dataset.LoaderOptions
	perRank int
	batches int
	pos     dataset.Position
	// order holds this rank's sample indices of epoch orderFor.
	order    []int64
	orderFor int
}

var _ Batches = (*TensorData)(nil)

// NewTensorData returns the batches of the samples x and y (which it
// retains; Close releases them), at Position{0, 0}.
func NewTensorData(x, y *tensor.Tensor, opt dataset.LoaderOptions) (*TensorData, error) {
	switch {
	case x.Dim() == 0 || y.Dim() == 0 || x.Size(0) != y.Size(0):
		return nil, fmt.Errorf("train: samples %v and targets %v: want the same first axis", x.Shape(), y.Shape())
	case opt.BatchSize <= 0:
		return nil, fmt.Errorf("train: batch size %d: want > 0", opt.BatchSize)
	}
	if opt.World == 0 {
		opt.World = 1
	}
	if opt.World < 0 || opt.Rank < 0 || opt.Rank >= opt.World {
		return nil, fmt.Errorf("train: rank %d of world %d: want 0 ≤ rank < world", opt.Rank, opt.World)
	}
	d := &TensorData{x: x.Retain(), y: y.Retain(), opt: opt, orderFor: -1}
	d.perRank = x.Size(0) / opt.World
	d.batches = d.perRank / opt.BatchSize
	if !opt.DropLast && d.perRank%opt.BatchSize != 0 {
		d.batches++
	}
	return d, nil
}

// Len implements Batches.
func (d *TensorData) Len() int { return d.perRank }

// BatchesPerEpoch implements Batches.
func (d *TensorData) BatchesPerEpoch() int { return d.batches }

// Position implements Batches.
func (d *TensorData) Position() dataset.Position { return d.pos }

// Seek implements Batches.
func (d *TensorData) Seek(p dataset.Position) error {
	if p.Epoch < 0 || p.Batch < 0 || p.Batch > d.batches {
		return fmt.Errorf("train: seek to epoch %d batch %d: want epoch ≥ 0 and batch in [0, %d]", p.Epoch, p.Batch, d.batches)
	}
	d.pos = p
	return nil
}

// Next implements Batches.
func (d *TensorData) Next(context.Context) (dataset.Batch, error) {
	if d.pos.Batch >= d.batches {
		d.pos = dataset.Position{Epoch: d.pos.Epoch + 1}
		return dataset.Batch{}, io.EOF
	}
	if d.orderFor != d.pos.Epoch {
		n, w := d.x.Size(0), d.opt.World
		perm := make([]int, n)
		if d.opt.Shuffle {
			perm = dataset.Permutation(n, d.opt.Seed, d.pos.Epoch)
		} else {
			for i := range perm {
				perm[i] = i
			}
		}
		d.order = d.order[:0]
		for k := d.opt.Rank; k < d.perRank*w; k += w {
			d.order = append(d.order, int64(perm[k]))
		}
		d.orderFor = d.pos.Epoch
	}
	lo := d.pos.Batch * d.opt.BatchSize
	rows := d.order[lo:min(lo+d.opt.BatchSize, len(d.order))]
	idx := tensor.FromSlice(rows, tensor.Shape{len(rows)}, tensor.On(d.x.Device()))
	defer idx.Release()
	b := dataset.Batch{Pos: d.pos, X: d.take(d.x, idx), Y: d.take(d.y, idx)}
	for _, r := range rows {
		b.Indices = append(b.Indices, int(r))
	}
	d.pos.Batch++
	return b, nil
}

// take returns the rows idx of t on the batches' device.
func (d *TensorData) take(t, idx *tensor.Tensor) *tensor.Tensor {
	rows := tensor.IndexSelect(t, 0, idx)
	if d.opt.Device == nil || rows.Device() == d.opt.Device {
		return rows
	}
	defer rows.Release()
	return rows.To(d.opt.Device)
}

// Close releases the samples.
func (d *TensorData) Close() {
	d.x.Release()
	d.y.Release()
}
