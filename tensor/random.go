package tensor

import (
	"sync"

	"github.com/flockml/flock/backend"
)

// Generator is a seeded source of random tensors. It draws from the
// counter-based Philox4x32-10 stream of the backend (Salmon et al., "Parallel
// random numbers: as easy as 1, 2, 3", SC 2011): element i of a draw is a pure
// function of (seed, offset+i), so results do not depend on thread count or
// device, and a generator is checkpointed by its two numbers.
//
// A Generator is safe for concurrent use; each draw reserves its own range of
// the stream.
type Generator struct {
	mu     sync.Mutex
	seed   uint64
	offset uint64
}

// NewGenerator returns a generator at the start of seed's stream.
func NewGenerator(seed uint64) *Generator { return &Generator{seed: seed} }

// State returns the seed and the next unused offset.
func (g *Generator) State() (seed, offset uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.seed, g.offset
}

// SetState restores a state returned by State.
func (g *Generator) SetState(seed, offset uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seed, g.offset = seed, offset
}

// Reserve returns the seed and the offset of a fresh range of n counters, for
// kernels (dropout) that draw from the stream themselves.
func (g *Generator) Reserve(n int) (seed, offset uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	seed, offset = g.seed, g.offset
	// Keep ranges aligned to Philox blocks of four outputs.
	g.offset += (uint64(n) + 3) &^ 3
	return seed, offset
}

func (g *Generator) draw(kind backend.RandomKind, a, b float64, shape Shape, opts []Option) *Tensor {
	t := Empty(shape, opts...)
	floatOnly("Random", t)
	seed, off := g.Reserve(t.NumElements())
	must("Random", t.Device().Random(t.Raw(), backend.RandomParams{Kind: kind, A: a, B: b, Seed: seed, Offset: off}), t)
	return t
}

// Rand returns samples of U[0, 1).
func (g *Generator) Rand(shape Shape, opts ...Option) *Tensor {
	return g.draw(backend.Uniform, 0, 1, shape, opts)
}

// Uniform returns samples of U[lo, hi).
func (g *Generator) Uniform(shape Shape, lo, hi float64, opts ...Option) *Tensor {
	return g.draw(backend.Uniform, lo, hi, shape, opts)
}

// Randn returns samples of the standard normal distribution.
func (g *Generator) Randn(shape Shape, opts ...Option) *Tensor {
	return g.draw(backend.Normal, 0, 1, shape, opts)
}

// Normal returns samples of N(mean, std²).
func (g *Generator) Normal(shape Shape, mean, std float64, opts ...Option) *Tensor {
	return g.draw(backend.Normal, mean, std, shape, opts)
}
