package train_test

import (
	"context"
	"errors"
	"testing"

	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/train"
)

// slice returns the first n images of m, sharing its storage.
func slice(m *dataset.Images, n int) *dataset.Images {
	sz := m.H * m.W * m.C
	return &dataset.Images{N: n, H: m.H, W: m.W, C: m.C, Pixels: m.Pixels[:n*sz], Labels: m.Labels[:n], Classes: m.Classes}
}

// TestLearnsFashionMNIST trains the default CNN for two epochs on 2000
// Fashion-MNIST images and checks that the training loss falls and the test
// accuracy on 1000 others is far above chance.
func TestLearnsFashionMNIST(t *testing.T) {
	if testing.Short() {
		t.Skip("trains on real data for a few seconds; skipped in -short mode")
	}
	trainSet, testSet, err := dataset.LoadFashionMNIST(context.Background(), dataset.FashionMNISTOptions{})
	if errors.Is(err, dataset.ErrNotFound) {
		t.Skipf("Fashion-MNIST is not installed: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	cfg := train.DefaultConfig()
	cfg.Epochs = 2
	cfg.BatchSize = 64
	cfg.LogEvery = 8
	var rec recorder
	tr, err := train.New(cfg, slice(trainSet, 2000), slice(testSet, 1000), train.Options{OnRecord: rec.add})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	sum, err := tr.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var losses []float64
	for _, r := range rec.recs {
		if r.Kind == train.KindTrain {
			losses = append(losses, r.Loss)
		}
	}
	t.Logf("training losses %.3f; test loss %.3f, accuracy %.3f; %.0f img/s", losses, sum.TestLoss, sum.TestAcc, sum.ImagesPerSec)
	if first, last := losses[0], losses[len(losses)-1]; !(last < 0.6*first) {
		t.Errorf("training loss went from %.3f to %.3f, want a fall of at least 40%%", first, last)
	}
	if !sum.Evaluated || sum.TestAcc < 0.6 {
		t.Errorf("test accuracy %.3f (evaluated %v), want ≥ 0.6", sum.TestAcc, sum.Evaluated)
	}
	if sum.Steps != 2*32 || sum.Epochs != 2 || sum.Images != 4000 {
		t.Errorf("summary %+v, want 64 steps, 2 epochs, 4000 images", sum)
	}
}

// TestMemoryFlat checks that a step releases every tensor it makes: once
// the buffer pool has seen a step and an evaluation, further epochs take
// every buffer from it.
func TestMemoryFlat(t *testing.T) {
	cfg := tinyConfig()
	cfg.Model = "cnn"
	cfg.Epochs = 6
	tr, err := train.New(cfg, synthetic(96, 3, 1), synthetic(40, 3, 2), train.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.RunUntil(context.Background(), 12); err != nil {
		t.Fatal(err)
	}
	_, before, _ := cpu.Default().PoolStats()
	if _, err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, after, _ := cpu.Default().PoolStats()
	if after != before {
		t.Errorf("the buffer pool allocated %d more buffers over 4 more epochs", after-before)
	}
}
