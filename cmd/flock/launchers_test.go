package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockml/flock/internal/peers"
)

// launchedRun is what a two-rank training run printed that must not depend
// on how its processes were started: rank 0's records without their
// timings.
type launchedRun []string

// launchedRecords keeps, of every JSON line of out (after an optional
// "[0] " prefix), the record kind, step, losses, accuracies and bytes sent.
func launchedRecords(t *testing.T, name string, out []byte) launchedRun {
	t.Helper()
	var run launchedRun
	for line := range strings.Lines(string(out)) {
		line = strings.TrimPrefix(strings.TrimSpace(line), "[0] ")
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var rec struct {
			Kind      string   `json:"kind"`
			Step      int      `json:"step"`
			Loss      *float64 `json:"loss"`
			Acc       *float64 `json:"acc"`
			TrainLoss *float64 `json:"train_loss"`
			TestLoss  *float64 `json:"test_loss"`
			TestAcc   *float64 `json:"test_acc"`
			World     int      `json:"world"`
			Comm      *struct {
				BytesSent int64 `json:"bytes_sent"`
				Syncs     int   `json:"syncs"`
			} `json:"comm"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%s: line %q: %v", name, line, err)
		}
		f := func(p *float64) string {
			if p == nil {
				return "-"
			}
			return strconv.FormatFloat(*p, 'g', -1, 64)
		}
		s := fmt.Sprintf("%s step %d world %d loss %s acc %s train %s test %s/%s", rec.Kind, rec.Step, rec.World, f(rec.Loss), f(rec.Acc), f(rec.TrainLoss), f(rec.TestLoss), f(rec.TestAcc))
		if rec.Comm != nil {
			s += fmt.Sprintf(" sent %d syncs %d", rec.Comm.BytesSent, rec.Comm.Syncs)
		}
		run = append(run, s)
	}
	if len(run) < 3 {
		t.Fatalf("%s: %d records in its output:\n%s", name, len(run), out)
	}
	return run
}

// freePort returns a TCP port nobody listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// slurmUp reports whether a SLURM cluster answers with an idle node.
func slurmUp() (bool, string) {
	if _, err := exec.LookPath("srun"); err != nil {
		return false, "srun is not installed"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sinfo", "-h", "-o", "%T").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "idle") {
		return false, fmt.Sprintf("no SLURM cluster with an idle node (sinfo: %v, %q)", err, strings.TrimSpace(string(out)))
	}
	return true, ""
}

// TestLaunchers trains the same two-rank Local SGD run started by flock
// run, by SLURM (srun, and sbatch with the example script), by Open MPI's
// mpirun and by torchrun, and checks that rank 0 logs the same losses,
// accuracies and bytes bit for bit. A launcher that is not installed (or,
// for SLURM, a cluster that does not answer) is skipped with the reason;
// with FLOCK_LAUNCHERS=require, SLURM and mpirun must be there.
func TestLaunchers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts several two-rank jobs; skipped in -short mode")
	}
	bin := flockBinary(t)
	data, err := filepath.Abs(filepath.Join(ffcvTestdata, "fmnist_500_ndarray.beton"))
	if err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "examples", "slurm", "train.sbatch"))
	if err != nil {
		t.Fatal(err)
	}
	// Read so that a change to the script runs the test again.
	if _, err := os.ReadFile(script); err != nil {
		t.Fatal(err)
	}
	args := []string{"train", "--data", data, "--model", "mlp", "--epochs", "2", "--batch-size", "25", "--threads", "1", "--log-every", "1", "--json"}
	const token = "launchers-test-token-0123456789abcdef"

	start := func(t *testing.T, env []string, argv ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "FLOCK_JOB_TOKEN="+token, "MASTER_PORT="+freePort(t), "FLOCK_TIMEOUT=60s")
		cmd.Env = append(cmd.Env, env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(argv, " "), err, stdout.String(), stderr.String())
		}
		return stdout.Bytes()
	}
	launch := func(t *testing.T, name string, env []string, argv ...string) launchedRun {
		t.Helper()
		return launchedRecords(t, name, start(t, env, argv...))
	}
	want := launch(t, "flock run", nil, append([]string{bin, "run", "--nproc", "2", "--", bin}, args...)...)
	if !strings.Contains(want[0], "world 2") {
		t.Fatalf("flock run: first record %q, want a run record of world 2", want[0])
	}
	same := func(t *testing.T, name string, got launchedRun) {
		t.Helper()
		if !slices.Equal(got, want) {
			for i := range min(len(got), len(want)) {
				if got[i] != want[i] {
					t.Fatalf("%s: record %d is %q, flock run's %q", name, i, got[i], want[i])
				}
			}
			t.Fatalf("%s: %d records, flock run's %d", name, len(got), len(want))
		}
	}

	// skip skips a launcher that is not there, unless FLOCK_LAUNCHERS=require
	// (as in CI) makes that a failure.
	skip := func(t *testing.T, why string) {
		t.Helper()
		if os.Getenv("FLOCK_LAUNCHERS") == "require" {
			t.Fatalf("%s (FLOCK_LAUNCHERS=require)", why)
		}
		t.Skip(why)
	}
	t.Run("srun", func(t *testing.T) {
		if ok, why := slurmUp(); !ok {
			skip(t, why)
		}
		same(t, "srun", launch(t, "srun", nil, append([]string{"srun", "-n", "2", bin}, args...)...))
	})
	t.Run("sbatch", func(t *testing.T) {
		if ok, why := slurmUp(); !ok {
			skip(t, why)
		}
		out := filepath.Join(t.TempDir(), "job.out")
		start(t, []string{"FLOCK=" + bin}, append([]string{"sbatch", "--wait", "--output", out, script}, args[1:]...)...)
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "sbatch", launchedRecords(t, "sbatch", b))
	})
	t.Run("mpirun", func(t *testing.T) {
		if _, err := exec.LookPath("mpirun"); err != nil {
			skip(t, "mpirun (Open MPI) is not installed")
		}
		// Open MPI refuses root unless told twice.
		env := []string{"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"}
		same(t, "mpirun", launch(t, "mpirun", env, append([]string{"mpirun", "--oversubscribe", "-n", "2", bin}, args...)...))
	})
	t.Run("torchrun", func(t *testing.T) {
		// The peers' torchrun (PyTorch 2), else one on PATH, if it is
		// PyTorch 2's: Debian's PyTorch 1.13 torchrun fails to start its
		// workers under Python 3.11.
		torchrun := ""
		if py, err := peers.Python("."); err == nil {
			if p := filepath.Join(filepath.Dir(py), "torchrun"); fileExists(p) {
				torchrun = p
			}
		}
		if torchrun == "" {
			p, err := exec.LookPath("torchrun")
			if err != nil {
				t.Skip("torchrun is not installed (not on PATH, no peers' environment)")
			}
			if v := torchrunVersion(p); !strings.HasPrefix(v, "2.") {
				t.Skipf("%s is PyTorch %q's torchrun; the test needs PyTorch 2's", p, v)
			}
			torchrun = p
		}
		same(t, "torchrun", launch(t, "torchrun", nil, append([]string{torchrun, "--standalone", "--nproc-per-node", "2", "--no-python", bin}, args...)...))
	})
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// torchrunVersion returns the version of the PyTorch whose torchrun script
// is at path, asking the interpreter of its first line ("" when unknown).
func torchrunVersion(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	first, _, _ := strings.Cut(string(data), "\n")
	py, ok := strings.CutPrefix(first, "#!")
	if !ok {
		return ""
	}
	argv := append(strings.Fields(py), "-c", "import torch; print(torch.__version__)")
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
