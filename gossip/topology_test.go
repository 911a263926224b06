package gossip

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// allTopologies returns every kind New builds on n nodes, matchings on
// each allowed base graph.
func allTopologies(t *testing.T, n int) []Topology {
	t.Helper()
	var tops []Topology
	for _, kind := range Kinds() {
		bases := []string{""}
		if kind == "matching" {
			bases = matchingBases
		}
		for _, base := range bases {
			top, err := New(Spec{Kind: kind, N: n, Base: base, Seed: 7})
			if err != nil {
				t.Fatalf("New(%s, n = %d, base %q): %v", kind, n, base, err)
			}
			tops = append(tops, top)
		}
	}
	return tops
}

// TestRho checks ρ = ‖W − 11ᵀ/n‖₂ against tabulated values and, for the
// static exponential graph of even n, against 1 − 2/(τ+1) (Ying et al.,
// 2021, for n a power of two).
func TestRho(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		top  Topology
		want float64
	}{
		{Exponential(8), 0.5}, {Exponential(16), 0.6}, {Exponential(32), 0.6667},
		{Ring(8), 0.8047}, {Ring(16), 0.9493}, {Ring(32), 0.9872},
		{Full(8), 0}, {Full(1), 0},
	} {
		if got := Rho(Matrix(c.top, 0)); math.Abs(got-c.want) > 5e-5 {
			t.Errorf("%v: ρ = %.6f, want %.4f", c.top, got, c.want)
		}
	}
	// For even n, ρ of the static exponential graph is 1 − 2/(1+τ),
	// powers of two or not.
	for n := 2; n <= 32; n += 2 {
		tau := math.Ceil(math.Log2(float64(n)))
		if got, want := Rho(Matrix(Exponential(n), 0)), 1-2/(1+tau); math.Abs(got-want) > 1e-12 {
			t.Errorf("exponential, n = %d: ρ = %v, want 1 − 2/(1+τ) = %v", n, got, want)
		}
	}
	if got := Rho(mat.NewDiagDense(5, []float64{1, 1, 1, 1, 1})); math.Abs(got-1) > 1e-12 {
		t.Errorf("ρ(I) = %v, want 1", got)
	}
}

// TestOnePeerExactAverage checks that τ consecutive one-peer matrices,
// from any iteration, multiply to 11ᵀ/n bit for bit when n is a power of
// two, and not otherwise.
func TestOnePeerExactAverage(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 4, 8, 16, 32} {
		top := OnePeerExponential(n)
		tau := top.Period()
		if 1<<tau != n {
			t.Fatalf("n = %d: period %d, want log₂ n", n, tau)
		}
		for _, k := range []int{0, 1, 5} {
			p := Product(top, k, tau)
			for i := range n {
				for j := range n {
					if v := p.At(i, j); v != 1/float64(n) {
						t.Fatalf("n = %d, iterations %d…%d: entry (%d, %d) = %v, want exactly 1/%d", n, k, k+tau-1, i, j, v, n)
					}
				}
			}
		}
		if n > 2 && Rho(Product(top, 0, tau-1)) < 0.1 {
			t.Errorf("n = %d: τ−1 matrices already average", n)
		}
	}
	for _, n := range []int{6, 12} {
		top := OnePeerExponential(n)
		p := Product(top, 0, top.Period())
		if got := Rho(p); got < 0.1 {
			t.Errorf("n = %d: ρ of τ one-peer matrices = %v, want far from exact averaging", n, got)
		}
		if math.Abs(p.At(0, 0)-1/float64(n)) < 1e-3 {
			t.Errorf("n = %d: entry (0, 0) of the product = %v ≈ 1/n", n, p.At(0, 0))
		}
	}
}

// TestDoublyStochastic checks every kind on n = 1…33 and a few iterations:
// nonnegative weights, rows and columns summing to 1, and the average of
// a random vector kept by mixing.
func TestDoublyStochastic(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= 33; n++ {
		for _, top := range allTopologies(t, n) {
			if top.Nodes() != n {
				t.Fatalf("%v: %d nodes, want %d", top, top.Nodes(), n)
			}
			for _, k := range []int{0, 1, 2, 3, 17} {
				w := Matrix(top, k)
				for i := range n {
					row, col := 0.0, 0.0
					for j := range n {
						if w.At(i, j) < 0 {
							t.Fatalf("%v, k = %d: w_%d%d = %v < 0", top, k, i, j, w.At(i, j))
						}
						row += w.At(i, j)
						col += w.At(j, i)
					}
					if math.Abs(row-1) > 1e-12 || math.Abs(col-1) > 1e-12 {
						t.Fatalf("%v, k = %d: row %d sums to %v, column to %v", top, k, i, row, col)
					}
				}
				x := make([]float64, n)
				for i := range x {
					x[i] = r.NormFloat64() * 10
				}
				var y mat.VecDense
				y.MulVec(w, mat.NewVecDense(n, x))
				before, after := mat.Sum(mat.NewVecDense(n, x))/float64(n), mat.Sum(&y)/float64(n)
				if math.Abs(before-after) > 1e-12*(1+math.Abs(before)) {
					t.Fatalf("%v, k = %d: mixing moved the average from %v to %v", top, k, before, after)
				}
			}
		}
	}
}

// TestNeighbors checks In and Out against the matrix: In lists row i's
// positive off-diagonal entries and Out column i's, ascending, each once,
// with the diagonal as the self weight.
func TestNeighbors(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 3, 5, 6, 8, 9, 12, 16, 33} {
		for _, top := range allTopologies(t, n) {
			for _, k := range []int{0, 1, 4} {
				w := Matrix(top, k)
				for i := range n {
					for _, dir := range []string{"in", "out"} {
						self, nb := top.In(k, i)
						want := mat.Row(nil, i, w)
						if dir == "out" {
							self, nb = top.Out(k, i)
							want = mat.Col(nil, i, w)
						}
						if self != want[i] {
							t.Fatalf("%v, k = %d, node %d: %s self weight %v, matrix %v", top, k, i, dir, self, want[i])
						}
						got := make([]float64, n)
						got[i] = self
						for x, l := range nb {
							if l.Node == i || l.Weight <= 0 || x > 0 && nb[x-1].Node >= l.Node {
								t.Fatalf("%v, k = %d, node %d: %s-neighbours %v not ascending, distinct, positive and without the node", top, k, i, dir, nb)
							}
							got[l.Node] = l.Weight
						}
						if !slices.Equal(got, want) {
							t.Fatalf("%v, k = %d, node %d: %s-neighbours %v, matrix %v", top, k, i, dir, nb, want)
						}
					}
				}
			}
		}
	}
}

// TestExponentialLinks checks the static exponential graph's links for n
// that are not powers of two: τ distinct in- and out-neighbours i ± 2^j,
// weights 1/(τ+1), and W not symmetric (from n = 4: on 3 nodes it is the
// full graph).
func TestExponentialLinks(t *testing.T) {
	t.Parallel()
	for _, n := range []int{4, 5, 6, 7, 12, 33} {
		top := Exponential(n)
		tau := int(math.Ceil(math.Log2(float64(n))))
		for i := range n {
			self, in := top.In(0, i)
			_, out := top.Out(0, i)
			var wantIn, wantOut []int
			for j := range tau {
				wantIn = append(wantIn, (i+1<<j)%n)
				wantOut = append(wantOut, ((i-1<<j)%n+n)%n)
			}
			slices.Sort(wantIn)
			slices.Sort(wantOut)
			if self != 1/float64(tau+1) || !slices.Equal(nodes(in), wantIn) || !slices.Equal(nodes(out), wantOut) {
				t.Fatalf("n = %d, node %d: self %v, in %v, out %v; want 1/%d, %v, %v", n, i, self, in, out, tau+1, wantIn, wantOut)
			}
		}
		w := Matrix(top, 0)
		if mat.Equal(w, w.T()) {
			t.Errorf("n = %d: W is symmetric", n)
		}
	}
}

func nodes(l []Neighbor) []int {
	var n []int
	for _, x := range l {
		n = append(n, x.Node)
	}
	return n
}

// TestSmallGraphs checks the documented corner cases and weights.
func TestSmallGraphs(t *testing.T) {
	t.Parallel()
	const third, half = 1.0 / 3, 0.5
	for _, c := range []struct {
		top  Topology
		want []float64
	}{
		{Ring(1), []float64{1}},
		{OnePeerExponential(1), []float64{1}},
		{Exponential(1), []float64{1}},
		{Ring(2), []float64{half, half, half, half}},
		{Ring(3), []float64{third, third, third, third, third, third, third, third, third}},
		{Ring(4), []float64{third, third, 0, third, third, third, third, 0, 0, third, third, third, third, 0, third, third}},
		{Exponential(4), []float64{third, third, third, 0, 0, third, third, third, third, 0, third, third, third, third, 0, third}},
		{SymmetricExponential(4), []float64{0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25}},
		// Metropolis–Hastings on the 2×3 mesh: corners have degree 2, the
		// middle nodes 3: corner–corner links weigh 1/(1+2), the others 1/(1+3).
		{Mesh(6), []float64{
			5. / 12, 0.25, 0, third, 0, 0,
			0.25, 0.25, 0.25, 0, 0.25, 0,
			0, 0.25, 5. / 12, 0, 0, third,
			third, 0, 0, 5. / 12, 0.25, 0,
			0, 0.25, 0, 0.25, 0.25, 0.25,
			0, 0, third, 0, 0.25, 5. / 12}},
		// On the 2×3 torus every node has degree 3: one wrapped neighbour
		// across the rows, two along the row.
		{Torus(6), []float64{
			0.25, 0.25, 0.25, 0.25, 0, 0,
			0.25, 0.25, 0.25, 0, 0.25, 0,
			0.25, 0.25, 0.25, 0, 0, 0.25,
			0.25, 0, 0, 0.25, 0.25, 0.25,
			0, 0.25, 0, 0.25, 0.25, 0.25,
			0, 0, 0.25, 0.25, 0.25, 0.25}},
		{OnePeerExponential(2), []float64{half, half, half, half}},
	} {
		n := c.top.Nodes()
		if w := Matrix(c.top, 0); !mat.EqualApprox(w, mat.NewDense(n, n, c.want), 1e-15) {
			t.Errorf("%v: W =\n%v\nwant\n%v", c.top, mat.Formatted(w), mat.Formatted(mat.NewDense(n, n, c.want)))
		}
	}
	// The 3×3 mesh: corner–edge links 1/(1+3), edge–centre 1/(1+4).
	w := Matrix(Mesh(9), 0)
	for _, c := range []struct {
		i, j int
		want float64
	}{{0, 0, 0.5}, {0, 1, 0.25}, {1, 4, 0.2}, {1, 1, 1 - 0.25 - 0.25 - 0.2}, {4, 4, 0.2}, {0, 4, 0}} {
		if got := w.At(c.i, c.j); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("3×3 mesh: w_%d%d = %v, want %v", c.i, c.j, got, c.want)
		}
	}
}

func TestGridShape(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ n, rows, cols int }{
		{1, 1, 1}, {2, 1, 2}, {4, 2, 2}, {6, 2, 3}, {7, 1, 7}, {8, 2, 4}, {12, 3, 4}, {16, 4, 4}, {35, 5, 7}, {36, 6, 6}, {1023, 31, 33}, {1024, 32, 32},
	} {
		if r, cols := GridShape(c.n); r != c.rows || cols != c.cols {
			t.Errorf("GridShape(%d) = %d×%d, want %d×%d", c.n, r, cols, c.rows, c.cols)
		}
	}
}

// partners returns every node's partner at iteration k (−1 for none),
// failing unless W(k) is a matching's.
func partners(t *testing.T, top Topology, k int) []int {
	t.Helper()
	p := make([]int, top.Nodes())
	for i := range p {
		self, in := top.In(k, i)
		switch {
		case len(in) == 0 && self == 1:
			p[i] = -1
		case len(in) == 1 && self == 0.5 && in[0].Weight == 0.5:
			p[i] = in[0].Node
		default:
			t.Fatalf("%v, k = %d: node %d mixes %v with self %v, not a pair", top, k, i, in, self)
		}
	}
	return p
}

// TestRandomMatching checks that each iteration pairs nodes by a maximal
// matching of the base graph's edges, drawn from (seed, k) alone.
func TestRandomMatching(t *testing.T) {
	t.Parallel()
	for _, base := range matchingBases {
		for _, n := range []int{1, 2, 5, 8, 12, 33} {
			b, err := New(Spec{Kind: base, N: n})
			if err != nil {
				t.Fatal(err)
			}
			w := Matrix(b, 0)
			edge := func(i, j int) bool { return i != j && w.At(i, j) > 0 }
			top, again := RandomMatching(b, 3), RandomMatching(b, 3)
			differs := false
			var prev []int
			for _, k := range []int{0, 1, 2, 3, 4, 5, 6, 7, 1000} {
				p := partners(t, top, k)
				for i, j := range p {
					if j < 0 {
						for v := range n {
							if edge(i, v) && p[v] < 0 {
								t.Fatalf("%v, k = %d: edge %d–%d has both ends unpaired: not maximal", top, k, i, v)
							}
						}
						continue
					}
					if p[j] != i || !edge(i, j) {
						t.Fatalf("%v, k = %d: %d pairs with %d, whose partner is %d (base edge: %v)", top, k, i, j, p[j], edge(i, j))
					}
				}
				// Deterministic from (seed, k): another instance, asked in
				// another order, agrees.
				if q := partners(t, again, 1000-k); k <= 7 && !slices.Equal(q, partners(t, top, 1000-k)) {
					t.Fatalf("%v: two instances with the same seed disagree at k = %d", top, 1000-k)
				}
				if q := partners(t, again, k); !slices.Equal(p, q) {
					t.Fatalf("%v: two instances with the same seed disagree at k = %d: %v, %v", top, k, p, q)
				}
				differs = differs || prev != nil && !slices.Equal(p, prev)
				prev = p
			}
			if n >= 5 && !differs {
				t.Errorf("%v: the same matching at every iteration", top)
			}
		}
	}
	// Another seed draws other matchings.
	a, b := RandomMatching(Full(16), 1), RandomMatching(Full(16), 2)
	same := 0
	for k := range 8 {
		if slices.Equal(partners(t, a, k), partners(t, b, k)) {
			same++
		}
	}
	if same == 8 {
		t.Error("seeds 1 and 2 draw the same matchings")
	}
	// A full graph on an even number of nodes pairs every node, and the
	// iterations draw fresh matchings (15!! ≈ 2·10⁶ to choose from).
	var seen [][]int
	for k := range 10 {
		p := partners(t, a, k)
		if slices.Contains(p, -1) {
			t.Errorf("full graph on 16 nodes, k = %d: unpaired node in %v", k, p)
		}
		for j, q := range seen {
			if slices.Equal(p, q) {
				t.Errorf("full graph on 16 nodes: iterations %d and %d draw the same matching", j, k)
			}
		}
		seen = append(seen, p)
	}
}

// TestRandomMatchingConcurrent asks for several iterations at once; run
// with -race.
func TestRandomMatchingConcurrent(t *testing.T) {
	t.Parallel()
	top := RandomMatching(Torus(16), 5)
	want := make([][]int, 4)
	for k := range want {
		want[k] = partners(t, RandomMatching(Torus(16), 5), k)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 8 {
		wg.Go(func() {
			for rep := range 50 {
				k := (g + rep) % 4
				for i := range 16 {
					_, in := top.In(k, i)
					got := -1
					if len(in) == 1 {
						got = in[0].Node
					}
					if got != want[k][i] {
						errs <- fmt.Sprintf("k = %d, node %d: partner %d, want %d", k, i, got, want[k][i])
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	top, err := New(Spec{Kind: "matching", N: 8, Seed: 1})
	if err != nil || top.String() != "random matchings of the fully connected, 8 nodes (seed 1)" {
		t.Errorf("matching with the default base: %v, %v", top, err)
	}
	for _, s := range []Spec{
		{Kind: "star", N: 4},
		{Kind: "ring", N: 0},
		{Kind: "ring", N: -1},
		{Kind: "ring", N: 4, Base: "full"},
		{Kind: "matching", N: 4, Base: "mesh"},
		{Kind: "matching", N: 4, Base: "one-peer-exp"},
	} {
		if top, err := New(s); err == nil {
			t.Errorf("New(%+v) = %v, want an error", s, top)
		}
	}
	for _, c := range []struct {
		top    Topology
		period int
	}{{Ring(8), 1}, {Torus(8), 1}, {OnePeerExponential(8), 3}, {OnePeerExponential(9), 4}, {OnePeerExponential(1), 1}, {RandomMatching(Ring(8), 1), 0}} {
		if got := c.top.Period(); got != c.period {
			t.Errorf("%v: period %d, want %d", c.top, got, c.period)
		}
	}
}

func TestPanics(t *testing.T) {
	t.Parallel()
	for name, f := range map[string]func(){
		"ring of 0":            func() { Ring(0) },
		"node out of range":    func() { Ring(4).In(0, 4) },
		"negative iteration":   func() { Exponential(4).Out(-1, 0) },
		"time-varying base":    func() { RandomMatching(OnePeerExponential(8), 1) },
		"negative product":     func() { Product(Ring(4), 0, -1) },
		"ρ of a non-square W":  func() { Rho(mat.NewDense(2, 3, nil)) },
		"matching node range":  func() { RandomMatching(Ring(4), 1).In(0, -1) },
		"one-peer of 0 nodes":  func() { OnePeerExponential(0) },
		"grid shape of 0":      func() { GridShape(0) },
		"symmetric exp of -1":  func() { SymmetricExponential(-1) },
		"negative product (k)": func() { Product(Ring(4), -1, 1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// TestProductOrder checks that Product puts the first iteration's matrix
// on the right: mixing x by W(k), then W(k+1), is Product(t, k, 2)·x.
func TestProductOrder(t *testing.T) {
	t.Parallel()
	top := RandomMatching(Ring(9), 11)
	x := mat.NewVecDense(9, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9})
	var step, want, got mat.VecDense
	step.MulVec(Matrix(top, 4), x)
	want.MulVec(Matrix(top, 5), &step)
	got.MulVec(Product(top, 4, 2), x)
	if !mat.Equal(&got, &want) {
		t.Errorf("Product(t, 4, 2)·x = %v, want W(5)·W(4)·x = %v", got.RawVector().Data, want.RawVector().Data)
	}
	var other mat.VecDense
	other.MulVec(Matrix(top, 5), x)
	other.MulVec(Matrix(top, 4), &other)
	if mat.Equal(&other, &want) {
		t.Log("W(4) and W(5) commute on x: the order is not tested")
	}
	if !mat.Equal(Product(top, 3, 0), mat.NewDiagDense(9, []float64{1, 1, 1, 1, 1, 1, 1, 1, 1})) {
		t.Error("Product of 0 matrices is not the identity")
	}
}
