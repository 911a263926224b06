package peers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPython finds the environment under the repository root from a
// directory below it, honours FLOCK_PEERS_VENV, and names the setup script
// when the environment is missing.
func TestPython(t *testing.T) {
	root := t.TempDir()
	sub := filepath.Join(root, "cmd", "flock")
	for _, d := range []string{filepath.Join(root, "bench", "peers"), sub} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(Setup)), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(VenvEnv, "")
	if _, err := Python(sub); err == nil || !strings.Contains(err.Error(), Setup) ||
		!strings.Contains(err.Error(), filepath.Join(root, ".cache", "peers", "venv")) {
		t.Errorf("no environment: error %v, want one naming %s and the environment's path", err, Setup)
	}
	python := filepath.Join(root, ".cache", "peers", "venv", "bin", "python")
	if err := os.MkdirAll(filepath.Dir(python), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(python, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := Python(sub); err != nil || got != python {
		t.Errorf("Python = %q, %v; want %q", got, err, python)
	}
	other := t.TempDir()
	t.Setenv(VenvEnv, other)
	if _, err := Python(sub); err == nil || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), Setup) {
		t.Errorf("%s=%s without python: error %v, want one naming it and %s", VenvEnv, other, err, Setup)
	}
	t.Setenv(VenvEnv, "")
	if _, err := Python(t.TempDir()); err == nil || !strings.Contains(err.Error(), VenvEnv) {
		t.Errorf("outside the repository: error %v, want one naming %s", err, VenvEnv)
	}
}
