package bench

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The peers' virtual environment: PyTorch 2 (eager and torch.compile),
// FFCV, torchft and safetensors, pinned in bench/peers/requirements.txt and
// installed by bench/peers/setup.sh. None of them is a dependency of flock.
const (
	// PeersSetup is the script that installs the environment, relative
	// to the repository root.
	PeersSetup = "bench/peers/setup.sh"
	// PeersVenvDir is where PeersSetup installs it, relative to the
	// repository root.
	PeersVenvDir = ".cache/peers/venv"
	// PeersVenvEnv names the environment variable that, when set, is the
	// environment's directory instead of PeersVenvDir under the root.
	PeersVenvEnv = "FLOCK_PEERS_VENV"
)

// Peers of flock bench that run in the peers' environment.
const (
	ImplTorch2        = "torch2"         // PyTorch 2, eager
	ImplTorch2Compile = "torch2-compile" // PyTorch 2, torch.compile (inductor)
	ImplFFCV          = "ffcv"           // FFCV's Loader
	ImplTorchFT       = "torchft"        // torchft's LocalSGD and DiLoCo over Gloo
)

// PeersVenv returns the directory of the peers' virtual environment:
// $FLOCK_PEERS_VENV when set, else PeersVenvDir under the repository root,
// the first directory from dir upwards that holds PeersSetup. It does not
// check that the environment exists; PeersPython does.
func PeersVenv(dir string) (string, error) {
	if v := os.Getenv(PeersVenvEnv); v != "" {
		return v, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("bench: peers: %w", err)
	}
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, filepath.FromSlash(PeersSetup))); err == nil {
			return filepath.Join(d, filepath.FromSlash(PeersVenvDir)), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("bench: peers: no %s in %s or a directory above it: run flock from the repository or set %s", PeersSetup, abs, PeersVenvEnv)
		}
	}
}

// PeersPython returns the Python interpreter of the peers' virtual
// environment found from dir (see PeersVenv), or an error that names the
// setup script when the environment is not installed.
func PeersPython(dir string) (string, error) {
	venv, err := PeersVenv(dir)
	if err != nil {
		return "", err
	}
	python := filepath.Join(venv, "bin", "python")
	if _, err := os.Stat(python); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("bench: peers: no virtual environment at %s: install it with %s (or set %s)", venv, PeersSetup, PeersVenvEnv)
		}
		return "", fmt.Errorf("bench: peers: %w", err)
	}
	return python, nil
}

// ParsePeers splits a comma-separated list of peers and checks each
// against known, in order and without repeats; "" gives none.
func ParsePeers(list string, known []string) ([]string, error) {
	if list == "" {
		return nil, nil
	}
	var peers []string
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		switch {
		case !slices.Contains(known, p):
			return nil, fmt.Errorf("unknown peer %q (peers: %s)", p, strings.Join(known, ", "))
		case slices.Contains(peers, p):
			return nil, fmt.Errorf("peer %q given twice", p)
		}
		peers = append(peers, p)
	}
	return peers, nil
}
