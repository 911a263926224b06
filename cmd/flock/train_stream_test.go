package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/ffcv"
	"github.com/flockml/flock/ffcv/beton"
	"github.com/flockml/flock/job"
	"github.com/flockml/flock/train"
)

// writeImagesBeton writes m to a .beton file of raw images and returns its
// path.
func writeImagesBeton(t *testing.T, m *dataset.Images, mode beton.ImageMode) string {
	t.Helper()
	src, err := ffcv.NewImagesSource(m)
	if err != nil {
		t.Fatal(err)
	}
	src.Image = beton.RGBImageField{Mode: mode}
	path := filepath.Join(t.TempDir(), "images.beton")
	if err := beton.Write(context.Background(), path, src.Fields(), src, beton.WriterOptions{PageSize: beton.MinPageSize, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	return path
}

// randomImages returns n random c-channel images of side s in k classes.
func randomImages(n, c, s, k int, seed uint64) *dataset.Images {
	r := rand.New(rand.NewPCG(seed, 1))
	m := &dataset.Images{N: n, H: s, W: s, C: c, Pixels: make([]uint8, n*s*s*c), Labels: make([]int32, n)}
	for i := range m.Pixels {
		m.Pixels[i] = uint8(r.IntN(256))
	}
	for i := range m.Labels {
		m.Labels[i] = int32(r.IntN(k))
	}
	for i := range k {
		m.Classes = append(m.Classes, string(rune('a'+i)))
	}
	return m
}

// runUntil trains tr to step stop (to the end when stop is 0).
func runUntil(t *testing.T, tr *train.Trainer, stop int) {
	t.Helper()
	if stop == 0 {
		stop = tr.TotalSteps()
	}
	if _, err := tr.RunUntil(context.Background(), stop); err != nil {
		t.Fatal(err)
	}
}

// TestStreamMatchesMemory trains the CNN on images in memory (dataset.Loader)
// and on the same images streamed from a .beton file through ffcv.Loader,
// with no augmentation: the order of every epoch and the normalised pixels
// are the same, so every step's loss must be bit for bit the same. The
// streamed run is also stopped mid-epoch, checkpointed and resumed in a new
// Trainer, which must continue with the same losses.
func TestStreamMatchesMemory(t *testing.T) {
	for _, c := range []struct {
		name     string
		channels int
	}{{"grayscale", 1}, {"rgb", 3}} {
		t.Run(c.name, func(t *testing.T) {
			m := randomImages(60, c.channels, 12, 5, uint64(c.channels))
			path := writeImagesBeton(t, m, beton.WriteRaw)
			cfg := train.DefaultConfig()
			cfg.Model, cfg.Epochs, cfg.BatchSize, cfg.LR, cfg.LogEvery, cfg.EvalEvery = "cnn", 2, 10, 0.05, 1, 0
			cfg.WarmupEpochs = 0.5

			record := func(into map[int]float64) train.Options {
				return train.Options{OnRecord: func(r train.Record) {
					if r.Kind == train.KindTrain {
						into[r.Step] = r.Loss
					}
				}}
			}
			s := defaultStreamOptions()
			s.order = "random"
			mean, std, err := s.betonOptions().Statistics(c.channels)
			if err != nil {
				t.Fatal(err)
			}
			for i := range mean {
				mean[i], std[i] = mean[i]/255, std[i]/255
			}
			want := map[int]float64{}
			data, err := train.NewImagesData(m, dataset.LoaderOptions{BatchSize: cfg.BatchSize, Shuffle: true, Seed: cfg.Seed, Mean: mean, Std: std})
			if err != nil {
				t.Fatal(err)
			}
			mem, err := train.NewWithData(cfg, data, nil, record(want))
			if err != nil {
				t.Fatal(err)
			}
			runUntil(t, mem, 0)
			mem.Close()

			sets, err := job.OpenBeton(path, "", s.betonOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer sets.Close()
			got := map[int]float64{}
			streamed, closeData, err := sets.Build(cfg, false, record(got))
			if err != nil {
				t.Fatal(err)
			}
			defer closeData()
			if n := sets.StepsPerEpoch(cfg, 1); streamed.StepsPerEpoch() != n || n != 6 {
				t.Fatalf("steps per epoch: trainer %d, stepsPerEpoch %d, want 6", streamed.StepsPerEpoch(), n)
			}
			// Stop mid-epoch, checkpoint and resume in a new Trainer.
			ckpt := filepath.Join(t.TempDir(), "run.safetensors")
			runUntil(t, streamed, 8)
			if err := streamed.SaveCheckpoint(ckpt); err != nil {
				t.Fatal(err)
			}
			streamed.Close()
			resumed, closeResumed, err := sets.Build(cfg, false, record(got))
			if err != nil {
				t.Fatal(err)
			}
			defer closeResumed()
			if err := resumed.LoadCheckpoint(ckpt); err != nil {
				t.Fatal(err)
			}
			runUntil(t, resumed, 0)
			resumed.Close()

			if len(want) != 12 || len(got) != len(want) {
				t.Fatalf("losses of %d steps in memory, %d streamed: want 12", len(want), len(got))
			}
			for step, w := range want {
				if g := got[step]; math.Float64bits(g) != math.Float64bits(w) {
					t.Errorf("step %d: loss %v streamed, %v in memory", step, g, w)
				}
			}
		})
	}
}

// TestTrainResNet50Beton trains a ResNet-50 for one epoch on random-resized
// 160×160 crops of a few dozen synthetic JPEG images and evaluates it on
// centre crops of others, end to end through flock train.
func TestTrainResNet50Beton(t *testing.T) {
	if testing.Short() {
		t.Skip("a ResNet-50 at 160×160 on the CPU")
	}
	dir := t.TempDir()
	write := func(name string, n int, seed uint64) string {
		src := &ffcv.SyntheticSource{N: n, Width: 200, Height: 176, Classes: 4, Seed: seed,
			Image: beton.RGBImageField{Mode: beton.WriteJPEG, JPEGQuality: 90}}
		path := filepath.Join(dir, name)
		if err := beton.Write(context.Background(), path, src.Fields(), src, beton.WriterOptions{PageSize: beton.MinPageSize}); err != nil {
			t.Fatal(err)
		}
		return path
	}
	trainPath, valPath := write("train.beton", 32, 1), write("val.beton", 12, 2)
	var stdout, stderr bytes.Buffer
	args := []string{"train", "--workers", "1", "--data", trainPath, "--test-data", valPath, "--model", "resnet50",
		"--image-size", "160", "--flip", "--decode-workers", "2", "--epochs", "1", "--batch-size", "16",
		"--lr", "0.01", "--warmup", "0", "--log-every", "1", "--json"}
	if code := run(args, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit status %d: %s", code, stderr.String())
	}
	var steps, evals int
	for line := range strings.Lines(stdout.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		loss, _ := rec["loss"].(float64)
		switch rec["kind"] {
		case "train":
			steps++
			if !(loss > 0) || math.IsInf(loss, 0) {
				t.Errorf("record %v: want a finite loss > 0", rec)
			}
		case "eval":
			evals++
			if !(loss > 0) || math.IsInf(loss, 0) {
				t.Errorf("record %v: want a finite test loss > 0", rec)
			}
		}
	}
	if steps != 2 || evals != 1 {
		// 32 images in batches of 16, each step logged.
		t.Errorf("%d training and %d evaluation records: want 2 and 1\n%s", steps, evals, stdout.String())
	}
}

// TestTrainStreamUsage checks that bad streaming flags are usage errors
// naming the flag.
func TestTrainStreamUsage(t *testing.T) {
	fmnist := filepath.Join(ffcvTestdata, "fmnist_500_ndarray.beton")
	jpegs := filepath.Join(ffcvTestdata, "jpeg_q90_max256.beton")
	runCLICases(t, []cliCase{
		{"image size", []string{"train", "--data", fmnist, "--image-size", "-1"}, exitUsage, nil, []string{"image-size -1: want ≥ 0"}, false},
		{"crop scale", []string{"train", "--data", fmnist, "--crop-scale", "0.5,0.2"}, exitUsage, nil, []string{`crop-scale "0.5,0.2": want MIN,MAX`}, false},
		{"crop scale not numbers", []string{"train", "--data", fmnist, "--crop-scale", "a,b"}, exitUsage, nil, []string{`crop-scale "a,b": want comma-separated numbers`}, false},
		{"order", []string{"train", "--data", fmnist, "--data-order", "shuffled"}, exitUsage, nil, []string{`data-order "shuffled"`}, false},
		{"cache", []string{"train", "--data", fmnist, "--data-cache", "disk"}, exitUsage, nil, []string{`data-cache "disk": want process or page`}, false},
		{"decode workers", []string{"train", "--data", fmnist, "--decode-workers", "-2"}, exitUsage, nil, []string{"decode-workers -2: want ≥ 0"}, false},
		{"std of zero", []string{"train", "--workers", "1", "--batch-size", "16", "--data", jpegs, "--image-size", "32", "--std", "0"}, exitFailure, nil, []string{"--std [0]: want values > 0"}, false},
		{"statistics per channel", []string{"train", "--workers", "1", "--batch-size", "16", "--data", jpegs, "--image-size", "32", "--mean", "0.1,0.2"}, exitFailure, nil, []string{"--mean and --std: 2 and 3 values for 3-channel images"}, false},
		{"arrays cropped", []string{"train", "--workers", "1", "--batch-size", "16", "--data", fmnist, "--image-size", "16"}, exitFailure, nil, []string{`--image-size 16: field "image" holds arrays`}, false},
	})
}

// TestTrainDataWaitReported checks that the summary reports the wait for
// data per step, in JSON and in the table.
func TestTrainDataWaitReported(t *testing.T) {
	t.Parallel()
	fmnist := filepath.Join(ffcvTestdata, "fmnist_500_ndarray.beton")
	for _, jsonOut := range []bool{true, false} {
		args := []string{"train", "--workers", "1", "--data", fmnist, "--model", "mlp", "--epochs", "1", "--batch-size", "100"}
		if jsonOut {
			args = append(args, "--json")
		}
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != exitOK {
			t.Fatalf("exit status %d: %s", code, stderr.String())
		}
		out := stdout.String()
		if jsonOut {
			lines := strings.Split(strings.TrimSpace(out), "\n")
			var sum map[string]any
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
				t.Fatal(err)
			}
			if w, ok := sum["data_wait_s"].(float64); !ok || w < 0 {
				t.Errorf("summary %v: want data_wait_s ≥ 0", sum)
			}
		} else if !strings.Contains(out, "waiting on data") {
			t.Errorf("table without the wait for data:\n%s", out)
		}
	}
}
