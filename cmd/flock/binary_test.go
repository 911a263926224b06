package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
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
