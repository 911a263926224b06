// Package peers finds the virtual environment of flock's benchmark peers
// and interoperability tests: PyTorch 2 (eager and torch.compile), FFCV,
// torchft and the official safetensors package, pinned in
// bench/peers/requirements.txt and installed by bench/peers/setup.sh. None
// of them is a dependency of flock; tests that need them skip without it.
package peers

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Where the environment is.
const (
	// Setup is the script that installs the environment, relative
	// to the repository root.
	Setup = "bench/peers/setup.sh"
	// VenvDir is where Setup installs it, relative to the
	// repository root.
	VenvDir = ".cache/peers/venv"
	// VenvEnv names the environment variable that, when set, is the
	// environment's directory instead of VenvDir under the root.
	VenvEnv = "FLOCK_PEERS_VENV"
)

// Venv returns the directory of the peers' virtual environment:
// $FLOCK_PEERS_VENV when set, else VenvDir under the repository root,
// the first directory from dir upwards that holds Setup. It does not
// check that the environment exists; Python does.
func Venv(dir string) (string, error) {
	if v := os.Getenv(VenvEnv); v != "" {
		return v, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("peers: %w", err)
	}
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, filepath.FromSlash(Setup))); err == nil {
			return filepath.Join(d, filepath.FromSlash(VenvDir)), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("peers: no %s in %s or a directory above it: run flock from the repository or set %s", Setup, abs, VenvEnv)
		}
	}
}

// Python returns the Python interpreter of the peers' virtual
// environment found from dir (see Venv), or an error that names the
// setup script when the environment is not installed.
func Python(dir string) (string, error) {
	venv, err := Venv(dir)
	if err != nil {
		return "", err
	}
	python := filepath.Join(venv, "bin", "python")
	if _, err := os.Stat(python); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("peers: no virtual environment at %s: install it with %s (or set %s)", venv, Setup, VenvEnv)
		}
		return "", fmt.Errorf("peers: %w", err)
	}
	return python, nil
}
