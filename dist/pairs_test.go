package dist_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/dist/commtest"
	"github.com/flockml/flock/tensor"
)

// TestPairs makes the pairs of a 4-cycle plus one chord, in-process and
// over TCP: each pair carries messages both ways, between the right
// ranks; then rank 3 closes its pairs, and only the pairs it belonged to
// fail — the others still carry messages.
func TestPairs(t *testing.T) {
	edges := [][2]int{{0, 1}, {2, 1}, {2, 3}, {3, 0}, {0, 2}}
	for _, tt := range []struct {
		name  string
		comms func(t *testing.T) []dist.Comm
	}{
		{"local", func(t *testing.T) []dist.Comm { return dist.NewLocal(4) }},
		{"tcp", func(t *testing.T) []dist.Comm { return commtest.Loopback(t, 4, false) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			world := tt.comms(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			pairs := make([]map[int]dist.Comm, 4)
			errs := make([]error, 4)
			var wg sync.WaitGroup
			for r, c := range world {
				wg.Go(func() { pairs[r], errs[r] = dist.Pairs(ctx, c, edges) })
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			if tt.name == "tcp" {
				for _, c := range world {
					c.Close() // the pairs outlive the world
				}
			}
			want := map[int][]int{0: {1, 2, 3}, 1: {0, 2}, 2: {0, 1, 3}, 3: {0, 2}}
			for r, m := range pairs {
				if len(m) != len(want[r]) {
					t.Fatalf("rank %d has %d pairs, want %v", r, len(m), want[r])
				}
				for _, p := range want[r] {
					if c := m[p]; c == nil || c.Size() != 2 || c.Rank() != map[bool]int{true: 0, false: 1}[r < p] {
						t.Fatalf("rank %d: pair with %d is %v", r, p, c)
					}
				}
			}
			// Every rank sends its rank to each partner, which checks it.
			exchange := func(skip int) []error {
				errs := make([]error, 4)
				var wg sync.WaitGroup
				for r, m := range pairs {
					if r == skip {
						continue
					}
					wg.Go(func() {
						// All sends first: a receive waits for its message.
						for p, c := range m {
							if p == skip {
								continue
							}
							src := tensor.FromSlice([]float32{float32(r)}, tensor.Shape{1})
							errs[r] = errors.Join(errs[r], c.Send(ctx, src, 1-c.Rank(), 7))
							src.Release()
						}
						for p, c := range m {
							if p == skip {
								continue
							}
							dst := tensor.Zeros(tensor.Shape{1})
							err := c.Recv(ctx, dst, 1-c.Rank(), 7)
							if err == nil && dst.Float32s()[0] != float32(p) {
								err = fmt.Errorf("rank %d: message from %v, want %d", r, dst.Float32s()[0], p)
							}
							errs[r] = errors.Join(errs[r], err)
							dst.Release()
						}
					})
				}
				wg.Wait()
				return errs
			}
			if err := errors.Join(exchange(-1)...); err != nil {
				t.Fatal(err)
			}
			for _, c := range pairs[3] {
				c.Close()
			}
			if err := errors.Join(exchange(3)...); err != nil {
				t.Fatalf("after rank 3 left: %v", err)
			}
			dst := tensor.Zeros(tensor.Shape{1})
			defer dst.Release()
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			defer rcancel()
			if err := pairs[2][3].Recv(rctx, dst, 1, 7); err == nil {
				t.Fatal("a receive from the rank that left succeeded")
			}
			for _, m := range pairs {
				for _, c := range m {
					c.Close()
				}
			}
		})
	}
}

// TestPairsBadEdges checks the edges Pairs refuses.
func TestPairsBadEdges(t *testing.T) {
	c := dist.NewLocal(1)[0]
	defer c.Close()
	for _, e := range [][][2]int{{{0, 0}}, {{0, 1}}, {{-1, 0}}} {
		if _, err := dist.Pairs(context.Background(), c, e); err == nil {
			t.Errorf("edges %v: no error", e)
		}
	}
}
