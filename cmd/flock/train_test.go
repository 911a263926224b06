package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/flockml/flock/safetensors"
)

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

// fullWriter fails every write, as /dev/full does.
type fullWriter struct{}

func (fullWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// TestTrainFaults checks short runs that must fail: a diverged run (unless
// --diverged-steps 0 lets it go on, its NaN losses written as null) and a
// run whose output cannot be written.
func TestTrainFaults(t *testing.T) {
	needData(t)
	short := []string{"train", "--workers", "1", "--model", "mlp", "--epochs", "1", "--train-images", "2000", "--batch-size", "100", "--log-every", "5", "--eval-every", "0"}
	var stdout, stderr bytes.Buffer
	if code := run(append(short, "--lr", "1e6", "--json", "--diverged-steps", "0"), &stdout, &stderr); code != exitOK {
		t.Fatalf("diverged run kept going: exit status %d: %s", code, stderr.String())
	}
	nulls := 0
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	for _, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %q is not JSON: %v", line, err)
		}
		if v, ok := rec["loss"]; ok && v == nil {
			nulls++
		}
	}
	if len(lines) != 7 || nulls == 0 || !strings.Contains(lines[0], `"kind":"run"`) || !strings.Contains(lines[6], `"kind":"summary"`) {
		t.Errorf("%d records, %d with a null loss, want the run, 4 training records, an evaluation, some null, and a summary:\n%s", len(lines), nulls, stdout.String())
	}

	runCLICases(t, []cliCase{
		{"diverged", append(short, "--lr", "1e6", "--diverged-steps", "3"), exitFailure,
			nil, []string{"flock train: train: step ", "the training loss diverged", "for 3 steps in a row"}, true},
		{"negative diverged steps", append(short, "--diverged-steps", "-1"), exitUsage,
			nil, []string{"diverged-steps -1: want ≥ 0"}, false},
	})

	for _, json := range []bool{false, true} {
		ckpt := filepath.Join(t.TempDir(), "run.safetensors")
		args := append(short, "--checkpoint", ckpt)
		if json {
			args = append(args, "--json")
		}
		stderr.Reset()
		if code := run(args, fullWriter{}, &stderr); code != exitFailure {
			t.Errorf("json %v: exit status %d with a full stdout, want %d (stderr %q)", json, code, exitFailure, stderr.String())
		}
		want := "flock train: write output: no space left on device; stopped after step "
		if !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "checkpoint written to "+ckpt) {
			t.Errorf("json %v: stderr %q, want %q and the checkpoint", json, stderr.String(), want)
		}
	}
}

// TestTrainCheckpointFaults checks the checkpoint paths and files flock
// train refuses, each before training: a directory that does not exist, a
// --checkpoint-every without a checkpoint, and a checkpoint whose stored
// settings are bad, which is the file's fault, not the command line's.
func TestTrainCheckpointFaults(t *testing.T) {
	needData(t)
	dir := t.TempDir()
	short := []string{"train", "--workers", "1", "--model", "mlp", "--epochs", "1", "--train-images", "1000", "--batch-size", "100", "--eval-every", "0"}
	ckpt := filepath.Join(dir, "run.safetensors")
	var stdout, stderr bytes.Buffer
	if code := run(append(short, "--checkpoint", ckpt, "--checkpoint-every", "3", "--stop-after", "4"), &stdout, &stderr); code != exitOK {
		t.Fatalf("exit status %d: %s", code, stderr.String())
	}
	f, err := safetensors.Open(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if f.Metadata["step"] != "4" {
		t.Errorf("checkpoint at step %s, want 4", f.Metadata["step"])
	}
	f.Metadata["config"] = strings.Replace(f.Metadata["config"], `"batch_size":100`, `"batch_size":-5`, 1)
	bad := filepath.Join(dir, "bad.safetensors")
	if err := safetensors.WriteFile(bad, f.Tensors, f.Metadata); err != nil {
		t.Fatal(err)
	}

	// A missing directory is made; one under a file cannot be.
	missing := filepath.Join(dir, "no-such-dir", "run.safetensors")
	if code := run(append(short, "--checkpoint", missing, "--stop-after", "2"), &stdout, &stderr); code != exitOK {
		t.Fatalf("checkpoint in a missing directory: exit status %d: %s", code, stderr.String())
	}
	if _, err := os.Stat(missing); err != nil {
		t.Errorf("checkpoint in a missing directory: %v", err)
	}
	underFile := filepath.Join(ckpt, "sub", "run.safetensors")
	runCLICases(t, []cliCase{
		{"directory under a file", append(short, "--checkpoint", underFile), exitFailure,
			nil, []string{"flock train: checkpoint " + underFile + ": mkdir " + ckpt + ": not a directory"}, false},
		{"every without checkpoint", append(short, "--checkpoint-every", "5"), exitUsage,
			nil, []string{"--checkpoint-every needs --checkpoint PATH"}, false},
		{"bad stored value", []string{"train", "--resume", bad}, exitFailure,
			nil, []string{"checkpoint " + bad + ": stored config: batch size -5: want > 0"}, false},
	})
}
