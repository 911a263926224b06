package job

import (
	"math"
	"sync"
	"time"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/tensorboard"
	"github.com/flockml/flock/train"
)

// TensorBoard writes rank 0's records of a run as TensorBoard scalars, one
// event file per run (flock train --tensorboard DIR): Record is a
// Spec.OnRecord.
type TensorBoard struct {
	w *tensorboard.Writer
	// workers scales rank 0's training throughput to the whole run's, as
	// the reporter does.
	workers int
	// failed is called once, at the first error writing.
	failed func()

	mu     sync.Mutex
	err    error
	closed bool
}

// OpenTensorBoard starts an event file in dir when this process holds
// rank 0 of the workers of comms (nil: one worker alone), as Spec.Comms
// names them; failed, if not nil, is called once, at the first error
// writing. It returns nil, whose methods do nothing, when dir is empty or
// rank 0 trains in another process of the job: the records are rank 0's,
// and so is the file.
func OpenTensorBoard(dir string, comms []dist.Comm, failed func()) (*TensorBoard, error) {
	if dir == "" {
		return nil, nil
	}
	workers, rank0 := 1, comms == nil
	for _, c := range comms {
		workers = c.Size()
		rank0 = rank0 || c.Rank() == 0
	}
	if !rank0 {
		return nil, nil
	}
	w, err := tensorboard.Create(dir)
	if err != nil {
		return nil, err
	}
	return &TensorBoard{w: w, workers: workers, failed: failed}, nil
}

// Record writes rec's scalars (TensorBoardValues) at its step and flushes
// them, so that a TensorBoard watching the directory follows the run. The
// first error is kept for Close and ends the writing.
func (l *TensorBoard) Record(rec train.Record) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil || l.closed {
		return
	}
	if rec.Kind == train.KindTrain {
		rec.ImagesPerSec *= float64(l.workers)
	}
	err := l.w.Scalars(int64(rec.Step), time.Now(), TensorBoardValues(rec)...)
	if err == nil {
		err = l.w.Flush()
	}
	if err != nil {
		l.err = err
		if l.failed != nil {
			l.failed()
		}
	}
}

// Close closes the event file and returns the first error writing it;
// calls after the first return nil.
func (l *TensorBoard) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	err := l.w.Close()
	if l.err != nil {
		return l.err
	}
	return err
}

// TensorBoardValues maps a record to TensorBoard scalars, tagged by what
// they measure:
//
//	train  train/loss, train/accuracy, train/lr, train/images_per_s,
//	       train/data_wait_s, and the communication so far: comm/bytes_sent,
//	       comm/bytes_received, comm/collectives, comm/syncs, comm/blocked_s,
//	       comm/data_parallel_bytes (what data parallel would have sent),
//	       comm/saving (data parallel's bytes over those sent, once some
//	       are), comm/layers_per_step and comm/pair_distance (for the
//	       strategies that measure them), comm/inner_bytes_sent and
//	       comm/inner_syncs (the inner level of a two-level run)
//	eval   eval/loss, eval/accuracy, eval/images_per_s
//	sync   sync/h (the length of the round it closes), sync/consensus
//	       (the consensus distance before it)
//
// The communication counts come from the training records alone, which
// every strategy that communicates fills; the synchronization records at
// the same steps repeat them. A NaN accuracy (a task without one) is left
// out; a non-finite loss is written, so that a diverged run shows.
func TensorBoardValues(rec train.Record) []tensorboard.Value {
	var vs []tensorboard.Value
	add := func(tag string, v float64) { vs = append(vs, tensorboard.Value{Tag: tag, Value: v}) }
	acc := func(tag string, v float64) {
		if !math.IsNaN(v) {
			add(tag, v)
		}
	}
	switch rec.Kind {
	case train.KindTrain:
		add("train/loss", rec.Loss)
		acc("train/accuracy", rec.Acc)
		add("train/lr", rec.LR)
		add("train/images_per_s", rec.ImagesPerSec)
		add("train/data_wait_s", rec.DataWait)
		if c := rec.Comm; c != nil {
			add("comm/bytes_sent", float64(c.Sent))
			add("comm/bytes_received", float64(c.Received))
			add("comm/collectives", float64(c.Collectives))
			add("comm/syncs", float64(c.Syncs))
			add("comm/blocked_s", c.Blocked)
			add("comm/data_parallel_bytes", float64(c.DataParallelBytes))
			if c.Sent > 0 {
				add("comm/saving", c.Saving())
			}
			if c.LayersPerStep > 0 {
				add("comm/layers_per_step", c.LayersPerStep)
			}
			if c.PairDistance > 0 {
				add("comm/pair_distance", c.PairDistance)
			}
			if c.InnerSyncs > 0 {
				add("comm/inner_bytes_sent", float64(c.InnerSent))
				add("comm/inner_syncs", float64(c.InnerSyncs))
			}
		}
	case train.KindEval:
		add("eval/loss", rec.Loss)
		acc("eval/accuracy", rec.Acc)
		add("eval/images_per_s", rec.ImagesPerSec)
	case train.KindSync:
		if rec.H > 0 {
			add("sync/h", float64(rec.H))
		}
		if rec.Comm != nil {
			add("sync/consensus", rec.Comm.Consensus)
		}
	}
	return vs
}
