package main

import "testing"

// TestTrainMessages checks what short runs on a slice of Fashion-MNIST
// say: the images actually used, and a --workers too large for them.
func TestTrainMessages(t *testing.T) {
	needData(t)
	short := []string{"train", "--model", "mlp", "--epochs", "1", "--batch-size", "500", "--eval-every", "0"}
	runCLICases(t, []cliCase{
		{"train images", append(short, "--workers", "1", "--train-images", "1000"), exitOK,
			[]string{"1000 training / 10000 test images", "  1 epochs × 2 steps of 500"}, nil, false},
		{"too many workers", append(short, "--workers", "4", "--train-images", "3"), exitUsage,
			nil, []string{"flock train: --workers 4 share 3 training images: each worker needs at least one"}, false},
	})
}
