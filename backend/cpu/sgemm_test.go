package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// gemmCase is one product of the table tests.
type gemmCase struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	// pad is added to each leading dimension beyond its least value.
	pad int
}

func (c gemmCase) String() string {
	t := func(b bool) string {
		if b {
			return "T"
		}
		return "N"
	}
	return fmt.Sprintf("%s%s_m%d_n%d_k%d_a%g_b%g_pad%d", t(c.transA), t(c.transB), c.m, c.n, c.k, c.alpha, c.beta, c.pad)
}

// gemmOperands holds the inputs of a case with their leading dimensions.
type gemmOperands struct {
	a, b, c       []float32
	lda, ldb, ldc int
}

// sentinel fills the padding of C; it must survive every product.
const sentinel = float32(-12345.5)

func newGemmOperands(tc gemmCase, rng *rand.Rand) gemmOperands {
	ar, ac := tc.m, tc.k
	if tc.transA {
		ar, ac = ac, ar
	}
	br, bc := tc.k, tc.n
	if tc.transB {
		br, bc = bc, br
	}
	o := gemmOperands{lda: max(1, ac) + tc.pad, ldb: max(1, bc) + tc.pad, ldc: max(1, tc.n) + tc.pad}
	fill := func(rows, cols, ld int) []float32 {
		if rows == 0 || cols == 0 {
			return nil
		}
		s := make([]float32, (rows-1)*ld+cols)
		for i := range s {
			s[i] = sentinel
		}
		for i := range rows {
			for j := range cols {
				s[i*ld+j] = 2*rng.Float32() - 1
			}
		}
		return s
	}
	o.a = fill(ar, ac, o.lda)
	o.b = fill(br, bc, o.ldb)
	o.c = fill(tc.m, tc.n, o.ldc)
	return o
}

// refGemm is the product in float64, with the magnitude Σ|α·a·b| + |β·c| of
// each element, which bounds its rounding error.
func refGemm(tc gemmCase, o gemmOperands) (want, mag []float64) {
	want = make([]float64, tc.m*tc.n)
	mag = make([]float64, tc.m*tc.n)
	at := func(i, l int) float64 {
		if tc.transA {
			return float64(o.a[l*o.lda+i])
		}
		return float64(o.a[i*o.lda+l])
	}
	bt := func(l, j int) float64 {
		if tc.transB {
			return float64(o.b[j*o.ldb+l])
		}
		return float64(o.b[l*o.ldb+j])
	}
	for i := range tc.m {
		for j := range tc.n {
			var s, g float64
			for l := range tc.k {
				p := at(i, l) * bt(l, j)
				s += p
				g += math.Abs(p)
			}
			v := float64(tc.alpha) * s
			g *= math.Abs(float64(tc.alpha))
			if tc.beta != 0 {
				c := float64(o.c[i*o.ldc+j])
				v += float64(tc.beta) * c
				g += math.Abs(float64(tc.beta) * c)
			}
			want[i*tc.n+j], mag[i*tc.n+j] = v, g
		}
	}
	return want, mag
}

// checkGemm compares C after a product with the reference: every element
// within the float32 error bound (k+2)·2⁻²³ of its magnitude, and C's
// padding untouched.
func checkGemm(t *testing.T, tc gemmCase, o gemmOperands, got []float32, want, mag []float64) {
	t.Helper()
	const eps = 1.0 / (1 << 23)
	bad := 0
	for i := range tc.m {
		for j := range tc.n {
			g := float64(got[i*o.ldc+j])
			w := want[i*tc.n+j]
			tol := float64(tc.k+2)*eps*mag[i*tc.n+j] + 1e-30
			if math.IsNaN(g) || math.Abs(g-w) > tol {
				if bad < 5 {
					t.Errorf("%v: C[%d,%d] = %v, want %v ± %.3g", tc, i, j, g, w, tol)
				}
				bad++
			}
		}
		for j := tc.n; tc.n > 0 && j < o.ldc && i < tc.m-1; j++ {
			if got[i*o.ldc+j] != sentinel {
				t.Fatalf("%v: padding C[%d,%d] changed to %v", tc, i, j, got[i*o.ldc+j])
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%v: %d of %d elements wrong", tc, bad, tc.m*tc.n)
	}
}

// asmPaths returns the assembly paths of this CPU.
func asmPaths() []*sgemmArch {
	var archs []*sgemmArch
	for _, a := range sgemmPaths {
		if a != nil {
			archs = append(archs, a)
		}
	}
	return archs
}

func gemmCases(short bool) []gemmCase {
	dims := []int{0, 1, 2, 3, 5, 6, 7, 13, 14, 15, 16, 17, 31, 32, 33, 47}
	var cases []gemmCase
	trans := [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}}
	scalars := [][2]float32{{1, 0}, {1, 1}, {-0.5, 2}, {2, -0.5}, {0, 2}, {0, 0}}
	for di, m := range dims {
		for dj, n := range dims {
			// k cycles through the dimensions so that every (m, n) meets
			// several depths without the full cube.
			for r := range 3 {
				k := dims[(di*5+dj*3+r*7)%len(dims)]
				tr := trans[(di+dj+r)%4]
				s := scalars[(di*7+dj+r)%len(scalars)]
				cases = append(cases, gemmCase{tr[0], tr[1], m, n, k, s[0], s[1], (di + r) % 3})
			}
		}
	}
	// Shapes past the blocking: depth beyond kc, rows beyond mc, width
	// where A is packed, several panels with a ragged edge.
	big := []gemmCase{
		{m: 37, n: 70, k: 300, alpha: 1, beta: 0},
		{m: 200, n: 45, k: 513, alpha: -0.5, beta: 2, pad: 3},
		{m: 171, n: 301, k: 260, alpha: 2, beta: 1},
		{m: 341, n: 263, k: 97, alpha: 1, beta: -0.5, pad: 1},
		{m: 29, n: 600, k: 611, alpha: 1, beta: 1},
		{m: 300, n: 50, k: 1100, alpha: 0.5, beta: 0.5, pad: 2},
	}
	for _, b := range big {
		for _, tr := range trans {
			b.transA, b.transB = tr[0], tr[1]
			cases = append(cases, b)
			if short {
				break
			}
		}
	}
	return cases
}

// gemmPolicies are the settings of the packing thresholds that send every
// product through each layout the kernels read: A packed or in place, B
// packed or in place.
var gemmPolicies = []struct {
	name      string
	packAAll  bool
	packAMinN int
	packBMinM int
}{
	{"default", sgemmPolicy.packAAll, sgemmPolicy.packAMinN, sgemmPolicy.packBMinM},
	{"pack all", true, 0, 0},
	{"pack none", false, 1 << 30, 1 << 30},
}

// withPolicy sets the packing thresholds for the rest of a test.
func withPolicy(t *testing.T, packAAll bool, packAMinN, packBMinM int) {
	old := sgemmPolicy
	sgemmPolicy.packAAll, sgemmPolicy.packAMinN, sgemmPolicy.packBMinM = packAAll, packAMinN, packBMinM
	t.Cleanup(func() { sgemmPolicy = old })
}

func TestSgemmTable(t *testing.T) {
	archs := asmPaths()
	if len(archs) == 0 {
		t.Skip("no assembly kernels on this CPU")
	}
	for _, pol := range gemmPolicies {
		t.Run(pol.name, func(t *testing.T) {
			withPolicy(t, pol.packAAll, pol.packAMinN, pol.packBMinM)
			rng := rand.New(rand.NewPCG(1, 2))
			for _, tc := range gemmCases(testing.Short()) {
				o := newGemmOperands(tc, rng)
				want, mag := refGemm(tc, o)
				for _, arch := range archs {
					for _, threads := range []int{1, 3} {
						got := slices.Clone(o.c)
						sgemm(arch, threads, tc.transA, tc.transB, tc.m, tc.n, tc.k, tc.alpha, o.a, o.lda, o.b, o.ldb, tc.beta, got, o.ldc)
						checkGemm(t, tc, o, got, want, mag)
					}
				}
			}
		})
	}
}

// TestSgemmBetaZeroIgnoresC checks BLAS's rule that C is not read when
// β = 0, and A and B are not read when α = 0: NaN there must not reach C.
func TestSgemmBetaZeroIgnoresC(t *testing.T) {
	nan := float32(math.NaN())
	for _, arch := range asmPaths() {
		for _, tc := range []gemmCase{
			{m: 20, n: 40, k: 9, alpha: 1},
			{m: 3, n: 7, k: 300, alpha: 2, transA: true},
			{m: 33, n: 300, k: 5, alpha: -1, transB: true},
		} {
			o := newGemmOperands(tc, rand.New(rand.NewPCG(3, 4)))
			for i := range o.c {
				o.c[i] = nan
			}
			sgemm(arch, 2, tc.transA, tc.transB, tc.m, tc.n, tc.k, tc.alpha, o.a, o.lda, o.b, o.ldb, 0, o.c, o.ldc)
			for i, v := range o.c {
				if v != v && i%o.ldc < tc.n {
					t.Fatalf("%s %v: C[%d] is NaN after β = 0", arch.name, tc, i)
				}
			}
			// α = 0: A and B full of NaN, C scaled by β.
			for i := range o.a {
				o.a[i] = nan
			}
			for i := range o.b {
				o.b[i] = nan
			}
			before := slices.Clone(o.c)
			sgemm(arch, 2, tc.transA, tc.transB, tc.m, tc.n, tc.k, 0, o.a, o.lda, o.b, o.ldb, 2, o.c, o.ldc)
			for i, v := range o.c {
				if i%o.ldc < tc.n && v != 2*before[i] {
					t.Fatalf("%s %v: α = 0: C[%d] = %v, want %v", arch.name, tc, i, v, 2*before[i])
				}
			}
		}
	}
}

// TestSgemmDeterministic checks that the thread count does not change a
// single bit of the result.
func TestSgemmDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, arch := range asmPaths() {
		for _, tc := range []gemmCase{
			{m: 300, n: 64, k: 576, alpha: 1},
			{m: 97, n: 333, k: 700, alpha: 1, beta: 1, transA: true},
			{m: 5, n: 1000, k: 64, alpha: 1, transB: true},
		} {
			o := newGemmOperands(tc, rng)
			var first []float32
			for _, threads := range []int{1, 2, 3, 4, 7} {
				got := slices.Clone(o.c)
				sgemm(arch, threads, tc.transA, tc.transB, tc.m, tc.n, tc.k, tc.alpha, o.a, o.lda, o.b, o.ldb, tc.beta, got, o.ldc)
				if first == nil {
					first = got
					continue
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(first[i]) {
						t.Fatalf("%s %v: %d threads: C[%d] = %v, 1 thread gave %v", arch.name, tc, threads, i, got[i], first[i])
					}
				}
			}
		}
	}
}

// TestSgemmArchs checks the kernel tables of every path: a kernel for every
// row count up to mr, and room in the edge tile for unmasked kernels.
func TestSgemmArchs(t *testing.T) {
	for _, a := range asmPaths() {
		for layout, forms := range a.kern {
			for form, kerns := range forms {
				if kerns == nil {
					if layout == bPacked || a.masked {
						t.Errorf("%s: no kernels for layout %d form %d", a.name, layout, form)
					}
					continue
				}
				missing := slices.ContainsFunc(kerns[1:], func(k sgemmKernel) bool { return k == nil })
				if len(kerns) != a.mr+1 || missing {
					t.Errorf("%s: layout %d form %d: %d kernels, want one per row count 1..%d", a.name, layout, form, len(kerns)-1, a.mr)
				}
			}
		}
		if !a.masked && a.mr*a.nr > sgemmMaxTile {
			t.Errorf("%s: %d×%d tile exceeds sgemmMaxTile %d", a.name, a.mr, a.nr, sgemmMaxTile)
		}
		if a.kc%4 != 0 || a.mc%a.mr != 0 {
			t.Errorf("%s: kc %d not a multiple of the unrolling 4 or mc %d not of mr %d", a.name, a.kc, a.mc, a.mr)
		}
	}
}
