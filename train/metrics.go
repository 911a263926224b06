package train

import (
	"fmt"
	"strconv"
	"time"
)

// Kinds of Record.
const (
	// KindTrain records summarise the steps since the previous training
	// record: at every LogEvery-th step and at the end of each epoch.
	KindTrain = "train"
	// KindEval records hold an evaluation on the test set.
	KindEval = "eval"
	// KindSync records mark a synchronization of a local-update strategy:
	// Step is the number of steps taken when it happened, H the length of
	// the round it closed, and Comm.Consensus the workers' consensus
	// distance just before it.
	KindSync = "sync"
)

// Record is one line of a run's log (JSON Lines with --json).
type Record struct {
	Kind string `json:"kind"`
	// Step is the number of optimizer steps taken so far in the run.
	Step int `json:"step"`
	// Epoch is the 1-based epoch the last of those steps belongs to.
	Epoch int `json:"epoch"`
	// LR is the learning rate of the last step.
	LR float64 `json:"lr"`
	// Loss is the task's mean loss per sample (image, sequence, …): over
	// the samples of the steps since the previous training record, or over
	// the test set.
	Loss float64 `json:"loss"`
	// Acc is the fraction of those samples the task counts correct (the
	// training accuracy is measured on the batches as they were trained
	// on, before each step's update); NaN for a task without accuracy
	// (Regression).
	Acc float64 `json:"acc"`
	// ImagesPerSec is the throughput of those steps (of the evaluation for
	// KindEval).
	ImagesPerSec float64 `json:"img_per_s"`
	// Elapsed is the run's wall time so far in seconds, across resumes.
	Elapsed float64 `json:"elapsed_s"`
	// DataWait is the mean time in seconds a training step of those steps
	// waited for its batch (0 when the data keeps ahead of the steps).
	DataWait float64 `json:"data_wait_s,omitempty"`
	// H is the length of the round a KindSync record closes.
	H int `json:"h,omitempty"`
	// Comm is this worker's communication so far, for strategies that
	// communicate.
	Comm *CommStats `json:"comm,omitempty"`
}

// Progress is reported after every step, for progress bars.
type Progress struct {
	// Step is the number of steps taken; TotalSteps the number in the run.
	Step, TotalSteps int
	// Epoch is 1-based; Batch the number of the epoch's steps taken.
	Epoch, Epochs, Batch, StepsPerEpoch int
	// Loss is the mean loss since the last training record.
	Loss float64
	// ImagesPerSec is the training throughput since the last record.
	ImagesPerSec float64
	LR           float64
	Elapsed      time.Duration
}

// Summary describes a finished (or stopped) run.
type Summary struct {
	// Epochs is the number of whole epochs done; Steps the number of steps.
	Epochs, Steps int
	// Wall is the run's wall time across resumes; TrainTime the part spent
	// in training steps.
	Wall, TrainTime time.Duration
	// Images is the number of training images processed.
	Images int64
	// ImagesPerSec is Images/TrainTime.
	ImagesPerSec float64
	// TrainLoss and TrainAcc are the mean loss and accuracy over the last
	// epoch trained (or the part of it done).
	TrainLoss, TrainAcc float64
	// Evaluated reports whether TestLoss and TestAcc hold an evaluation.
	Evaluated         bool
	TestLoss, TestAcc float64
	// Comm is this worker's communication, for strategies that
	// communicate (nil otherwise).
	Comm *CommStats
	// DataWait is the mean time a step waited for its batch, over the
	// steps taken since the Trainer was made (it is not checkpointed).
	DataWait time.Duration
}

// meter accumulates per-image loss sums, correct counts and image counts.
type meter struct {
	loss    float64
	correct int64
	images  int64
	time    time.Duration
	// wait is the part of time spent waiting for batches over steps
	// steps; neither is checkpointed.
	wait  time.Duration
	steps int64
}

func (m *meter) addWait(d time.Duration) {
	m.wait += d
	m.steps++
}

// waitPerStep returns the mean wait for a batch per step.
func (m meter) waitPerStep() time.Duration {
	if m.steps == 0 {
		return 0
	}
	return m.wait / time.Duration(m.steps)
}

func (m *meter) add(lossSum float64, correct, images int64, d time.Duration) {
	m.loss += lossSum
	m.correct += correct
	m.images += images
	m.time += d
}

func (m meter) mean() (loss, acc float64) {
	if m.images == 0 {
		return 0, 0
	}
	return m.loss / float64(m.images), float64(m.correct) / float64(m.images)
}

func (m meter) rate() float64 {
	if m.time <= 0 {
		return 0
	}
	return float64(m.images) / m.time.Seconds()
}

// encode stores m in checkpoint metadata under prefix, exactly: floats in
// the shortest form that parses back to the same bits.
func (m meter) encode(meta map[string]string, prefix string) {
	meta[prefix+".loss"] = strconv.FormatFloat(m.loss, 'g', -1, 64)
	meta[prefix+".correct"] = strconv.FormatInt(m.correct, 10)
	meta[prefix+".images"] = strconv.FormatInt(m.images, 10)
	meta[prefix+".time_ns"] = strconv.FormatInt(int64(m.time), 10)
}

func (m *meter) decode(meta map[string]string, prefix string) error {
	var err error
	parse := func(key string, f func(string) error) {
		if err == nil {
			if e := f(meta[prefix+key]); e != nil {
				err = fmt.Errorf("metadata %s%s %q: %w", prefix, key, meta[prefix+key], e)
			}
		}
	}
	parse(".loss", func(s string) (e error) { m.loss, e = strconv.ParseFloat(s, 64); return })
	parse(".correct", func(s string) (e error) { m.correct, e = strconv.ParseInt(s, 10, 64); return })
	parse(".images", func(s string) (e error) { m.images, e = strconv.ParseInt(s, 10, 64); return })
	parse(".time_ns", func(s string) error {
		ns, e := strconv.ParseInt(s, 10, 64)
		m.time = time.Duration(ns)
		return e
	})
	return err
}
