package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/strategy_losses.json with this machine's figures")

// goldenRuns are short runs of every strategy at a fixed seed whose
// figures are kept in testdata/strategy_losses.json: a change that keeps
// the algorithms must leave them as they were.
var goldenRuns = []struct {
	name string
	args []string
}{
	{"single", []string{"--workers", "1"}},
	{"dp", []string{"--strategy", "dp", "--workers", "2"}},
	{"local-qsr", []string{"--strategy", "local", "--sync", "qsr", "--h-base", "2", "--qsr-alpha", "0.04"}},
	{"local-h3-momentum", []string{"--strategy", "local", "--sync", "constant", "--h", "3", "--average-state", "momentum_buffer"}},
	{"local-post", []string{"--strategy", "local", "--sync", "post-local", "--h", "4", "--post-local-switch", "1"}},
	{"diloco", []string{"--strategy", "diloco", "--sync", "constant", "--h", "4", "--optimizer", "adamw", "--lr", "0.003"}},
	{"dmsgd-exp", []string{"--strategy", "dmsgd", "--topology", "exp"}},
	{"dmsgd-one-peer", []string{"--strategy", "dmsgd", "--topology", "one-peer-exp", "--local-steps", "2"}},
	{"swarm-seq-q8", []string{"--strategy", "swarm", "--sequential", "--local-steps", "2", "--quant-bits", "8"}},
	{"jointspar", []string{"--strategy", "jointspar", "--budget", "0.5", "--workers", "2"}},
	{"jointspar-balanced", []string{"--strategy", "jointspar", "--budget", "0.5", "--balanced-draws", "--optimizer", "lars", "--lr", "1"}},
	{"cnn-default", []string{"--model", "cnn", "--train-images", "2048", "--batch-size", "128"}},
}

// goldenFigures are the numbers of one run that its strategy determines.
type goldenFigures struct {
	Losses []float64 `json:"losses"`
	Accs   []float64 `json:"accs"`
	Syncs  []int     `json:"sync_steps"`
	// TestAcc, Sent and Collectives are the summary's.
	TestAcc     float64 `json:"test_acc"`
	Sent        int64   `json:"bytes_sent"`
	Collectives int64   `json:"collectives"`
}

// goldenFile maps a machine (machineKind) to each run's figures.
type goldenFile map[string]map[string]goldenFigures

// machineKind names what decides the rounding of a run: the processor's
// model and the number of threads.
func machineKind() string {
	model := runtime.GOARCH
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d threads", model, runtime.GOMAXPROCS(0))
}

func goldenRun(t *testing.T, args []string) goldenFigures {
	t.Helper()
	all := append([]string{"train", "--model", "mlp", "--train-images", "2000", "--epochs", "2", "--batch-size", "100",
		"--workers", "4", "--lr", "0.05", "--log-every", "1", "--eval-every", "1", "--seed", "3", "--json"}, args...)
	var stdout, stderr bytes.Buffer
	if code := run(all, &stdout, &stderr); code != exitOK {
		t.Fatalf("flock %s: exit %d: %s", strings.Join(all, " "), code, stderr.String())
	}
	var g goldenFigures
	for line := range strings.Lines(stdout.String()) {
		var rec struct {
			Kind    string
			Step    int
			Loss    float64
			Acc     float64
			TestAcc float64 `json:"test_acc"`
			Comm    struct {
				Sent        int64 `json:"bytes_sent"`
				Collectives int64 `json:"collectives"`
			}
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		switch rec.Kind {
		case "train":
			g.Losses = append(g.Losses, rec.Loss)
			g.Accs = append(g.Accs, rec.Acc)
		case "sync":
			g.Syncs = append(g.Syncs, rec.Step)
		case "summary":
			g.TestAcc, g.Sent, g.Collectives = rec.TestAcc, rec.Comm.Sent, rec.Comm.Collectives
		}
	}
	return g
}

// TestStrategyGolden checks that every strategy computes, at a fixed seed,
// the losses, accuracies, synchronization steps and bytes recorded in
// testdata/strategy_losses.json: exactly on the machine kind that recorded
// them (rounding differs between processors), within 1% elsewhere. With
// -update it records this machine's.
func TestStrategyGolden(t *testing.T) {
	needData(t)
	if testing.Short() {
		t.Skip("twelve short training runs")
	}
	const path = "testdata/strategy_losses.json"
	file := goldenFile{}
	if data, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(data, &file); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	} else if !*updateGolden {
		t.Fatal(err)
	}
	kind := machineKind()
	want, exact := file[kind]
	if !exact && !*updateGolden {
		for k := range file {
			want = file[k]
			t.Logf("no figures recorded on %s: comparing with %s's within 1%%", kind, k)
			break
		}
	}
	got := map[string]goldenFigures{}
	for _, r := range goldenRuns {
		t.Run(r.name, func(t *testing.T) {
			g := goldenRun(t, r.args)
			got[r.name] = g
			if *updateGolden {
				return
			}
			w, ok := want[r.name]
			if !ok {
				t.Fatalf("no recorded figures for %s", r.name)
			}
			compareGolden(t, g, w, exact)
		})
	}
	if *updateGolden {
		file[kind] = got
		data, err := json.MarshalIndent(file, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func compareGolden(t *testing.T, got, want goldenFigures, exact bool) {
	t.Helper()
	same := func(a, b float64) bool {
		if exact {
			return a == b
		}
		return math.Abs(a-b) <= 0.01*math.Max(math.Abs(a), math.Abs(b))
	}
	if len(got.Losses) != len(want.Losses) {
		t.Fatalf("%d training records, want %d", len(got.Losses), len(want.Losses))
	}
	for i := range got.Losses {
		if !same(got.Losses[i], want.Losses[i]) || !same(got.Accs[i], want.Accs[i]) {
			t.Fatalf("step %d: loss %v acc %v, want %v and %v", i+1, got.Losses[i], got.Accs[i], want.Losses[i], want.Accs[i])
		}
	}
	if fmt.Sprint(got.Syncs) != fmt.Sprint(want.Syncs) {
		t.Errorf("synchronizations at steps %v, want %v", got.Syncs, want.Syncs)
	}
	if !same(got.TestAcc, want.TestAcc) {
		t.Errorf("test accuracy %v, want %v", got.TestAcc, want.TestAcc)
	}
	if got.Sent != want.Sent || got.Collectives != want.Collectives {
		t.Errorf("sent %d bytes in %d collectives, want %d in %d", got.Sent, got.Collectives, want.Sent, want.Collectives)
	}
}
