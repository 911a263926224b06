package gossip

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"

	"gonum.org/v1/gonum/mat"
)

// Neighbor is one link of a node in W: the node at the other end and the
// link's weight.
type Neighbor struct {
	Node   int     `json:"node"`
	Weight float64 `json:"weight"`
}

// Topology is a sequence of mixing matrices W(k), k = 0, 1, …, on n nodes:
// at iteration k node i sets x_i ← Σ_j w_ij(k) x_j. Every W(k) is doubly
// stochastic (w_ij ≥ 0, rows and columns sum to 1), so mixing keeps the
// nodes' average. The self weight w_ii is returned apart from the links,
// which never include the node itself. Topologies are safe for concurrent
// use.
type Topology interface {
	// Nodes returns n ≥ 1.
	Nodes() int
	// In returns node i's row of W(k): self = w_ii, and the nodes j ≠ i it
	// receives from (w_ij > 0) with Weight w_ij, ascending by node.
	In(k, i int) (self float64, in []Neighbor)
	// Out returns node i's column of W(k): self = w_ii, and the nodes j ≠ i
	// that receive from it (w_ji > 0) with Weight w_ji, ascending by node.
	Out(k, i int) (self float64, out []Neighbor)
	// Period returns p ≥ 1 when W(k) = W(k mod p) for every k (1 for a
	// static topology), or 0 when W(k) has no period (random matchings).
	Period() int
	// String describes the topology, as flock prints it.
	String() string
}

// Kinds returns the names of the topologies that New builds.
func Kinds() []string {
	return []string{"ring", "mesh", "torus", "full", "exp", "sym-exp", "one-peer-exp", "matching"}
}

// matchingBases are the regular graphs New accepts as a matching's base.
var matchingBases = []string{"ring", "torus", "sym-exp", "full"}

// Spec names a topology, as flock's flags and configurations do.
type Spec struct {
	// Kind is one of Kinds().
	Kind string
	// N is the number of nodes, ≥ 1.
	N int
	// Base is the regular graph whose edges Kind "matching" draws its
	// matchings from: ring, torus, sym-exp or full; "" is full.
	Base string
	// Seed seeds the matchings of Kind "matching".
	Seed uint64
}

// New builds the topology s names.
func New(s Spec) (Topology, error) {
	if !slices.Contains(Kinds(), s.Kind) {
		return nil, fmt.Errorf("gossip: unknown topology %q, want one of %s", s.Kind, strings.Join(Kinds(), ", "))
	}
	if s.N < 1 {
		return nil, fmt.Errorf("gossip: %d nodes, want at least 1", s.N)
	}
	if s.Kind != "matching" && s.Base != "" {
		return nil, fmt.Errorf("gossip: a base graph (%q) is only for kind matching, not %q", s.Base, s.Kind)
	}
	switch s.Kind {
	case "ring":
		return Ring(s.N), nil
	case "mesh":
		return Mesh(s.N), nil
	case "torus":
		return Torus(s.N), nil
	case "full":
		return Full(s.N), nil
	case "exp":
		return Exponential(s.N), nil
	case "sym-exp":
		return SymmetricExponential(s.N), nil
	case "one-peer-exp":
		return OnePeerExponential(s.N), nil
	case "matching":
		base := s.Base
		if base == "" {
			base = "full"
		}
		if !slices.Contains(matchingBases, base) {
			return nil, fmt.Errorf("gossip: base graph %q of matchings, want one of %s", s.Base, strings.Join(matchingBases, ", "))
		}
		b, err := New(Spec{Kind: base, N: s.N})
		if err != nil {
			return nil, err
		}
		return RandomMatching(b, s.Seed), nil
	}
	panic("gossip: unreachable")
}

// tau returns τ = ⌈log₂ n⌉ for n ≥ 1: 2^(τ−1) < n ≤ 2^τ, so every offset
// 2^j with j < τ lies in [1, n).
func tau(n int) int { return bits.Len(uint(n - 1)) }

func checkNodes(n int) {
	if n < 1 {
		panic("gossip: fewer than 1 node")
	}
}

func checkNode(k, i, n int) {
	if k < 0 {
		panic("gossip: negative iteration")
	}
	if i < 0 || i >= n {
		panic("gossip: node out of range")
	}
}

// circulant is a topology whose W(k) is circulant with uniform weights:
// w_ij(k) = 1/(|D_k|+1) for j − i mod n in D_k ∪ {0}, 0 elsewhere, where
// D_k = offsets[k mod period] is a set of distinct offsets in [1, n). Its
// rows and columns each hold |D_k|+1 equal weights, so W(k) is doubly
// stochastic whatever D_k is.
type circulant struct {
	n       int
	name    string
	offsets [][]int
}

func newCirculant(n int, name string, offsets ...[]int) *circulant {
	for _, d := range offsets {
		slices.Sort(d)
		for i, o := range d {
			if o < 1 || o >= n || i > 0 && d[i-1] == o {
				panic("gossip: bad circulant offsets")
			}
		}
	}
	return &circulant{n: n, name: name, offsets: offsets}
}

func (c *circulant) Nodes() int     { return c.n }
func (c *circulant) Period() int    { return len(c.offsets) }
func (c *circulant) String() string { return c.name }

func (c *circulant) In(k, i int) (float64, []Neighbor)  { return c.links(k, i, 1) }
func (c *circulant) Out(k, i int) (float64, []Neighbor) { return c.links(k, i, -1) }

// links lists i + sign·d mod n for the offsets d of iteration k.
func (c *circulant) links(k, i, sign int) (float64, []Neighbor) {
	checkNode(k, i, c.n)
	d := c.offsets[k%len(c.offsets)]
	w := 1 / float64(len(d)+1)
	nb := make([]Neighbor, len(d))
	for x, o := range d {
		nb[x] = Neighbor{Node: ((i+sign*o)%c.n + c.n) % c.n, Weight: w}
	}
	slices.SortFunc(nb, func(a, b Neighbor) int { return a.Node - b.Node })
	return w, nb
}

// distinctOffsets returns the distinct values of o mod n, leaving out 0.
func distinctOffsets(n int, o ...int) []int {
	var d []int
	for _, x := range o {
		x = (x%n + n) % n
		if x != 0 && !slices.Contains(d, x) {
			d = append(d, x)
		}
	}
	return d
}

func plural(n int) string {
	if n == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", n)
}

// Ring returns the ring on n nodes: each node averages itself and its two
// neighbours i ± 1 with weight 1/3. On n = 2 the two neighbours are the
// same node, and the weights are uniform over the distinct ones, ½ and ½
// (exact averaging); on n = 1 the node keeps its value.
func Ring(n int) Topology {
	checkNodes(n)
	return newCirculant(n, "ring, "+plural(n), distinctOffsets(n, 1, -1))
}

// Full returns the fully connected graph on n nodes: w_ij = 1/n, exact
// averaging in one iteration.
func Full(n int) Topology {
	checkNodes(n)
	d := make([]int, n-1)
	for i := range d {
		d[i] = i + 1
	}
	return newCirculant(n, "fully connected, "+plural(n), d)
}

// Exponential returns the static exponential graph on n nodes (Ying et
// al., 2021): node i receives from i+1, i+2, i+4, …, i+2^(τ−1) (mod n),
// τ = ⌈log₂ n⌉, and sends to i−1, …, i−2^(τ−1); all τ+1 weights of a row,
// self included, are 1/(τ+1). Since 2^(τ−1) < n these offsets are τ
// distinct values in [1, n) for every n ≥ 2, not only for powers of two:
// no link repeats or loops back to i, and W is circulant, doubly
// stochastic and, for n ≥ 4, not symmetric (on 2 and 3 nodes it is the
// full graph).
func Exponential(n int) Topology {
	checkNodes(n)
	t := tau(n)
	d := make([]int, t)
	for j := range d {
		d[j] = 1 << j
	}
	return newCirculant(n, fmt.Sprintf("static exponential graph, %s, τ = %d", plural(n), t), d)
}

// SymmetricExponential returns the undirected exponential graph on n
// nodes: node i links both ways to i ± 2^j (mod n), j < τ = ⌈log₂ n⌉, and
// the weights are uniform over the distinct neighbours and the node itself.
// Offsets that coincide mod n (2^(τ−1) = −2^(τ−1) when n is a power of
// two, 4 = −2 when n = 6) count once, so a node has between τ and 2τ
// neighbours. W is symmetric and doubly stochastic.
func SymmetricExponential(n int) Topology {
	checkNodes(n)
	t := tau(n)
	var o []int
	for j := range t {
		o = append(o, 1<<j, -(1 << j))
	}
	return newCirculant(n, fmt.Sprintf("symmetric exponential graph, %s, τ = %d", plural(n), t), distinctOffsets(n, o...))
}

// OnePeerExponential returns the one-peer exponential graph on n nodes
// (Ying et al., 2021), time-varying with period τ = ⌈log₂ n⌉: at iteration
// k node i receives from i + 2^(k mod τ) and sends to i − 2^(k mod τ), and
// averages ½ its own value and ½ the received one. W(k) = (I + P^(2^(k mod τ)))/2
// with P the cyclic shift, so for n a power of two any τ consecutive
// matrices multiply to exactly 11ᵀ/n: Π_j (I + P^(2^j))/2 = Σ_s P^s / n.
// On n = 1 the node keeps its value.
func OnePeerExponential(n int) Topology {
	checkNodes(n)
	t := tau(n)
	if t == 0 {
		return newCirculant(n, "one-peer exponential graph, 1 node", []int{})
	}
	d := make([][]int, t)
	for j := range d {
		d[j] = []int{1 << j}
	}
	return newCirculant(n, fmt.Sprintf("one-peer exponential graph, %s, period τ = %d", plural(n), t), d...)
}

// GridShape returns the most square factorization n = rows × cols,
// rows ≤ cols: rows is the largest divisor of n not above √n. A prime n
// gives 1 × n.
func GridShape(n int) (rows, cols int) {
	checkNodes(n)
	rows = int(math.Sqrt(float64(n)))
	for rows*rows > n {
		rows--
	}
	for (rows+1)*(rows+1) <= n {
		rows++
	}
	for n%rows != 0 {
		rows--
	}
	return rows, n / rows
}

// graph is a static undirected topology with Metropolis–Hastings weights.
type graph struct {
	name string
	adj  [][]int // distinct neighbours, ascending, without the node itself
	w    [][]float64
	self []float64
}

// newMetropolis weights the undirected graph adj with Metropolis–Hastings
// weights (Xiao & Boyd, 2004): w_ij = 1/(1 + max(d_i, d_j)) on edges and
// w_ii = 1 − Σ_j w_ij, with d the degrees. W is symmetric, and w_ii > 0
// since each of i's d_i weights is at most 1/(1+d_i).
func newMetropolis(name string, adj [][]int) *graph {
	g := &graph{name: name, adj: adj, w: make([][]float64, len(adj)), self: make([]float64, len(adj))}
	for i, nb := range adj {
		g.w[i] = make([]float64, len(nb))
		s := 0.0
		for x, j := range nb {
			g.w[i][x] = 1 / float64(1+max(len(nb), len(adj[j])))
			s += g.w[i][x]
		}
		g.self[i] = 1 - s
	}
	return g
}

func (g *graph) Nodes() int     { return len(g.adj) }
func (g *graph) Period() int    { return 1 }
func (g *graph) String() string { return g.name }

func (g *graph) In(k, i int) (float64, []Neighbor) {
	checkNode(k, i, len(g.adj))
	nb := make([]Neighbor, len(g.adj[i]))
	for x, j := range g.adj[i] {
		nb[x] = Neighbor{Node: j, Weight: g.w[i][x]}
	}
	return g.self[i], nb
}

// Out is In: W is symmetric.
func (g *graph) Out(k, i int) (float64, []Neighbor) { return g.In(k, i) }

// Mesh returns the 2-D mesh on n nodes with Metropolis–Hastings weights
// w_ij = 1/(1 + max(d_i, d_j)) for each edge and w_ii = 1 − Σ_j w_ij. The
// grid is GridShape(n), node i at row i/cols, column i mod cols, linked to
// the nodes above, below, left and right of it inside the grid. A prime n
// gives a path.
func Mesh(n int) Topology { return grid(n, false) }

// Torus returns the 2-D torus on n nodes: Mesh with the rows and columns
// wrapped around, so every node has the same degree (4 on grids of at
// least 3 × 3; a side of 2 gives one neighbour along it, as the two
// wrapped links reach the same node; a side of 1, none). A prime n gives a
// ring.
func Torus(n int) Topology { return grid(n, true) }

func grid(n int, wrap bool) Topology {
	checkNodes(n)
	rows, cols := GridShape(n)
	adj := make([][]int, n)
	for i := range adj {
		r, c := i/cols, i%cols
		var nb []int
		add := func(r2, c2 int) {
			if wrap {
				r2, c2 = (r2+rows)%rows, (c2+cols)%cols
			} else if r2 < 0 || r2 >= rows || c2 < 0 || c2 >= cols {
				return
			}
			j := r2*cols + c2
			if j != i && !slices.Contains(nb, j) {
				nb = append(nb, j)
			}
		}
		add(r-1, c)
		add(r+1, c)
		add(r, c-1)
		add(r, c+1)
		slices.Sort(nb)
		adj[i] = nb
	}
	name := "2-D mesh"
	if wrap {
		name = "2-D torus"
	}
	return newMetropolis(fmt.Sprintf("%s %d×%d (Metropolis–Hastings weights), %s", name, rows, cols, plural(n)), adj)
}

// matching is a topology of random maximal matchings of a base graph.
type matching struct {
	base string
	adj  [][]int // the base graph's undirected edges
	seed uint64

	mu      sync.Mutex
	k       int   // the iteration partner is for
	partner []int // partner[i], −1 for none; nil before the first draw
}

// RandomMatching returns pairwise gossip on the edges of a static base
// graph, as in Swarm SGD (Nadiradze et al., 2021), which wants a regular
// base (Ring, Torus, SymmetricExponential, Full): at iteration k the nodes
// are paired by a random maximal matching of the base graph's edges (i–j
// is an edge when w_ij > 0 or w_ji > 0); a pair averages ½ and ½, a node
// left unpaired keeps its value. W(k) is symmetric and doubly stochastic.
//
// The matching is drawn from (seed, k) alone, so every node computes the
// same one without communicating: ChaCha8 seeded with seed and k orders
// the nodes at random, and each node still unpaired in that order pairs
// with a neighbour drawn uniformly among its unpaired neighbours, if any.
// Every edge then has a paired end: the matching is maximal. The draw is
// the same on every machine and Go release.
func RandomMatching(base Topology, seed uint64) Topology {
	if base.Period() != 1 {
		panic("gossip: matching on a time-varying base graph")
	}
	n := base.Nodes()
	adj := make([][]int, n)
	for i := range n {
		_, in := base.In(0, i)
		_, out := base.Out(0, i)
		for _, l := range append(in, out...) {
			if !slices.Contains(adj[i], l.Node) {
				adj[i] = append(adj[i], l.Node)
			}
		}
		slices.Sort(adj[i])
	}
	return &matching{base: base.String(), adj: adj, seed: seed}
}

func (m *matching) Nodes() int  { return len(m.adj) }
func (m *matching) Period() int { return 0 }
func (m *matching) String() string {
	return fmt.Sprintf("random matchings of the %s (seed %d)", m.base, m.seed)
}

func (m *matching) In(k, i int) (float64, []Neighbor) {
	checkNode(k, i, len(m.adj))
	if j := m.partnerOf(k, i); j >= 0 {
		return 0.5, []Neighbor{{Node: j, Weight: 0.5}}
	}
	return 1, nil
}

// Out is In: W(k) is symmetric.
func (m *matching) Out(k, i int) (float64, []Neighbor) { return m.In(k, i) }

// partnerOf returns i's partner at iteration k, or −1. It keeps the last
// iteration's matching: mixing asks for every node at the same k.
func (m *matching) partnerOf(k, i int) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.partner == nil || m.k != k {
		m.partner, m.k = m.draw(k), k
	}
	return m.partner[i]
}

func (m *matching) draw(k int) []int {
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[0:], m.seed)
	binary.LittleEndian.PutUint64(seed[8:], uint64(k))
	copy(seed[16:], "gossip.matching")
	r := rand.NewChaCha8(seed)
	n := len(m.adj)
	order := make([]int, n)
	partner := make([]int, n)
	for i := range order {
		order[i], partner[i] = i, -1
	}
	for i := n - 1; i > 0; i-- {
		j := uniform(r, i+1)
		order[i], order[j] = order[j], order[i]
	}
	var free []int
	for _, u := range order {
		if partner[u] >= 0 {
			continue
		}
		free = free[:0]
		for _, v := range m.adj[u] {
			if partner[v] < 0 {
				free = append(free, v)
			}
		}
		if len(free) > 0 {
			v := free[uniform(r, len(free))]
			partner[u], partner[v] = v, u
		}
	}
	return partner
}

// uniform draws uniformly from [0, n) with Lemire's multiply-and-reject,
// on ChaCha8's output alone, which the Go releases keep the same (the
// derived methods of math/rand/v2 are not promised to be).
func uniform(r *rand.ChaCha8, n int) int {
	hi, lo := bits.Mul64(r.Uint64(), uint64(n))
	if lo < uint64(n) {
		for thresh := -uint64(n) % uint64(n); lo < thresh; {
			hi, lo = bits.Mul64(r.Uint64(), uint64(n))
		}
	}
	return int(hi)
}

// Matrix returns W(k) of t as an n×n matrix: row i holds node i's weights,
// x_i ← Σ_j w_ij x_j.
func Matrix(t Topology, k int) *mat.Dense {
	n := t.Nodes()
	w := mat.NewDense(n, n, nil)
	for i := range n {
		self, in := t.In(k, i)
		w.Set(i, i, self)
		for _, l := range in {
			w.Set(i, l.Node, l.Weight)
		}
	}
	return w
}

// Product returns the mixing of iterations k, …, k+m−1 as one matrix,
// W(k+m−1) ⋯ W(k+1) W(k) (the first iteration's matrix on the right, as
// x(k+m) = W(k+m−1) ⋯ W(k) x(k)); m = 0 gives the identity.
func Product(t Topology, k, m int) *mat.Dense {
	if k < 0 || m < 0 {
		panic("gossip: negative iteration or count")
	}
	n := t.Nodes()
	p := mat.NewDense(n, n, nil)
	for i := range n {
		p.Set(i, i, 1)
	}
	for s := range m {
		p.Mul(Matrix(t, k+s), p)
	}
	return p
}

// Rho returns ρ = ‖W − 11ᵀ/n‖₂, the largest singular value of W − 11ᵀ/n,
// for a square W. For doubly stochastic W it bounds how fast mixing shrinks
// the nodes' distance to their average: ‖Wx − x̄1‖ ≤ ρ ‖x − x̄1‖; ρ = 0 is
// exact averaging, ρ near 1 is slow mixing.
func Rho(w mat.Matrix) float64 {
	n, c := w.Dims()
	if n != c {
		panic(mat.ErrSquare)
	}
	d := mat.DenseCopyOf(w)
	inv := 1 / float64(n)
	d.Apply(func(_, _ int, v float64) float64 { return v - inv }, d)
	var svd mat.SVD
	if !svd.Factorize(d, mat.SVDNone) {
		panic("gossip: Rho: SVD did not converge")
	}
	return svd.Values(nil)[0]
}
