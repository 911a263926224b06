package ffcv

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
)

// Order is the order in which a Loader visits the samples of an epoch.
type Order int

// The orders of FFCV's OrderOption.
const (
	// Sequential visits the samples in the order of Options.Indices (or of
	// the file).
	Sequential Order = iota
	// Random visits a new uniform permutation every epoch.
	Random
	// QuasiRandom visits the samples of a few pages of the file at a time
	// in random order, so that a process cache holds only a window of pages
	// (FFCV's QUASI_RANDOM, usable here in distributed mode too).
	QuasiRandom
)

func (o Order) String() string {
	switch o {
	case Sequential:
		return "sequential"
	case Random:
		return "random"
	case QuasiRandom:
		return "quasi-random"
	}
	return fmt.Sprintf("Order(%d)", int(o))
}

// ParseOrder returns the Order named s: sequential, random or quasi-random
// (quasi_random is accepted too).
func ParseOrder(s string) (Order, error) {
	switch s {
	case "sequential":
		return Sequential, nil
	case "random":
		return Random, nil
	case "quasi-random", "quasi_random", "quasirandom":
		return QuasiRandom, nil
	}
	return 0, fmt.Errorf("ffcv: unknown order %q (want sequential, random or quasi-random)", s)
}

// DefaultQuasiRandomWindow is the number of pages QuasiRandom draws from at a
// time: FFCV's buffer_size.
const DefaultQuasiRandomWindow = 6

// virtualPageSamples is the number of consecutive samples grouped into one
// pseudo-page by QuasiRandom when samples have no variable-size data (their
// fields live in the metadata table, which is read in index order).
const virtualPageSamples = 1024

// sampler computes the samples one rank visits in an epoch. The result is a
// pure function of the fields below and the epoch; see Loader for the
// algorithm.
type sampler struct {
	order       Order
	seed        uint64
	rank, world int
	base        []int // sample ids in the given order

	// QuasiRandom: base regrouped by page, pages ascending, samples of a page
	// in base order; group g is members[starts[g]:starts[g+1]].
	members []int
	starts  []int
	window  int

	global []int // the epoch's order before sharding
	work   []int // QuasiRandom: members shuffled within groups
	gorder []int // QuasiRandom: group order
	active []int // QuasiRandom: groups in the window
	used   []int // QuasiRandom: samples taken from each group
}

// newSampler returns a sampler over base. pageOf gives the page of a sample
// id (−1 when it has none); it is needed by QuasiRandom only.
func newSampler(order Order, seed uint64, rank, world int, base []int, pageOf func(int) int64, window int) *sampler {
	s := &sampler{order: order, seed: seed, rank: rank, world: world, base: base, window: window}
	if order == QuasiRandom {
		s.groupByPage(pageOf)
	}
	return s
}

func (s *sampler) groupByPage(pageOf func(int) int64) {
	type keyed struct {
		page int64
		pos  int
	}
	ks := make([]keyed, len(s.base))
	for pos, id := range s.base {
		p := pageOf(id)
		if p < 0 {
			// Pseudo-pages after every real page, by blocks of sample ids.
			p = 1<<62 + int64(id/virtualPageSamples)
		}
		ks[pos] = keyed{p, pos}
	}
	slices.SortStableFunc(ks, func(a, b keyed) int {
		switch {
		case a.page < b.page:
			return -1
		case a.page > b.page:
			return 1
		}
		return 0
	})
	s.members = make([]int, len(ks))
	s.starts = s.starts[:0]
	for i, k := range ks {
		if i == 0 || k.page != ks[i-1].page {
			s.starts = append(s.starts, i)
		}
		s.members[i] = s.base[k.pos]
	}
	s.starts = append(s.starts, len(ks))
}

// perRank returns the number of samples each rank visits per epoch:
// ⌈n/world⌉ (0 for an empty base).
func (s *sampler) perRank() int {
	return (len(s.base) + s.world - 1) / s.world
}

// epoch returns the samples the rank visits in epoch, in order, reusing dst.
func (s *sampler) epoch(epoch int, dst []int) []int {
	g := s.globalOrder(uint64(epoch))
	dst = dst[:0]
	n := len(g)
	if n == 0 {
		return dst
	}
	total := s.perRank() * s.world
	for k := s.rank; k < total; k += s.world {
		dst = append(dst, g[k%n])
	}
	return dst
}

// globalOrder returns the order of every sample in epoch before sharding.
func (s *sampler) globalOrder(epoch uint64) []int {
	s.global = append(s.global[:0], s.base...)
	switch s.order {
	case Sequential:
	case Random:
		src := rand.NewPCG(s.seed, epoch)
		shuffle(src, s.global)
	case QuasiRandom:
		s.quasiRandom(epoch)
	default:
		panic(fmt.Sprintf("ffcv: unknown order %d", s.order))
	}
	return s.global
}

// quasiRandom writes into s.global FFCV's quasi-random order
// (ffcv/traversal_order/quasi_random.py): the samples of each page are
// shuffled, the pages are shuffled, and then each position draws a page
// uniformly among a window of at most s.window pages not yet exhausted and
// takes that page's next sample; an exhausted page leaves the window and the
// next page in the shuffled page order enters it.
func (s *sampler) quasiRandom(epoch uint64) {
	src := rand.NewPCG(s.seed, epoch)
	s.work = append(s.work[:0], s.members...)
	ng := len(s.starts) - 1
	for g := range ng {
		shuffle(src, s.work[s.starts[g]:s.starts[g+1]])
	}
	s.gorder = s.gorder[:0]
	for g := range ng {
		s.gorder = append(s.gorder, g)
	}
	shuffle(src, s.gorder)
	s.used = s.used[:0]
	for range ng {
		s.used = append(s.used, 0)
	}
	s.active = s.active[:0]
	next := 0
	for i := range s.global {
		for next < ng && len(s.active) < s.window {
			s.active = append(s.active, s.gorder[next])
			next++
		}
		j := int(uniform(src, uint64(len(s.active))))
		g := s.active[j]
		s.global[i] = s.work[s.starts[g]+s.used[g]]
		s.used[g]++
		if s.starts[g]+s.used[g] == s.starts[g+1] {
			s.active = slices.Delete(s.active, j, j+1)
		}
	}
}

// shuffle permutes p by the Fisher–Yates shuffle with draws from src.
func shuffle(src *rand.PCG, p []int) {
	for i := len(p) - 1; i > 0; i-- {
		j := uniform(src, uint64(i+1))
		p[i], p[j] = p[j], p[i]
	}
}

// uniform returns a uniform draw from [0, m), m > 0, by Lemire's method
// ("Fast random integer generation in an interval", 2019).
func uniform(src *rand.PCG, m uint64) uint64 {
	hi, lo := bits.Mul64(src.Uint64(), m)
	if lo < m {
		thresh := -m % m
		for lo < thresh {
			hi, lo = bits.Mul64(src.Uint64(), m)
		}
	}
	return hi
}
