package train_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/train"
)

// slowData delays every batch, as a data source that cannot keep up.
type slowData struct {
	train.ImagesData
	delay time.Duration
}

func (d slowData) Next(ctx context.Context) (dataset.Batch, error) {
	time.Sleep(d.delay)
	return d.ImagesData.Next(ctx)
}

// TestDataWait checks that the records and the summary report the time
// the steps waited for their batches, and that NewWithData checks its data.
func TestDataWait(t *testing.T) {
	t.Parallel()
	cfg := tinyConfig()
	cfg.Epochs = 1
	set := synthetic(96, 3, 1)
	data, err := train.NewImagesData(set, dataset.LoaderOptions{BatchSize: cfg.BatchSize, Shuffle: true, Seed: cfg.Seed})
	if err != nil {
		t.Fatal(err)
	}
	const delay = 20 * time.Millisecond
	var waits []float64
	tr, err := train.NewWithData(cfg, slowData{data, delay}, nil, train.Options{OnRecord: func(r train.Record) {
		if r.Kind == train.KindTrain {
			waits = append(waits, r.DataWait)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	sum, err := tr.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(waits) != 6 {
		t.Fatalf("%d training records, want 6", len(waits))
	}
	for i, w := range waits {
		if w < delay.Seconds() {
			t.Errorf("record %d: data wait %vs, want ≥ %v", i, w, delay)
		}
	}
	if sum.DataWait < delay || sum.DataWait > sum.TrainTime {
		t.Errorf("summary: data wait %v per step, want ≥ %v and at most the training time %v", sum.DataWait, delay, sum.TrainTime)
	}

	other := synthetic(10, 4, 2)
	test, err := train.NewImagesData(other, dataset.LoaderOptions{BatchSize: 5})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := train.NewWithData(cfg, data, test, train.Options{}); err == nil || !strings.Contains(err.Error(), "in 4 classes differ from training images") {
		t.Errorf("test data of other classes: error %v", err)
	}
	if _, err := train.NewWithData(cfg, nil, nil, train.Options{}); err == nil || !strings.Contains(err.Error(), "no training set") {
		t.Errorf("no data: error %v", err)
	}
}
