package ffcv

import (
	"fmt"
	"slices"
	"testing"

	"github.com/flockml/flock/dataset"
)

func seq(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	return p
}

// pagesOf places sample i on page i/perPage (samples past noPageFrom have
// no page).
func pagesOf(perPage, noPageFrom int) func(int) int64 {
	return func(i int) int64 {
		if i >= noPageFrom {
			return -1
		}
		return int64(i / perPage)
	}
}

// TestOrderCoverage checks that every rank of every order visits ⌈n/w⌉
// samples, that together the ranks visit each sample of the base once,
// plus the first samples of the global order again as padding (as
// PyTorch's DistributedSampler), and that the order is a pure function of
// (seed, epoch, rank, world). Padding repeats the global order cyclically.
func TestOrderCoverage(t *testing.T) {
	t.Parallel()
	subset := []int{3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89}
	for _, order := range []Order{Sequential, Random, QuasiRandom} {
		for _, base := range [][]int{seq(100), seq(1), subset, seq(2500)} {
			for _, world := range []int{1, 2, 3, 8} {
				t.Run(fmt.Sprintf("%v/n%d/w%d", order, len(base), world), func(t *testing.T) {
					for epoch := range 3 {
						counts := map[int]int{}
						var global []int
						per := 0
						for rank := range world {
							s := newSampler(order, 42, rank, world, base, pagesOf(7, 2000), 3)
							got := s.epoch(epoch, nil)
							per = s.perRank()
							if len(got) != per || per != (len(base)+world-1)/world {
								t.Fatalf("epoch %d rank %d: %d samples, want ⌈%d/%d⌉", epoch, rank, len(got), len(base), world)
							}
							for _, id := range got {
								counts[id]++
							}
							again := newSampler(order, 42, rank, world, base, pagesOf(7, 2000), 3).epoch(epoch, nil)
							if !slices.Equal(got, again) {
								t.Fatalf("epoch %d rank %d: two samplers disagree", epoch, rank)
							}
							global = s.globalOrder(uint64(epoch))
						}
						sorted, sortedBase := slices.Sorted(slices.Values(global)), slices.Sorted(slices.Values(base))
						if !slices.Equal(sorted, sortedBase) {
							t.Fatalf("epoch %d: the global order is not a permutation of the base", epoch)
						}
						want := map[int]int{}
						for k := range per * world {
							want[global[k%len(global)]]++
						}
						for _, id := range base {
							if counts[id] != want[id] {
								t.Fatalf("epoch %d: sample %d visited %d times, want %d", epoch, id, counts[id], want[id])
							}
						}
						if len(counts) != len(base) {
							t.Fatalf("epoch %d: %d distinct samples, want %d", epoch, len(counts), len(base))
						}
					}
				})
			}
		}
	}
}

// TestOrderShuffles checks that the random orders change from epoch to
// epoch and with the seed, and that Sequential keeps the base order.
func TestOrderShuffles(t *testing.T) {
	t.Parallel()
	base := seq(500)
	if got := newSampler(Sequential, 1, 0, 1, base, nil, 0).epoch(3, nil); !slices.Equal(got, base) {
		t.Errorf("sequential order %v…, want the identity", got[:10])
	}
	for _, order := range []Order{Random, QuasiRandom} {
		a := newSampler(order, 1, 0, 1, base, pagesOf(50, 500), 2)
		e0 := slices.Clone(a.epoch(0, nil))
		e1 := slices.Clone(a.epoch(1, nil))
		other := newSampler(order, 2, 0, 1, base, pagesOf(50, 500), 2).epoch(0, nil)
		if slices.Equal(e0, e1) || slices.Equal(e0, other) || slices.Equal(e0, base) {
			t.Errorf("%v: epochs or seeds give the same order", order)
		}
	}
}

// TestRandomMatchesDataset checks that Random is the permutation
// dataset.Loader shuffles with: PCG(seed, epoch), Fisher–Yates, Lemire.
func TestRandomMatchesDataset(t *testing.T) {
	t.Parallel()
	for epoch := range 3 {
		got := newSampler(Random, 7, 0, 1, seq(1000), nil, 0).epoch(epoch, nil)
		if want := dataset.Permutation(1000, 7, epoch); !slices.Equal(got, want) {
			t.Fatalf("epoch %d: order differs from dataset.Permutation", epoch)
		}
	}
}

// TestQuasiRandomWindow checks QuasiRandom's locality: at any point of the
// order the samples come from at most window pages that are open (started
// and not exhausted), and every page is read to the end before more than
// window pages are open.
func TestQuasiRandomWindow(t *testing.T) {
	t.Parallel()
	const perPage, n = 40, 1000
	for _, window := range []int{1, 2, 6} {
		s := newSampler(QuasiRandom, 9, 0, 1, seq(n), pagesOf(perPage, n), window)
		order := s.epoch(0, nil)
		left := map[int64]int{}
		for i := range n {
			left[int64(i/perPage)]++
		}
		open := map[int64]bool{}
		for _, id := range order {
			p := int64(id / perPage)
			open[p] = true
			if len(open) > window {
				t.Fatalf("window %d: %d pages open at once", window, len(open))
			}
			if left[p]--; left[p] == 0 {
				delete(open, p)
			}
		}
		if window == 1 {
			// One page at a time: pages appear as contiguous runs.
			for i := 0; i < n; i += perPage {
				p := order[i] / perPage
				for _, id := range order[i : i+perPage] {
					if id/perPage != p {
						t.Fatalf("window 1: page %d interrupted at %d", p, i)
					}
				}
			}
		}
	}
}
