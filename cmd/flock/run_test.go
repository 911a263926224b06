//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flockml/flock/backend/cuda"
	"github.com/flockml/flock/dist"
)

// TestRunUsage checks flock run's help and its refusals of bad command
// lines: help on stdout with status 0, one line on stderr otherwise.
func TestRunUsage(t *testing.T) {
	runCLICases(t, []cliCase{
		{"help flag", []string{"run", "--help"}, exitOK, []string{"Usage: flock run", "--nproc N", "(default 1)", "--node-rank N", "(default 0)", "--master HOST:PORT", "--grace DURATION", "(default 15s)", "FLOCK_JOB_TOKEN"}, nil, false},
		{"help run", []string{"help", "run"}, exitOK, []string{"Usage: flock run"}, nil, false},
		{"listed", []string{"--help"}, exitOK, []string{"  run      start the ranks"}, nil, false},
		{"no program", []string{"run", "--nproc", "2"}, exitUsage, nil, []string{"flock run: no program to run", "flock run --help"}, false},
		{"unknown flag", []string{"run", "--nprocs", "2", "--", "true"}, exitUsage, nil, []string{"flag provided but not defined: -nprocs"}, false},
		{"zero nproc", []string{"run", "--nproc", "0", "--", "true"}, exitUsage, nil, []string{"flock run: nproc 0: want ≥ 1"}, false},
		{"nodes without master", []string{"run", "--nnodes", "2", "--", "true"}, exitUsage, nil, []string{"2 nodes need the master's HOST:PORT"}, false},
		{"node rank", []string{"run", "--nnodes", "2", "--node-rank", "2", "--master", "h:1", "--", "true"}, exitUsage, nil, []string{"node rank 2: want in [0, 2)"}, false},
		{"bad master", []string{"run", "--master", "h", "--", "true"}, exitUsage, nil, []string{`master "h": want HOST:PORT`}, false},
		{"zero grace", []string{"run", "--grace", "0s", "--", "true"}, exitUsage, nil, []string{"grace 0s: want > 0"}, false},
		{"bad grace", []string{"run", "--grace", "soon", "--", "true"}, exitUsage, nil, []string{`invalid value "soon" for flag -grace`}, false},
		{"help timeout", []string{"run", "--help"}, exitOK, []string{"--timeout DURATION", "FLOCK_TIMEOUT"}, nil, false},
		{"negative timeout", []string{"run", "--timeout", "-1s", "--", "true"}, exitUsage, nil, []string{"timeout -1s: want > 0"}, false},
		{"program not found", []string{"run", "--", "no-such-program-flock"}, exitFailure, nil, []string{"flock run: ", "no-such-program-flock"}, false},
		{"bad nproc", []string{"run", "--nproc", "many", "--", "true"}, exitUsage, nil, []string{`invalid value "many" for flag -nproc: "many": want a number or gpu`}, false},
		{"help nproc gpu", []string{"run", "--help"}, exitOK, []string{"--nproc gpu starts one process per GPU", "flock run --nproc gpu -- flock train --device cuda"}, nil, false},
	})
}

// TestRunNProcGPU checks --nproc gpu: one rank per GPU the driver sees, and
// a one-line refusal, exit status 2, naming what was missing without a
// driver or without a GPU.
func TestRunNProcGPU(t *testing.T) {
	t.Parallel()
	gpu := nprocValue{gpu: true}
	for _, c := range []struct {
		name string
		v    nprocValue
		gpus func() (int, error)
		want int
		err  string
	}{
		{"number", nprocValue{n: 3}, func() (int, error) { panic("GPUs counted for --nproc 3") }, 3, ""},
		{"two GPUs", gpu, func() (int, error) { return 2, nil }, 2, ""},
		{"no driver", gpu, func() (int, error) { return 0, errors.New("no CUDA driver found (tried libcuda.so.1)") }, 0, "--nproc gpu: no CUDA driver found (tried libcuda.so.1)"},
		{"no GPU", gpu, func() (int, error) { return 0, nil }, 0, "--nproc gpu: the CUDA driver sees no GPU"},
	} {
		got, err := c.v.count(c.gpus)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%s: error %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %d, %v; want %d", c.name, got, err, c.want)
		}
	}
	if ok, _ := cuda.Available(); ok {
		return
	}
	runCLICases(t, []cliCase{
		{"no GPU here", []string{"run", "--nproc", "gpu", "--", "true"}, exitUsage, nil, []string{"flock run: --nproc gpu: no CUDA driver found (tried "}, false},
	})
}

func sortedLines(s string) []string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	slices.Sort(lines)
	return lines
}

// TestRunJob runs shell ranks: their prefixed output on success, and the
// status of a failed rank, whose siblings are stopped at once.
func TestRunJob(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"run", "--nproc", "3", "--", "sh", "-c", `echo "rank $RANK of $WORLD_SIZE"; echo "local $LOCAL_RANK" >&2`}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit status %d: %s", code, stderr.String())
	}
	if got, want := sortedLines(stdout.String()), []string{"[0] rank 0 of 3", "[1] rank 1 of 3", "[2] rank 2 of 3"}; !slices.Equal(got, want) {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if got, want := sortedLines(stderr.String()), []string{"[0] local 0", "[1] local 1", "[2] local 2"}; !slices.Equal(got, want) {
		t.Errorf("stderr %q, want %q", got, want)
	}

	stdout.Reset()
	stderr.Reset()
	start := time.Now()
	code = run([]string{"run", "--nproc", "3", "--", "sh", "-c", `if [ "$RANK" = 1 ]; then sleep 0.2; exit 5; fi; sleep 60`}, &stdout, &stderr)
	if code != 5 {
		t.Fatalf("exit status %d, want 5: %s", code, stderr.String())
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %v: the other ranks were not stopped at once", took)
	}
	for _, w := range []string{"flock run: rank 1 exited with status 5; stopped 2 other rank(s)", "rank failed; stopping the others"} {
		if !strings.Contains(stderr.String(), w) {
			t.Errorf("stderr does not contain %q:\n%s", w, stderr.String())
		}
	}
}

// TestRunInterrupt sends SIGINT to the built flock run and checks that the
// ranks get it and that flock run exits with their status.
func TestRunInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds flock; skipped in -short mode")
	}
	cmd, sc, stderr := startFlock(t, "run", "--nproc", "2", "--", "sh", "-c", `trap 'echo got it; exit 7' INT; echo ready; while :; do sleep 0.05; done`)
	var lines []string
	for len(lines) < 2 && sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 7 {
		t.Fatalf("exit %v, want status 7; stderr %q", err, stderr.String())
	}
	if got, want := sortedLines(strings.Join(lines, "\n")), []string{"[0] got it", "[0] ready", "[1] got it", "[1] ready"}; !slices.Equal(got, want) {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if !strings.Contains(stderr.String(), "flock run: interrupted: forwarded signal 2 (interrupt) to the ranks") {
		t.Errorf("stderr %q does not report the interruption", stderr.String())
	}
}

// TestRunTimeout checks that flock run --timeout reaches the ranks as
// FLOCK_TIMEOUT.
func TestRunTimeout(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"run", "--nproc", "2", "--timeout", "42s", "--", "sh", "-c", `echo "timeout $FLOCK_TIMEOUT"`}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit status %d: %s", code, stderr.String())
	}
	if got, want := sortedLines(stdout.String()), []string{"[0] timeout 42s", "[1] timeout 42s"}; !slices.Equal(got, want) {
		t.Errorf("stdout %q, want %q", got, want)
	}
}

// TestTrainRendezvousTimeout runs rank 0 of a two-rank job whose rank 1
// never comes: flock train gives up after --timeout, or FLOCK_TIMEOUT,
// naming the missing rank while it waits and when it fails.
func TestTrainRendezvousTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	t.Setenv("RANK", "0")
	t.Setenv("WORLD_SIZE", "2")
	t.Setenv("MASTER_ADDR", "127.0.0.1")
	t.Setenv("MASTER_PORT", strconv.Itoa(port))
	t.Setenv("FLOCK_JOB_TOKEN", "rendezvous-test-token-0123456789")
	args := []string{"train", "--data", filepath.Join(ffcvTestdata, "fmnist_500_ndarray.beton"), "--model", "mlp", "--epochs", "1", "--batch-size", "50"}
	for _, c := range []struct {
		name string
		args []string
		env  string
	}{
		{"flag", []string{"--timeout", "1500ms"}, "10m"},
		{"environment", nil, "1.5s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("FLOCK_TIMEOUT", c.env)
			// A connection with the wrong token, refused and logged.
			refused := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, err := dist.DialStore(ctx, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dist.StoreConfig{Token: []byte("not the job token")})
				refused <- err
			}()
			var stdout, stderr bytes.Buffer
			start := time.Now()
			code := run(append(slices.Clone(args), c.args...), &stdout, &stderr)
			if err := <-refused; err == nil {
				t.Error("a connection with the wrong token was accepted")
			}
			if code != exitFailure {
				t.Fatalf("exit status %d, want %d: %s", code, exitFailure, stderr.String())
			}
			if took := time.Since(start); took > 20*time.Second {
				t.Errorf("gave up after %v, want about 1.5s", took)
			}
			for _, want := range []string{"flock train: dist: init: waiting for ranks to join", "missing=[1]", "rank 1 never registered", "refused connection", "wrong token"} {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
				}
			}
		})
	}
}
