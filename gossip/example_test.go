package gossip_test

import (
	"fmt"

	"github.com/flockml/flock/gossip"
)

// How fast three topologies on 16 nodes mix: ρ = ‖W − 11ᵀ/n‖₂ of one
// iteration, and of τ = 4 iterations of the one-peer exponential graph,
// which together average exactly.
func Example() {
	for _, t := range []gossip.Topology{gossip.Ring(16), gossip.Exponential(16), gossip.OnePeerExponential(16)} {
		self, in := t.In(0, 0)
		fmt.Printf("%s: self weight %.2f, in-degree %d, ρ = %.4f\n", t, self, len(in), gossip.Rho(gossip.Matrix(t, 0)))
	}
	one := gossip.OnePeerExponential(16)
	fmt.Printf("one-peer over %d iterations: ρ = %.4f\n", one.Period(), gossip.Rho(gossip.Product(one, 0, one.Period())))
	// Output:
	// ring, 16 nodes: self weight 0.33, in-degree 2, ρ = 0.9493
	// static exponential graph, 16 nodes, τ = 4: self weight 0.20, in-degree 4, ρ = 0.6000
	// one-peer exponential graph, 16 nodes, period τ = 4: self weight 0.50, in-degree 1, ρ = 0.9808
	// one-peer over 4 iterations: ρ = 0.0000
}
