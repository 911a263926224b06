package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
	"gonum.org/v1/gonum/blas/testblas"
)

// withKernelPath runs the rest of a test on the named kernel path.
func withKernelPath(t *testing.T, name string) {
	t.Helper()
	old := KernelPath()
	if err := useKernelPath(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := useKernelPath(old); err != nil {
			t.Error(err)
		}
	})
}

func transOf(b bool) blas.Transpose {
	if b {
		return blas.Trans
	}
	return blas.NoTrans
}

// dgemmVia32 runs gonum's float64 Dgemm tests through BLAS32.Sgemm. Their
// operands and results are small integers and halves, exact in float32.
type dgemmVia32 struct{ impl BLAS32 }

func (d dgemmVia32) Dgemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	to32 := func(s []float64) []float32 {
		out := make([]float32, len(s))
		for i, v := range s {
			out[i] = float32(v)
		}
		return out
	}
	c32 := to32(c)
	d.impl.Sgemm(tA, tB, m, n, k, float32(alpha), to32(a), lda, to32(b), ldb, float32(beta), c32, ldc)
	for i, v := range c32 {
		c[i] = float64(v)
	}
}

func TestBLAS32Testblas(t *testing.T) {
	for _, path := range KernelPaths() {
		t.Run(path, func(t *testing.T) {
			withKernelPath(t, path)
			testblas.TestDgemm(t, dgemmVia32{})
		})
	}
}

func TestBLAS32Table(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	cases := gemmCases(true)
	for _, path := range KernelPaths() {
		t.Run(path, func(t *testing.T) {
			withKernelPath(t, path)
			for _, threads := range []int{1, 2} {
				impl := BLAS32{Threads: threads}
				for _, tc := range cases {
					o := newGemmOperands(tc, rng)
					want, mag := refGemm(tc, o)
					got := slices.Clone(o.c)
					impl.Sgemm(transOf(tc.transA), transOf(tc.transB), tc.m, tc.n, tc.k, tc.alpha, o.a, o.lda, o.b, o.ldb, tc.beta, got, o.ldc)
					checkGemm(t, tc, o, got, want, mag)
				}
			}
		})
	}
}

// TestBLAS32NaN checks on every path that C is not read when β = 0 and A
// and B are not read when α = 0.
func TestBLAS32NaN(t *testing.T) {
	nan := float32(math.NaN())
	for _, path := range KernelPaths() {
		t.Run(path, func(t *testing.T) {
			withKernelPath(t, path)
			for _, tc := range []gemmCase{{m: 9, n: 35, k: 4, alpha: 1}, {m: 40, n: 3, k: 17, alpha: -2, transA: true, transB: true}} {
				o := newGemmOperands(tc, rand.New(rand.NewPCG(9, 10)))
				c := slices.Repeat([]float32{nan}, len(o.c))
				BLAS32{}.Sgemm(transOf(tc.transA), transOf(tc.transB), tc.m, tc.n, tc.k, 1, o.a, o.lda, o.b, o.ldb, 0, c, o.ldc)
				for i, v := range c {
					if v != v {
						t.Fatalf("%v: β = 0: C[%d] is NaN", tc, i)
					}
				}
				a := slices.Repeat([]float32{nan}, len(o.a))
				b := slices.Repeat([]float32{nan}, len(o.b))
				BLAS32{}.Sgemm(transOf(tc.transA), transOf(tc.transB), tc.m, tc.n, tc.k, 0, a, o.lda, b, o.ldb, -1, c, o.ldc)
				for i, v := range c {
					if v != v {
						t.Fatalf("%v: α = 0: C[%d] is NaN", tc, i)
					}
				}
			}
		})
	}
}

// TestBLAS32Panics checks that bad arguments panic with gonum's messages.
func TestBLAS32Panics(t *testing.T) {
	s := make([]float32, 100)
	type args struct {
		tA, tB        blas.Transpose
		m, n, k       int
		a, b, c       []float32
		lda, ldb, ldc int
	}
	cases := []args{
		{tA: 'x', tB: blas.NoTrans, m: 2, n: 2, k: 2, a: s, b: s, c: s, lda: 2, ldb: 2, ldc: 2},
		{tA: blas.NoTrans, tB: 'y', m: 2, n: 2, k: 2, a: s, b: s, c: s, lda: 2, ldb: 2, ldc: 2},
		{tA: blas.NoTrans, tB: blas.NoTrans, m: -1, n: 2, k: 2, a: s, b: s, c: s, lda: 2, ldb: 2, ldc: 2},
		{tA: blas.NoTrans, tB: blas.NoTrans, m: 2, n: -1, k: 2, a: s, b: s, c: s, lda: 2, ldb: 2, ldc: 2},
		{tA: blas.NoTrans, tB: blas.NoTrans, m: 2, n: 2, k: -1, a: s, b: s, c: s, lda: 2, ldb: 2, ldc: 2},
		{tA: blas.NoTrans, tB: blas.NoTrans, m: 2, n: 2, k: 3, a: s, b: s, c: s, lda: 2, ldb: 2, ldc: 2},
		{tA: blas.Trans, tB: blas.NoTrans, m: 3, n: 2, k: 2, a: s, b: s, c: s, lda: 2, ldb: 2, ldc: 2},
		{tA: blas.NoTrans, tB: blas.NoTrans, m: 2, n: 3, k: 2, a: s, b: s, c: s, lda: 2, ldb: 2, ldc: 3},
		{tA: blas.NoTrans, tB: blas.Trans, m: 2, n: 2, k: 3, a: s, b: s, c: s, lda: 3, ldb: 2, ldc: 2},
		{tA: blas.NoTrans, tB: blas.NoTrans, m: 2, n: 3, k: 2, a: s, b: s, c: s, lda: 2, ldb: 3, ldc: 2},
		{tA: blas.NoTrans, tB: blas.NoTrans, m: 4, n: 2, k: 2, a: s[:7], b: s, c: s, lda: 2, ldb: 2, ldc: 2},
		{tA: blas.NoTrans, tB: blas.NoTrans, m: 2, n: 2, k: 4, a: s, b: s[:7], c: s, lda: 4, ldb: 2, ldc: 2},
		{tA: blas.NoTrans, tB: blas.NoTrans, m: 4, n: 2, k: 2, a: s, b: s, c: s[:7], lda: 2, ldb: 2, ldc: 2},
	}
	recovered := func(f func()) (r any) {
		defer func() { r = recover() }()
		f()
		return nil
	}
	for i, c := range cases {
		want := recovered(func() {
			gonum.Implementation{}.Sgemm(c.tA, c.tB, c.m, c.n, c.k, 1, c.a, c.lda, c.b, c.ldb, 0, c.c, c.ldc)
		})
		got := recovered(func() {
			BLAS32{}.Sgemm(c.tA, c.tB, c.m, c.n, c.k, 1, c.a, c.lda, c.b, c.ldb, 0, c.c, c.ldc)
		})
		if want == nil || got != want {
			t.Errorf("case %d: BLAS32 panics with %v, gonum with %v", i, got, want)
		}
	}
}

// TestBLAS32Batched checks both batched forms against one Sgemm per product,
// bit for bit, on every path.
func TestBLAS32Batched(t *testing.T) {
	for _, path := range KernelPaths() {
		t.Run(path, func(t *testing.T) {
			withKernelPath(t, path)
			for _, tc := range []gemmCase{
				{m: 5, n: 6, k: 7, alpha: 1, beta: 0.5},
				{m: 70, n: 90, k: 130, alpha: -1, beta: 0, transA: true, pad: 2},
				{m: 3, n: 40, k: 33, alpha: 2, beta: 1, transB: true},
			} {
				for _, count := range []int{0, 1, 3, 20} {
					name := fmt.Sprintf("%v/batch%d", tc, count)
					rng := rand.New(rand.NewPCG(uint64(count), 11))
					ops := make([]gemmOperands, count)
					for i := range ops {
						ops[i] = newGemmOperands(tc, rng)
					}
					tA, tB := transOf(tc.transA), transOf(tc.transB)
					want := make([][]float32, count)
					for i, o := range ops {
						want[i] = slices.Clone(o.c)
						BLAS32{Threads: 1}.Sgemm(tA, tB, tc.m, tc.n, tc.k, tc.alpha, o.a, o.lda, o.b, o.ldb, tc.beta, want[i], o.ldc)
					}
					var as, bs, cs [][]float32
					var sa, sb, sc []float32
					for _, o := range ops {
						as, bs, cs = append(as, o.a), append(bs, o.b), append(cs, slices.Clone(o.c))
						sa, sb, sc = append(sa, o.a...), append(sb, o.b...), append(sc, o.c...)
					}
					var lda, ldb, ldc, la, lb, lc int
					if count > 0 {
						lda, ldb, ldc = ops[0].lda, ops[0].ldb, ops[0].ldc
						la, lb, lc = len(ops[0].a), len(ops[0].b), len(ops[0].c)
					} else {
						o := newGemmOperands(tc, rng)
						lda, ldb, ldc = o.lda, o.ldb, o.ldc
					}
					impl := BLAS32{Threads: 2}
					impl.SgemmBatched(tA, tB, tc.m, tc.n, tc.k, tc.alpha, as, lda, bs, ldb, tc.beta, cs, ldc)
					impl.SgemmStridedBatched(tA, tB, tc.m, tc.n, tc.k, tc.alpha, sa, lda, la, sb, ldb, lb, tc.beta, sc, ldc, lc, count)
					for i := range count {
						if !slices.Equal(cs[i], want[i]) {
							t.Fatalf("%s: SgemmBatched product %d differs from Sgemm", name, i)
						}
						if !slices.Equal(sc[i*lc:(i+1)*lc], want[i]) {
							t.Fatalf("%s: SgemmStridedBatched product %d differs from Sgemm", name, i)
						}
					}
				}
			}
		})
	}
}

// TestBLAS32SharedOperand checks a stride of 0, one A shared by the batch.
func TestBLAS32SharedOperand(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	tc := gemmCase{m: 20, n: 30, k: 40, alpha: 1}
	o := newGemmOperands(tc, rng)
	const count = 4
	bs := make([]float32, 0, count*len(o.b))
	for range count {
		bs = append(bs, newGemmOperands(tc, rng).b...)
	}
	c := make([]float32, count*len(o.c))
	BLAS32{}.SgemmStridedBatched(blas.NoTrans, blas.NoTrans, tc.m, tc.n, tc.k, 1, o.a, o.lda, 0, bs, o.ldb, len(o.b), 0, c, o.ldc, len(o.c), count)
	for i := range count {
		o.b = bs[i*len(o.b) : (i+1)*len(o.b)]
		want, mag := refGemm(tc, o)
		checkGemm(t, tc, o, c[i*len(o.c):(i+1)*len(o.c)], want, mag)
	}
}
