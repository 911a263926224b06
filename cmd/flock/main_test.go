package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/train"
)

// TestUsage runs command lines that stop before training and checks the
// exit status and output: help on stdout with status 0, and for every
// mistake one line on stderr with status 2.
func TestUsage(t *testing.T) {
	empty := t.TempDir()
	runCLICases(t, []cliCase{
		{"no command", nil, exitUsage, nil, []string{"Usage:", "train"}, true},
		{"help flag", []string{"--help"}, exitOK, []string{"Usage:", "flock <command>", "train", "run", "help"}, nil, false},
		{"help", []string{"help"}, exitOK, []string{"Usage:", "train"}, nil, false},
		{"help train", []string{"help", "train"}, exitOK, []string{"Usage: flock train", "--epochs N", "(default 10)", "--optimizer NAME", "(default sgd)", "--lr X", "(default 0.15)", "--warmup EPOCHS"}, nil, false},
		{"train help", []string{"train", "--help"}, exitOK, []string{"Usage: flock train", "--batch-size N", "(default 128)", "--schedule NAME", "(default cosine)"}, nil, false},
		{"train -h", []string{"train", "-h"}, exitOK, []string{"Usage: flock train"}, nil, false},
		{"help unknown", []string{"help", "fly"}, exitUsage, nil, []string{`unknown command "fly"`}, false},
		{"unknown command", []string{"fly"}, exitUsage, nil, []string{`flock: unknown command "fly"`, "flock --help"}, false},
		{"flag before command", []string{"--epochs", "3"}, exitUsage, nil, []string{"flag --epochs before a command"}, false},
		{"unknown flag", []string{"train", "--epoch", "3"}, exitUsage, nil, []string{"flag provided but not defined: -epoch", "flock train --help"}, false},
		{"negative epochs", []string{"train", "--epochs", "-1"}, exitUsage, nil, []string{"epochs -1: want > 0"}, false},
		{"zero lr", []string{"train", "--lr", "0"}, exitUsage, nil, []string{"lr 0: want a finite value > 0"}, false},
		{"negative lr", []string{"train", "--lr=-0.1"}, exitUsage, nil, []string{"lr -0.1"}, false},
		{"lr not a number", []string{"train", "--lr", "fast"}, exitUsage, nil, []string{`invalid value "fast" for flag -lr`}, false},
		{"unknown optimizer", []string{"train", "--optimizer", "rmsprop"}, exitUsage, nil, []string{`unknown optimizer "rmsprop" (want sgd, adamw, lars)`}, false},
		{"unknown model", []string{"train", "--model", "resnet"}, exitUsage, nil, []string{`unknown model "resnet"`}, false},
		{"unknown schedule", []string{"train", "--schedule", "exp"}, exitUsage, nil, []string{`unknown schedule "exp"`}, false},
		{"unknown stem", []string{"train", "--stem", "resnet"}, exitUsage, nil, []string{`unknown stem "resnet" (want auto, imagenet, cifar)`}, false},
		{"batch size", []string{"train", "--batch-size", "0"}, exitUsage, nil, []string{"batch size 0"}, false},
		{"warm-up too long", []string{"train", "--epochs", "2", "--warmup", "3"}, exitUsage, nil, []string{"warm-up 3 epochs"}, false},
		{"negative threads", []string{"train", "--threads", "-2"}, exitUsage, nil, []string{"threads -2"}, false},
		{"stray argument", []string{"train", "mlp"}, exitUsage, nil, []string{`unexpected argument "mlp"`}, false},
		{"missing data", []string{"train", "--data", empty, "--no-download"}, exitFailure, nil, []string{"Fashion-MNIST not found", empty, "--download"}, false},
		{"missing checkpoint", []string{"train", "--resume", filepath.Join(empty, "none.safetensors")}, exitFailure, nil, []string{"none.safetensors", "no such file"}, false},
	})
}

// cliCase is one invocation of the command line and what it must print.
type cliCase struct {
	name   string
	args   []string
	code   int
	stdout []string // substrings of standard output
	stderr []string // substrings of standard error
	// usage allows a failing invocation to print a whole usage text;
	// otherwise a failure is one line on stderr and nothing on stdout.
	usage bool
}

// runCLICases runs each case through run and checks its exit status and
// output.
func runCLICases(t *testing.T, cases []cliCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(c.args, &stdout, &stderr)
			if code != c.code {
				t.Errorf("exit status %d, want %d (stderr %q)", code, c.code, stderr.String())
			}
			for _, w := range c.stdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout does not contain %q:\n%s", w, stdout.String())
				}
			}
			for _, w := range c.stderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr does not contain %q:\n%s", w, stderr.String())
				}
			}
			if c.code == exitOK && stderr.Len() > 0 {
				t.Errorf("stderr not empty: %q", stderr.String())
			}
			if c.code != exitOK && !c.usage {
				if n := strings.Count(stderr.String(), "\n"); n != 1 || stdout.Len() > 0 {
					t.Errorf("%d lines on stderr and %d bytes on stdout, want one line on stderr only:\n%s", n, stdout.Len(), stderr.String())
				}
			}
		})
	}
}

// needData skips the test when Fashion-MNIST is not installed.
func needData(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("trains on Fashion-MNIST; skipped in -short mode")
	}
	if _, _, err := dataset.LoadFashionMNIST(context.Background(), dataset.FashionMNISTOptions{}); errors.Is(err, dataset.ErrNotFound) {
		t.Skipf("Fashion-MNIST is not installed: %v", err)
	}
}

// TestTrainJSON trains an MLP for one epoch with --json and a checkpoint,
// checks the records, then resumes from the checkpoint (nothing left to
// do) and refuses to resume it into another model.
func TestTrainJSON(t *testing.T) {
	needData(t)
	ckpt := filepath.Join(t.TempDir(), "mlp.safetensors")
	var stdout, stderr bytes.Buffer
	args := []string{"train", "--workers", "1", "--model", "mlp", "--epochs", "1", "--batch-size", "500", "--lr", "0.1", "--log-every", "40", "--json", "--checkpoint", ckpt}
	if code := run(args, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit status %d: %s", code, stderr.String())
	}
	var kinds []string
	var last map[string]any
	for line := range strings.Lines(stdout.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %q is not JSON: %v", line, err)
		}
		kinds = append(kinds, rec["kind"].(string))
		if rec["kind"] == "run" {
			// What ran: the flock, the whole configuration, the world.
			cfg, _ := rec["config"].(map[string]any)
			strategy, _ := cfg["strategy"].(map[string]any)
			if rec["flock_version"] == nil || cfg["model"] != "mlp" || cfg["batch_size"] != 500.0 || strategy["sync"] != "qsr" ||
				rec["world"] != 1.0 || rec["device"] != "cpu" || rec["seed"] != 1.0 {
				t.Errorf("run record %s: want flock's version, the mlp's config with its strategy's settings, world 1, the CPU and seed 1", line)
			}
			continue
		}
		for _, k := range []string{"step", "epoch", "lr", "loss", "acc", "img_per_s", "elapsed_s"} {
			if _, ok := rec[k]; !ok && rec["kind"] != "summary" {
				t.Errorf("record %s lacks %q", line, k)
			}
		}
		last = rec
	}
	if want := "run train train train eval summary"; strings.Join(kinds, " ") != want {
		t.Errorf("record kinds %v, want %s", kinds, want)
	}
	if acc := last["test_acc"].(float64); acc < 0.75 || last["steps"].(float64) != 120 {
		t.Errorf("summary %v: want 120 steps and test accuracy ≥ 0.75", last)
	}
	if _, err := os.Stat(ckpt); err != nil {
		t.Fatalf("no checkpoint: %v", err)
	}

	stdout.Reset()
	if code := run([]string{"train", "--workers", "1", "--resume", ckpt}, &stdout, &stderr); code != exitOK {
		t.Fatalf("resume: exit status %d: %s", code, stderr.String())
	}
	for _, w := range []string{"mlp", "resumed from " + ckpt + " at step 120", "test accuracy"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("resumed output does not contain %q:\n%s", w, stdout.String())
		}
	}
	stderr.Reset()
	if code := run([]string{"train", "--workers", "1", "--resume", ckpt, "--model", "cnn"}, &stdout, &stderr); code != exitFailure {
		t.Errorf("resume into another model: exit status %d, want %d", code, exitFailure)
	}
	if !strings.Contains(stderr.String(), `it holds a "mlp" model, this run trains "cnn"`) {
		t.Errorf("resume into another model: stderr %q", stderr.String())
	}
}

// TestInterrupt runs the built command, sends it SIGINT or SIGTERM after
// its first record and checks that it writes a checkpoint and exits with status 130:
// one worker at once; Local SGD's workers together at their next
// synchronization, as a checkpoint set; and the same over 2 processes
// under flock run, which forwards the signal to its ranks.
func TestInterrupt(t *testing.T) {
	needData(t)
	bin := flockBinary(t)
	mlp := []string{"--model", "mlp", "--batch-size", "100", "--log-every", "5", "--json"}
	for _, tt := range []struct {
		name string
		args []string
		set  bool
		sig  syscall.Signal
	}{
		{"one worker", append([]string{"train", "--workers", "1"}, mlp...), false, syscall.SIGINT},
		{"one worker, SIGTERM", append([]string{"train", "--workers", "1"}, mlp...), false, syscall.SIGTERM},
		{"local SGD", append([]string{"train", "--workers", "2", "--sync", "constant", "--h", "20"}, mlp...), true, syscall.SIGINT},
		{"local SGD over processes", append([]string{"run", "--nproc", "2", "--", bin, "train", "--sync", "constant", "--h", "20"}, mlp...), true, syscall.SIGINT},
		{"local SGD over processes, SIGTERM", append([]string{"run", "--nproc", "2", "--", bin, "train", "--sync", "constant", "--h", "20"}, mlp...), true, syscall.SIGTERM},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			ckpt := filepath.Join(dir, "run.safetensors")
			cmd, sc, stderr := startFlock(t, append(tt.args, "--checkpoint", ckpt)...)
			if !sc.Scan() {
				t.Fatalf("no record; stderr %q", stderr.String())
			}
			if err := cmd.Process.Signal(tt.sig); err != nil {
				t.Fatal(err)
			}
			for sc.Scan() {
			}
			err := cmd.Wait()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != exitInterrupted {
				t.Fatalf("exit %v, want status %d; stderr %q", err, exitInterrupted, stderr.String())
			}
			if !strings.Contains(stderr.String(), "checkpoint written to "+ckpt) {
				t.Errorf("stderr %q does not report the checkpoint", stderr.String())
			}
			if _, err := train.ReadCheckpointConfig(ckpt); err != nil {
				t.Errorf("no checkpoint: %v", err)
			}
			files, _ := filepath.Glob(ckpt + ".step*.rank*")
			if tt.set && len(files) != 2 || !tt.set && len(files) != 0 {
				t.Errorf("files of a checkpoint set: %v", files)
			}
		})
	}
}

// TestReporter checks the human output: a redrawn progress bar on a
// terminal, plain lines otherwise, and the summary table.
func TestReporter(t *testing.T) {
	p := train.Progress{Step: 30, TotalSteps: 100, Epoch: 2, Epochs: 5, Batch: 10, StepsPerEpoch: 20, Loss: 0.4321, ImagesPerSec: 1234, Elapsed: 3 * time.Second}
	rec := train.Record{Kind: train.KindTrain, Step: 30, Epoch: 2, LR: 0.05, Loss: 0.4321, Acc: 0.875, ImagesPerSec: 1234, Elapsed: 3}
	eval := train.Record{Kind: train.KindEval, Step: 40, Epoch: 2, Loss: 0.3, Acc: 0.9012, Elapsed: 4}
	sum := train.Summary{Epochs: 5, Steps: 100, Wall: 90 * time.Second, ImagesPerSec: 1500, TrainLoss: 0.25, Evaluated: true, TestLoss: 0.28, TestAcc: 0.9123}

	var term bytes.Buffer
	r := newReporter(&term, false, true)
	r.progress(p)
	r.record(rec)
	r.record(eval)
	r.finish(sum)
	got := term.String()
	for _, w := range []string{"\r\033[Kepoch 2/5 [===============>              ] 10/20  loss 0.4321  1234 img/s", "\r\033[Kepoch 2 test  loss 0.3000  acc 90.12%", "test accuracy     91.23%", "wall time         1m30s"} {
		if !strings.Contains(got, w) {
			t.Errorf("terminal output does not contain %q:\n%q", w, got)
		}
	}
	if strings.Contains(got, "lr 0.05") {
		t.Errorf("terminal output has a training line besides the bar:\n%q", got)
	}

	var plain bytes.Buffer
	r = newReporter(&plain, false, false)
	r.progress(p)
	r.record(rec)
	got = plain.String()
	if want := "epoch 2 step 30  lr 0.05  loss 0.4321  acc 87.50%  1234 img/s  3s\n"; got != want {
		t.Errorf("plain output %q, want %q", got, want)
	}

	var js bytes.Buffer
	r = newReporter(&js, true, true)
	r.progress(p)
	r.record(rec)
	r.finish(sum)
	lines := strings.Split(strings.TrimSpace(js.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], `{"kind":"train","step":30,"epoch":2,"lr":0.05,"loss":0.4321,"acc":0.875`) ||
		!strings.Contains(lines[1], `"kind":"summary"`) || !strings.Contains(lines[1], `"test_acc":0.9123`) {
		t.Errorf("JSON output:\n%s", js.String())
	}
}

// TestForeignSettings: a setting that only other strategies read is
// refused, naming them; one of the chosen strategy's own family is taken.
func TestForeignSettings(t *testing.T) {
	runCLICases(t, []cliCase{
		{"quantization for dp", []string{"train", "--strategy", "dp", "--sync-bits", "8"}, exitUsage, nil, []string{"--sync-bits is a setting of diloco, local, not of --strategy dp"}, false},
		{"H for dmsgd", []string{"train", "--strategy", "dmsgd", "--h", "3"}, exitUsage, nil, []string{"--h is a setting of diloco, local, not of --strategy dmsgd"}, false},
		{"budget for local", []string{"train", "--budget", "0.5"}, exitUsage, nil, []string{"--budget is a setting of jointspar, not of --strategy local"}, false},
	})
}
