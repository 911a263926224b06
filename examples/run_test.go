package examples

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// exampleRunner returns the function that runs the example module in dir
// with go run and the given arguments, returning its output. It runs
// offline (GOPROXY=off): flock comes from this repository and its
// dependencies from the module cache that built it. Without a go command
// the test is skipped.
func exampleRunner(t *testing.T, dir string) func(args ...string) (string, error) {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to run the example with: %v", err)
	}
	// go test caches a passing result by the files the test itself opens:
	// read the example's, so that a change to them runs the test again.
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, err := os.ReadFile(filepath.Join(dir, f.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return func(args ...string) (string, error) {
		cmd := exec.Command(goCmd, append([]string{"run", "."}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"), "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
}
