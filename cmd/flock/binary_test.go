package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// builtFlock holds the flock binary that tests running it as a program
// share: built once per test process, removed by TestMain.
var builtFlock struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

// flockBinary returns the path of a flock binary built from this package.
func flockBinary(t *testing.T) string {
	t.Helper()
	builtFlock.once.Do(func() {
		builtFlock.dir, builtFlock.err = os.MkdirTemp("", "flock-test-")
		if builtFlock.err != nil {
			return
		}
		builtFlock.path = filepath.Join(builtFlock.dir, "flock")
		builtFlock.out, builtFlock.err = exec.Command("go", "build", "-o", builtFlock.path, ".").CombinedOutput()
	})
	if builtFlock.err != nil {
		t.Fatalf("go build: %v\n%s", builtFlock.err, builtFlock.out)
	}
	return builtFlock.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtFlock.dir != "" {
		os.RemoveAll(builtFlock.dir)
	}
	os.Exit(code)
}

// runJSONLines runs the built flock with args, failing t (with its standard
// error) if it fails, and returns the lines of its standard output.
func runJSONLines(t *testing.T, args ...string) [][]byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(flockBinary(t), args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("flock %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return bytes.Split(bytes.TrimSpace(out), []byte("\n"))
}

// startFlock starts the built flock with args and returns it, a scanner of
// its standard output and the buffer collecting its standard error. The
// process is killed if it still runs a minute later or when the test ends.
func startFlock(t *testing.T, args ...string) (*exec.Cmd, *bufio.Scanner, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(flockBinary(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
	t.Cleanup(func() {
		timer.Stop()
		cmd.Process.Kill()
	})
	return cmd, bufio.NewScanner(out), &stderr
}
