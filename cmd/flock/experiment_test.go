package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockml/flock/experiment"
	"github.com/flockml/flock/netmodel"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/nn/models"
	"github.com/flockml/flock/tensor"
)

// readProjected reads report.jsonl in dir by run ID.
func readProjected(t *testing.T, dir string) map[string]experiment.ProjectedRun {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "report.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]experiment.ProjectedRun{}
	for line := range bytes.Lines(data) {
		var r experiment.ProjectedRun
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("report.jsonl: %v: %s", err, line)
		}
		out[r.ID] = r
	}
	return out
}

// TestExperimentQuick runs the --quick grid end to end, checks the
// report's files and that its numbers agree with each other and with what
// the strategies must send, then resumes: a finished grid trains nothing,
// and a grid whose runs.jsonl lost its last run to a crash mid-line
// trains that run alone.
func TestExperimentQuick(t *testing.T) {
	needData(t)
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	// Two runs at once; the runs' flags do not include --jobs, so the
	// grid resumes below with one at a time.
	if code := run([]string{"experiment", "strategies", "--quick", "--jobs", "2", "--out", dir}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	for _, f := range []string{"runs.jsonl", "report.jsonl", "report.md", "acc_bytes.svg", "acc_time.svg", "curves.svg", "h.svg"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v, want a file", f, err)
		}
	}
	runs := readProjected(t, dir)
	if len(runs) != len(experiment.QuickStrategies) {
		t.Fatalf("%d runs in report.jsonl, want %d", len(runs), len(experiment.QuickStrategies))
	}
	m, err := models.Build("cnn", models.FashionMNIST, tensor.NewGenerator(1))
	if err != nil {
		t.Fatal(err)
	}
	paramBytes := int64(4 * nn.NumParameters(m))
	const k, steps = 2, 8 // 2048 images / (2 workers × 128)
	// A ring all-reduce sends 2(K−1)/K of the buffer from each worker.
	dpBytes := int64(steps) * 2 * (k - 1) * paramBytes / k
	net, _ := netmodel.Preset("10gbe")
	for _, name := range experiment.QuickStrategies {
		r, ok := runs[name+"/seed1"]
		if !ok {
			t.Fatalf("no run %s/seed1 in report.jsonl", name)
		}
		if r.Steps != steps || r.Workers != k || len(r.Curve) != 1 || r.Curve[0].Acc != r.TestAcc {
			t.Errorf("%s: %d steps, %d workers, curve %v, test acc %v: want %d steps, %d workers, one evaluation giving the test accuracy",
				name, r.Steps, r.Workers, r.Curve, r.TestAcc, steps, k)
		}
		if r.TestAcc < 0.3 {
			t.Errorf("%s: test accuracy %v, want ≥ 0.3 after 8 steps", name, r.TestAcc)
		}
		if r.Comm.DataParallelBytes != dpBytes {
			t.Errorf("%s: dp_bytes %d, want %d steps × 2(K−1)/K × %d B = %d", name, r.Comm.DataParallelBytes, steps, paramBytes, dpBytes)
		}
		p := r.Projected
		if want := float64(steps)*p.StepCompute + float64(r.Comm.Syncs)*net.SyncTime(64, netmodel.Workload{Pattern: p.Pattern, Bytes: p.MessageBytes, Degree: p.Degree}); math.Abs(p.Time-want) > 1e-9*want || p.StepCompute <= 0 {
			t.Errorf("%s: projected %v s, want %v s from its steps and syncs (step %v s)", name, p.Time, want, p.StepCompute)
		}
	}
	dp := runs["dp/seed1"]
	if dp.Comm.Sent != dpBytes || dp.Comm.Syncs != steps || dp.Projected.MessageBytes != float64(paramBytes) {
		t.Errorf("data parallel sent %d B in %d syncs, n = %v B: want %d B in %d, n = %d B", dp.Comm.Sent, dp.Comm.Syncs, dp.Projected.MessageBytes, dpBytes, steps, paramBytes)
	}
	if h2 := runs["local-h2/seed1"]; h2.Comm.Syncs != steps/2 || len(h2.H) != steps/2 || h2.Comm.Sent >= dp.Comm.Sent {
		t.Errorf("local H = 2: %d syncs, rounds %v, sent %d B: want %d syncs of H = 2, fewer bytes than data parallel's %d",
			h2.Comm.Syncs, h2.H, h2.Comm.Sent, steps/2, dp.Comm.Sent)
	}
	if ex := runs["dmsgd-exp/seed1"]; ex.Projected.Pattern != netmodel.Neighbors || ex.Projected.Degree != 6 {
		t.Errorf("dmsgd on the exponential graph: %s with degree %d at 64 nodes, want neighbors with 6", ex.Projected.Pattern, ex.Projected.Degree)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range experiment.StrategyGrid {
		r, ok := runs[s.Name+"/seed1"]
		if !ok {
			continue
		}
		row := fmt.Sprintf("| %s | 1 | %.2f ± 0.00 |", s.Label, 100*r.TestAcc)
		if !strings.Contains(string(md), row) {
			t.Errorf("report.md has no row starting %q:\n%s", row, md)
		}
	}
	svg, err := os.ReadFile(filepath.Join(dir, "acc_bytes.svg"))
	if err != nil || !bytes.Contains(svg, []byte("<svg")) || !bytes.Contains(svg, []byte("Data parallel")) || !bytes.Contains(svg, []byte("MiB")) {
		t.Errorf("acc_bytes.svg is not an SVG with the legend and the axis' unit (%v)", err)
	}

	// Finished: nothing trains again.
	path := filepath.Join(dir, "runs.jsonl")
	before, _ := os.ReadFile(path)
	stdout.Reset()
	if code := run([]string{"experiment", "strategies", "--quick", "--out", dir}, &stdout, &stderr); code != exitOK {
		t.Fatalf("again: exit %d\n%s", code, stderr.String())
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) || !strings.Contains(stdout.String(), "5 of 5 runs already done") || strings.Contains(stdout.String(), "test acc") {
		t.Errorf("a finished grid ran again:\n%s", stdout.String())
	}

	// A crash while writing the last run: its line is cut short.
	lines := bytes.SplitAfter(before, []byte("\n"))
	last := lines[len(lines)-2]
	cut := append(bytes.Join(lines[:len(lines)-2], nil), last[:len(last)/2]...)
	if err := os.WriteFile(path, cut, 0o644); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	if code := run([]string{"experiment", "strategies", "--quick", "--out", dir}, &stdout, &stderr); code != exitOK {
		t.Fatalf("resumed: exit %d\n%s", code, stderr.String())
	}
	if n := strings.Count(stdout.String(), "test acc"); n != 1 || !strings.Contains(stdout.String(), "4 of 5 runs already done") {
		t.Errorf("resumed grid trained %d runs, want the 1 lost:\n%s", n, stdout.String())
	}
	if done, err := experiment.ReadRecords(path, flagsPattern); err != nil || len(done) != 5 {
		t.Errorf("runs.jsonl after resuming: %d runs, %v; want 5", len(done), err)
	}
}

// TestExperimentDryRun lists the default grid and the quick one, without
// training.
func TestExperimentDryRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct {
		args  []string
		lines int
		has   string
	}{
		{nil, 3 * len(experiment.StrategyGrid), "jointspar-balanced/seed3   flock train --model cnn --workers 8 --epochs 3"},
		{[]string{"--quick"}, len(experiment.QuickStrategies), "--workers 2 --epochs 1 --batch-size 128 --seed 1 --eval-every 1 --log-every 0 --lr 0.05 --train-images 2048 --strategy dp"},
		{[]string{"--model", "resnet20", "--seeds", "4", "--strategies", "jointspar-lars,swarm-q8"}, 2, "--model resnet20"},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"experiment", "strategies", "--dry-run", "--out", dir}, c.args...)
		if code := run(args, &stdout, &stderr); code != exitOK {
			t.Fatalf("%v: exit %d: %s", c.args, code, stderr.String())
		}
		out := stdout.String()
		if got := strings.Count(out, "flock train"); got != c.lines || !strings.Contains(out, c.has) || !strings.Contains(out, fmt.Sprintf("%d runs, 0 done", c.lines)) {
			t.Errorf("%v: %d runs listed, want %d containing %q:\n%s", c.args, got, c.lines, c.has, out)
		}
	}
}

// TestExperimentUsage refuses bad command lines with exit status 2.
func TestExperimentUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{},
		{"grids"},
		{"strategies", "--strategies", "dp,sgd"},
		{"strategies", "--model", "vgg"},
		{"strategies", "--seeds", "one"},
		{"strategies", "--workers", "1"},
		{"strategies", "--network", "token-ring"},
		{"strategies", "--bandwidth", "-1"},
		{"strategies", "--allreduce", "tree"},
		{"strategies", "--scale", "0"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(append([]string{"experiment"}, args...), &stdout, &stderr); code != exitUsage || !strings.HasPrefix(stderr.String(), "flock experiment: ") {
			t.Errorf("%v: exit %d, stderr %q; want %d and a message", args, code, stderr.String(), exitUsage)
		}
	}
}

// TestExperimentRunsFile checks how a grid reads runs.jsonl: --dry-run
// marks the runs done and leaves a line cut short by a crash in place, and
// a run recorded with other flags than the grid's stops the grid before
// anything trains.
func TestExperimentRunsFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runs, err := experimentRuns(experimentOptions{model: "cnn", seeds: "1", only: "dp", workers: 2, epochs: 1, trainImages: 2048, batch: 128})
	if err != nil {
		t.Fatal(err)
	}
	line, _ := json.Marshal(experiment.Record{Record: "run", ID: runs[0].ID, Strategy: "dp", Args: runs[0].Args})
	path := filepath.Join(dir, "runs.jsonl")
	content := append(append(line, '\n'), `{"record":"run","id":"local-h2/se`...)
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"experiment", "strategies", "--quick", "--dry-run", "--out", dir}, &stdout, &stderr); code != exitOK {
		t.Fatalf("dry run: exit %d: %s", code, stderr.String())
	}
	if out := stdout.String(); !strings.Contains(out, "✓ dp/seed1") || strings.Contains(out, "✓ local-h2") || !strings.Contains(out, "5 runs, 1 done") {
		t.Errorf("dry run over one finished run:\n%s", out)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, content) {
		t.Errorf("--dry-run changed runs.jsonl:\n%s", after)
	}
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"experiment", "strategies", "--quick", "--epochs", "2", "--out", dir}, &stdout, &stderr); code != exitFailure || !strings.Contains(stderr.String(), "holds run dp/seed1 with other flags") {
		t.Errorf("grid with other flags than runs.jsonl's: exit %d, stderr %q; want %d and the run named", code, stderr.String(), exitFailure)
	}
}
