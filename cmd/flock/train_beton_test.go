package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockml/flock/ffcv"
	"github.com/flockml/flock/ffcv/beton"
)

const ffcvTestdata = "../../testdata/ffcv"

// TestTrainBeton trains an MLP for one epoch on .beton files: FFCV's own
// Fashion-MNIST file (uint8 (28, 28) arrays) and a file of 1-channel raw
// images written from it, and checks the records of the run.
func TestTrainBeton(t *testing.T) {
	fmnist := filepath.Join(ffcvTestdata, "fmnist_500_ndarray.beton")
	// The first 300 samples again, as raw 1-channel images.
	ref, err := beton.Open(fmnist, beton.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src := &ffcv.ArraySource{N: 300, H: 28, W: 28, C: 1, Labels: make([]int64, 300), Image: beton.RGBImageField{Mode: beton.WriteRaw}}
	for i := range 300 {
		a, err := ref.NDArray(0, i)
		if err != nil {
			t.Fatal(err)
		}
		src.Pixels = append(src.Pixels, a...)
		src.Labels[i] = ref.Int(1, i)
	}
	ref.Close()
	raw := filepath.Join(t.TempDir(), "raw.beton")
	if err := beton.Write(context.Background(), raw, src.Fields(), src, beton.WriterOptions{PageSize: beton.MinPageSize}); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name, train, test string
		steps             float64
	}{
		{"ndarray", fmnist, fmnist, 10},
		{"raw images", raw, fmnist, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := []string{"train", "--workers", "1", "--data", c.train, "--test-data", c.test, "--model", "mlp", "--epochs", "1", "--batch-size", "50", "--lr", "0.1", "--json"}
			if code := run(args, &stdout, &stderr); code != exitOK {
				t.Fatalf("exit status %d: %s", code, stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			var sum map[string]any
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
				t.Fatal(err)
			}
			if sum["kind"] != "summary" || sum["steps"] != c.steps {
				t.Errorf("summary %v: want %v steps", sum, c.steps)
			}
			// 10 classes after one short epoch: well above chance.
			if acc, ok := sum["test_acc"].(float64); !ok || acc < 0.3 {
				t.Errorf("summary %v: want a test accuracy above 0.3", sum)
			}
		})
	}

	var stdout bytes.Buffer
	if code := run([]string{"train", "--workers", "1", "--data", fmnist, "--model", "mlp", "--epochs", "1", "--batch-size", "100"}, &stdout, &bytes.Buffer{}); code != exitOK {
		t.Fatalf("without a test set: exit status %d", code)
	}
	out := stdout.String()
	if !strings.Contains(out, "on "+fmnist+", 500 training / 0 test images") {
		t.Errorf("without a test set: output\n%s", out)
	}
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "test accuracy") && !strings.HasSuffix(strings.TrimSpace(line), "-") {
			t.Errorf("without a test set: %q", line)
		}
	}
}

// TestTrainBetonUsage checks the mistakes of --data and --test-data.
func TestTrainBetonUsage(t *testing.T) {
	dir := t.TempDir()
	runCLICases(t, []cliCase{
		{"test data without beton", []string{"train", "--test-data", "x.beton"}, exitUsage, nil, []string{"--test-data x.beton needs --data TRAIN.beton"}, false},
		{"missing beton", []string{"train", "--data", filepath.Join(dir, "none.beton")}, exitFailure, nil, []string{"none.beton", "no such file"}, false},
		{"images of several sizes", []string{"train", "--workers", "1", "--batch-size", "16", "--data", filepath.Join(ffcvTestdata, "jpeg_q90_max256.beton")}, exitFailure, nil, []string{"jpeg_q90_max256.beton: ffcv: loader", "needs images of one size", "--image-size crops them"}, false},
		{"help", []string{"train", "--help"}, exitOK, []string{"--test-data PATH", ".beton file of training images"}, nil, false},
	})
}
