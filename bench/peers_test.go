package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParsePeers(t *testing.T) {
	known := []string{ImplTorch, ImplTorch2, ImplTorch2Compile}
	for _, c := range []struct {
		list string
		want []string
		err  string
	}{
		{"", nil, ""},
		{"torch2", []string{"torch2"}, ""},
		{"torch2,torch2-compile,torch", []string{"torch2", "torch2-compile", "torch"}, ""},
		{"torch2, torch2-compile", []string{"torch2", "torch2-compile"}, ""},
		{"jax", nil, `unknown peer "jax" (peers: torch, torch2, torch2-compile)`},
		{"torch2,", nil, `unknown peer ""`},
		{"torch2,torch2", nil, `peer "torch2" given twice`},
	} {
		got, err := ParsePeers(c.list, known)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParsePeers(%q): error %v, want %q", c.list, err, c.err)
			}
			continue
		}
		if err != nil || strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("ParsePeers(%q) = %q, %v; want %q", c.list, got, err, c.want)
		}
	}
}

// TestPeersPython finds the environment under the repository root from a
// directory below it, honours FLOCK_PEERS_VENV, and names the setup script
// when the environment is missing.
func TestPeersPython(t *testing.T) {
	root := t.TempDir()
	sub := filepath.Join(root, "cmd", "flock")
	for _, d := range []string{filepath.Join(root, "bench", "peers"), sub} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(PeersSetup)), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(PeersVenvEnv, "")
	if _, err := PeersPython(sub); err == nil || !strings.Contains(err.Error(), PeersSetup) ||
		!strings.Contains(err.Error(), filepath.Join(root, ".cache", "peers", "venv")) {
		t.Errorf("no environment: error %v, want one naming %s and the environment's path", err, PeersSetup)
	}
	python := filepath.Join(root, ".cache", "peers", "venv", "bin", "python")
	if err := os.MkdirAll(filepath.Dir(python), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(python, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := PeersPython(sub); err != nil || got != python {
		t.Errorf("PeersPython = %q, %v; want %q", got, err, python)
	}
	other := t.TempDir()
	t.Setenv(PeersVenvEnv, other)
	if _, err := PeersPython(sub); err == nil || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), PeersSetup) {
		t.Errorf("%s=%s without python: error %v, want one naming it and %s", PeersVenvEnv, other, err, PeersSetup)
	}
	t.Setenv(PeersVenvEnv, "")
	if _, err := PeersPython(t.TempDir()); err == nil || !strings.Contains(err.Error(), PeersVenvEnv) {
		t.Errorf("outside the repository: error %v, want one naming %s", err, PeersVenvEnv)
	}
}
