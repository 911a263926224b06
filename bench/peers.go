package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/flockml/flock/internal/peers"
)

// Peers of flock bench that run in the peers' environment (package
// internal/peers finds it).
const (
	ImplTorch2        = "torch2"         // PyTorch 2, eager
	ImplTorch2Compile = "torch2-compile" // PyTorch 2, torch.compile (inductor)
	ImplFFCV          = "ffcv"           // FFCV's Loader
	ImplTorchFT       = "torchft"        // torchft's LocalSGD and DiLoCo over Gloo
)

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

// PeerPython returns the interpreter that runs peer's script: python for
// the peers that Debian's PyTorch and numpy serve (ImplTorch, ImplGloo,
// ImplNumpy), else the Python of the environment that
// bench/peers/setup.sh installs (internal/peers), found from the working
// directory and given relative to it when below it, so that the results'
// commands read as they would be typed there.
func PeerPython(peer, python string) (string, error) {
	switch peer {
	case ImplTorch, ImplGloo, ImplNumpy:
		return python, nil
	}
	venv, err := peers.Python(".")
	if err != nil {
		return "", err
	}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, venv); err == nil && filepath.IsLocal(rel) {
			return "." + string(filepath.Separator) + rel, nil
		}
	}
	return venv, nil
}
