package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockml/flock/safetensors"
)

// localArgs trains the MLP with Local SGD + QSR on 2 workers × 1000
// images for 2 epochs of 10 steps; QSR's rounds are 0:3 3:3 6:3 9:3 …, so
// step 7 and the end of epoch 1 fall inside rounds.
func localArgs(extra ...string) []string {
	return append([]string{"train", "--strategy", "local", "--sync", "qsr", "--h-base", "3", "--qsr-alpha", "0.04",
		"--model", "mlp", "--train-images", "2000", "--epochs", "2", "--batch-size", "100", "--lr", "0.05",
		"--log-every", "1", "--eval-every", "0", "--json"}, extra...)
}

// flockOutput runs the built flock and returns its standard output; lines
// of flock run's ranks lose their "[rank] " prefix and only rank 0's are kept.
func flockOutput(t *testing.T, args ...string) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(flockBinary(t), args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("flock %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if args[0] != "run" {
		return out
	}
	var kept []string
	for line := range strings.Lines(string(out)) {
		if rest, ok := strings.CutPrefix(line, "[0] "); ok {
			kept = append(kept, rest)
		}
	}
	return []byte(strings.Join(kept, ""))
}

// trainLosses returns the loss of every training record by step, and the
// steps of the synchronization records.
func trainLosses(t *testing.T, out []byte) (map[float64]float64, []float64) {
	t.Helper()
	losses := map[float64]float64{}
	var syncs []float64
	for line := range strings.Lines(string(out)) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		switch rec["kind"] {
		case "train":
			losses[rec["step"].(float64)] = rec["loss"].(float64)
		case "sync":
			syncs = append(syncs, rec["step"].(float64))
		}
	}
	return losses, syncs
}

// setWeights returns the model tensors of rank r's file of the checkpoint
// set whose manifest is at path.
func setWeights(t *testing.T, path string, r int) map[string][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m struct{ Files []string }
	if err := json.Unmarshal(data, &m); err != nil || len(m.Files) <= r {
		t.Fatalf("manifest %s: %v %s", path, err, data)
	}
	f, err := safetensors.Open(filepath.Join(filepath.Dir(path), m.Files[r]))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, name := range f.Names() {
		if strings.HasPrefix(name, "model.") {
			out[name] = f.Tensors[name].Data
		}
	}
	return out
}

// TestLocalAcrossProcesses checks that Local SGD on 2 in-process workers
// and on 2 processes (flock run) log bit-identical losses and end with
// bit-identical weights, and that a multi-process run stopped mid-round
// and resumed from its checkpoint set reproduces them too.
func TestLocalAcrossProcesses(t *testing.T) {
	needData(t)
	dir := t.TempDir()
	bin := flockBinary(t)
	a := filepath.Join(dir, "a.ckpt")
	b := filepath.Join(dir, "b.ckpt")
	c := filepath.Join(dir, "c.ckpt")

	lossA, syncsA := trainLosses(t, flockOutput(t, localArgs("--workers", "2", "--checkpoint", a)...))
	lossB, _ := trainLosses(t, flockOutput(t, append([]string{"run", "--nproc", "2", "--", bin}, localArgs("--checkpoint", b)...)...))
	first, _ := trainLosses(t, flockOutput(t, append([]string{"run", "--nproc", "2", "--", bin}, localArgs("--checkpoint", c, "--stop-after", "7")...)...))
	rest, _ := trainLosses(t, flockOutput(t, append([]string{"run", "--nproc", "2", "--", bin}, localArgs("--checkpoint", c, "--resume", c)...)...))

	if len(lossA) != 20 {
		t.Fatalf("%d training records, want 20", len(lossA))
	}
	for _, s := range syncsA {
		if s == 7 || s == 10 {
			t.Fatalf("a round ends at step %v; the test wants steps 7 and 10 inside rounds (syncs %v)", s, syncsA)
		}
	}
	for step, l := range lossA {
		if lossB[step] != l {
			t.Errorf("step %v: loss %v in-process, %v over processes", step, l, lossB[step])
		}
		resumed := first[step]
		if step > 7 {
			resumed = rest[step]
		}
		if resumed != l {
			t.Errorf("step %v: loss %v, %v when resumed from step 7", step, l, resumed)
		}
	}
	wa := setWeights(t, a, 0)
	for name, other := range map[string]map[string][]byte{"flock run": setWeights(t, b, 0), "resumed": setWeights(t, c, 0), "rank 1": setWeights(t, a, 1)} {
		if len(other) != len(wa) {
			t.Fatalf("%s: %d tensors, want %d", name, len(other), len(wa))
		}
		for k, v := range wa {
			if !bytes.Equal(v, other[k]) {
				t.Errorf("%s: %s differs from the in-process run's", name, k)
			}
		}
	}
	// The old set's files are gone; only the last set remains.
	files, _ := filepath.Glob(filepath.Join(dir, "c.ckpt.*"))
	if len(files) != 2 {
		t.Errorf("checkpoint files %v, want the last set's 2", files)
	}
}

// TestSetResumeRefused checks that a checkpoint set is refused, with the
// reason, by a run with another number of workers.
func TestSetResumeRefused(t *testing.T) {
	needData(t)
	ckpt := filepath.Join(t.TempDir(), "s.ckpt")
	var stdout, stderr bytes.Buffer
	if code := run(localArgs("--workers", "2", "--checkpoint", ckpt, "--epochs", "1"), &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	stderr.Reset()
	if code := run(localArgs("--workers", "3", "--resume", ckpt), &stdout, &stderr); code != exitFailure ||
		!strings.Contains(stderr.String(), "it is a set of 2 workers' checkpoints, this run has 3 workers") {
		t.Errorf("resume with 3 workers: exit %d, stderr %q", code, stderr.String())
	}
}

// TestOtherStrategies trains briefly with DmSGD and JointSpar through flock
// train and checks their summaries, and that a bad topology is refused.
func TestOtherStrategies(t *testing.T) {
	needData(t)
	for _, args := range [][]string{
		{"--strategy", "dmsgd", "--topology", "one-peer-exp", "--workers", "4"},
		{"--strategy", "jointspar", "--budget", "0.5", "--workers", "2"},
		{"--strategy", "jointspar", "--budget", "0.5", "--balanced-draws", "--workers", "4"},
	} {
		var stdout, stderr bytes.Buffer
		all := append([]string{"train", "--model", "mlp", "--train-images", "2000", "--epochs", "1", "--batch-size", "100", "--json"}, args...)
		if code := run(all, &stdout, &stderr); code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		var sum struct {
			Steps int
			Comm  struct {
				Syncs         int     `json:"syncs"`
				Sent          int64   `json:"bytes_sent"`
				LayersPerStep float64 `json:"layers_per_step"`
			}
		}
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
			t.Fatal(err)
		}
		if sum.Steps == 0 || sum.Comm.Syncs != sum.Steps || sum.Comm.Sent == 0 {
			t.Errorf("%v: summary %s", args, lines[len(lines)-1])
		}
		if args[1] == "jointspar" && !(sum.Comm.LayersPerStep > 0 && sum.Comm.LayersPerStep < 3) {
			t.Errorf("jointspar computed %v of the MLP's 3 layers per step at budget 0.5", sum.Comm.LayersPerStep)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"train", "--strategy", "dmsgd", "--topology", "star", "--workers", "2"}, &stdout, &stderr); code == exitOK || !strings.Contains(stderr.String(), "star") {
		t.Errorf("an unknown topology: exit %d, stderr %q", code, stderr.String())
	}
}
