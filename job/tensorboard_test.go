package job_test

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/job"
	"github.com/flockml/flock/tensorboard"
	"github.com/flockml/flock/train"
)

// TestTensorBoardValues checks the scalars of each kind of record.
func TestTensorBoardValues(t *testing.T) {
	t.Parallel()
	comm := &train.CommStats{Sent: 400, Received: 300, Collectives: 3, Blocked: 0.5, Syncs: 2, DataParallelBytes: 1000, Consensus: 0.01}
	tags := func(vs []tensorboard.Value) map[string]float64 {
		m := map[string]float64{}
		for _, v := range vs {
			m[v.Tag] = v.Value
		}
		return m
	}
	for _, c := range []struct {
		name string
		rec  train.Record
		want map[string]float64
	}{
		{"train", train.Record{Kind: train.KindTrain, Step: 10, LR: 0.1, Loss: 1.5, Acc: 0.25, ImagesPerSec: 900, DataWait: 0.002, Comm: comm},
			map[string]float64{"train/loss": 1.5, "train/accuracy": 0.25, "train/lr": 0.1, "train/images_per_s": 900, "train/data_wait_s": 0.002,
				"comm/bytes_sent": 400, "comm/bytes_received": 300, "comm/collectives": 3, "comm/syncs": 2, "comm/blocked_s": 0.5,
				"comm/data_parallel_bytes": 1000, "comm/saving": 2.5}},
		{"train alone, no accuracy, diverged", train.Record{Kind: train.KindTrain, Step: 3, LR: 1, Loss: math.Inf(1), Acc: math.NaN()},
			map[string]float64{"train/loss": math.Inf(1), "train/lr": 1, "train/images_per_s": 0, "train/data_wait_s": 0}},
		{"train, nothing sent", train.Record{Kind: train.KindTrain, Step: 1, Comm: &train.CommStats{DataParallelBytes: 8, LayersPerStep: 2.5, PairDistance: 0.3}},
			map[string]float64{"train/loss": 0, "train/accuracy": 0, "train/lr": 0, "train/images_per_s": 0, "train/data_wait_s": 0,
				"comm/bytes_sent": 0, "comm/bytes_received": 0, "comm/collectives": 0, "comm/syncs": 0, "comm/blocked_s": 0,
				"comm/data_parallel_bytes": 8, "comm/layers_per_step": 2.5, "comm/pair_distance": 0.3}},
		{"train, two levels", train.Record{Kind: train.KindTrain, Step: 2, Comm: &train.CommStats{Sent: 30, Syncs: 1, InnerSent: 20, InnerSyncs: 2}},
			map[string]float64{"train/loss": 0, "train/accuracy": 0, "train/lr": 0, "train/images_per_s": 0, "train/data_wait_s": 0,
				"comm/bytes_sent": 30, "comm/bytes_received": 0, "comm/collectives": 0, "comm/syncs": 1, "comm/blocked_s": 0,
				"comm/data_parallel_bytes": 0, "comm/saving": 0, "comm/inner_bytes_sent": 20, "comm/inner_syncs": 2}},
		{"eval", train.Record{Kind: train.KindEval, Step: 10, LR: 0.1, Loss: 0.5, Acc: 0.8, ImagesPerSec: 5000, Comm: comm},
			map[string]float64{"eval/loss": 0.5, "eval/accuracy": 0.8, "eval/images_per_s": 5000}},
		{"sync", train.Record{Kind: train.KindSync, Step: 8, LR: 0.1, H: 4, Comm: comm},
			map[string]float64{"sync/h": 4, "sync/consensus": 0.01}},
		{"unknown kind", train.Record{Kind: "later", Step: 1, Loss: 1}, map[string]float64{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := tags(job.TensorBoardValues(c.rec))
			if len(got) != len(c.want) {
				t.Errorf("tags %v, want %v", got, c.want)
			}
			for tag, w := range c.want {
				if g, ok := got[tag]; !ok || g != w {
					t.Errorf("%s = %v (%v), want %v", tag, g, ok, w)
				}
			}
		})
	}
}

// TestOpenTensorBoard checks who writes the event file: rank 0, alone or
// among in-process workers, and no one else; and that the file is written
// and closed once.
func TestOpenTensorBoard(t *testing.T) {
	t.Parallel()
	world := dist.NewLocal(2)
	for _, c := range []struct {
		name  string
		dir   string
		comms []dist.Comm
		file  bool
	}{
		{"no directory", "", nil, false},
		{"alone", t.TempDir(), nil, true},
		{"in-process workers", t.TempDir(), world, true},
		{"rank 1 alone in this process", t.TempDir(), world[1:], false},
	} {
		tb, err := job.OpenTensorBoard(c.dir, c.comms, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if (tb != nil) != c.file {
			t.Errorf("%s: writer %v, want one: %v", c.name, tb, c.file)
		}
		tb.Record(train.Record{Kind: train.KindTrain, Step: 1, Loss: 2, Acc: math.NaN(), ImagesPerSec: 100})
		if err := tb.Close(); err != nil {
			t.Errorf("%s: close: %v", c.name, err)
		}
		if err := tb.Close(); err != nil {
			t.Errorf("%s: second close: %v", c.name, err)
		}
		if c.dir == "" {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(c.dir, "events.out.tfevents.*"))
		if (len(files) == 1) != c.file {
			t.Errorf("%s: event files %q, want one: %v", c.name, files, c.file)
		}
	}
}

// TestOpenTensorBoardFailure checks that a directory that cannot be made
// is an error at the start.
func TestOpenTensorBoardFailure(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tb, err := job.OpenTensorBoard(filepath.Join(file, "runs"), nil, nil)
	var pathErr *os.PathError
	if tb != nil || !errors.As(err, &pathErr) {
		t.Fatalf("OpenTensorBoard under a file = %v, %v; want a path error", tb, err)
	}
}
