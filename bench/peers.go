package bench

import (
	"fmt"
	"slices"
	"strings"
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
