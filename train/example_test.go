package train_test

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/train"
)

// Train an MLP for three epochs on a synthetic set of 8×8 images whose
// class is the band of bright rows, and evaluate it on another.
func Example() {
	cfg := train.DefaultConfig()
	cfg.Model = "mlp"
	cfg.Epochs = 3
	cfg.LR = 0.05
	cfg.BatchSize = 16
	cfg.WarmupEpochs = 0.5
	cfg.LogEvery = 0

	tr, err := train.New(cfg, synthetic(192, 4, 1), synthetic(100, 4, 2), train.Options{
		OnRecord: func(r train.Record) {
			fmt.Printf("%-5s epoch %d step %2d  accuracy %.1f\n", r.Kind, r.Epoch, r.Step, r.Acc)
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.Close()
	sum, err := tr.Run(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d epochs, %d steps, test accuracy %.1f\n", sum.Epochs, sum.Steps, sum.TestAcc)
	// Output:
	// train epoch 1 step 12  accuracy 0.7
	// eval  epoch 1 step 12  accuracy 1.0
	// train epoch 2 step 24  accuracy 1.0
	// eval  epoch 2 step 24  accuracy 1.0
	// train epoch 3 step 36  accuracy 1.0
	// eval  epoch 3 step 36  accuracy 1.0
	// 3 epochs, 36 steps, test accuracy 1.0
}

// synthetic returns n noisy 8×8 grey images in classes bands: the image of
// class c is bright in rows [2c, 2c+2), so a small model learns it fast.
func synthetic(n, classes int, seed uint64) *dataset.Images {
	r := rand.New(rand.NewPCG(seed, 0))
	m := &dataset.Images{N: n, H: 8, W: 8, C: 1, Pixels: make([]uint8, n*64), Labels: make([]int32, n)}
	for c := range classes {
		m.Classes = append(m.Classes, string(rune('a'+c)))
	}
	for i := range n {
		c := r.IntN(classes)
		m.Labels[i] = int32(c)
		img := m.Image(i)
		for p := range img {
			v := r.IntN(96)
			if row := p / 8; row/2 == c {
				v += 128
			}
			img[p] = uint8(v)
		}
	}
	return m
}
