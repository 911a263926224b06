package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/backend/cpu"
)

// recorder is a CPU device that records the MatMul calls and counts the
// Copy calls it runs.
type recorder struct {
	*cpu.Backend
	mu            sync.Mutex
	calls         []matmulCall
	copies        int
	allocs, frees int
}

type matmulCall struct {
	a, b backend.View
	p    backend.MatMulParams
}

func newRecorder() *recorder { return &recorder{Backend: cpu.New()} }

func (r *recorder) MatMul(dst, a, b backend.View, p backend.MatMulParams) error {
	r.mu.Lock()
	r.calls = append(r.calls, matmulCall{a, b, p})
	r.mu.Unlock()
	return r.Backend.MatMul(dst, a, b, p)
}

func (r *recorder) Alloc(nbytes int) (backend.Buffer, error) {
	r.mu.Lock()
	r.allocs++
	r.mu.Unlock()
	return r.Backend.Alloc(nbytes)
}

func (r *recorder) Free(buf backend.Buffer) {
	r.mu.Lock()
	r.frees++
	r.mu.Unlock()
	r.Backend.Free(buf)
}

func (r *recorder) Copy(dst, src backend.View) error {
	r.mu.Lock()
	r.copies++
	r.mu.Unlock()
	return r.Backend.Copy(dst, src)
}

// randTensor returns a tensor of shape with values in [-1, 1) and those
// values as float64s.
func randTensor(rng *rand.Rand, dt DType, shape Shape, opts ...Option) (*Tensor, []float64) {
	vals := make([]float64, shape.NumElements())
	for i := range vals {
		vals[i] = 2*rng.Float64() - 1
		if dt == Float32 {
			vals[i] = float64(float32(vals[i]))
		}
	}
	return FromSlice(vals, shape, append([]Option{Of(dt)}, opts...)...), vals
}

// refMatMul is torch.matmul on row-major float64 data, written with explicit
// promotion and broadcasting.
func refMatMul(a []float64, as Shape, b []float64, bs Shape) ([]float64, Shape) {
	pa, pb := as.Clone(), bs.Clone()
	if len(pa) == 1 {
		pa = Shape{1, pa[0]}
	}
	if len(pb) == 1 {
		pb = Shape{pb[0], 1}
	}
	m, k, n := pa[len(pa)-2], pa[len(pa)-1], pb[len(pb)-1]
	batch, err := backend.BroadcastShapes(pa[:len(pa)-2], pb[:len(pb)-2])
	if err != nil {
		panic(err)
	}
	// offset of batch index bi in an operand with batch shape bsh
	boff := func(bi []int, bsh Shape, size int) int {
		off, acc := 0, size
		for d := len(bsh) - 1; d >= 0; d-- {
			x := bi[len(bi)-len(bsh)+d]
			if bsh[d] == 1 {
				x = 0
			}
			off += x * acc
			acc *= bsh[d]
		}
		return off
	}
	nb := batch.NumElements()
	out := make([]float64, nb*m*n)
	bi := make([]int, len(batch))
	for t := 0; t < nb; t++ {
		ao := boff(bi, pa[:len(pa)-2], m*k)
		bo := boff(bi, pb[:len(pb)-2], k*n)
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var s float64
				for l := 0; l < k; l++ {
					s += a[ao+i*k+l] * b[bo+l*n+j]
				}
				out[(t*m+i)*n+j] = s
			}
		}
		for d := len(bi) - 1; d >= 0; d-- {
			if bi[d]++; bi[d] < batch[d] {
				break
			}
			bi[d] = 0
		}
	}
	// The promoted axes are removed: M when a was a vector, N when b was.
	var shape Shape = append(Shape{}, batch...)
	if len(as) > 1 {
		shape = append(shape, m)
	}
	if len(bs) > 1 {
		shape = append(shape, n)
	}
	return out, shape
}

func closeTo(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > tol*(1+math.Abs(want[i])) {
			t.Fatalf("%s: element %d = %v, want %v", what, i, got[i], want[i])
		}
	}
}

func tolOf(dt DType) float64 {
	if dt == Float32 {
		return 1e-5
	}
	return 1e-12
}

func TestMatMulShapes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		a, b, want Shape
	}{
		{Shape{3}, Shape{3}, Shape{}},
		{Shape{2, 3}, Shape{3}, Shape{2}},
		{Shape{3}, Shape{3, 4}, Shape{4}},
		{Shape{2, 3}, Shape{3, 4}, Shape{2, 4}},
		{Shape{5, 2, 3}, Shape{3}, Shape{5, 2}},
		{Shape{3}, Shape{5, 3, 4}, Shape{5, 4}},
		{Shape{5, 2, 3}, Shape{3, 4}, Shape{5, 2, 4}},
		{Shape{2, 3}, Shape{5, 3, 4}, Shape{5, 2, 4}},
		{Shape{2, 1, 2, 3}, Shape{4, 3, 5}, Shape{2, 4, 2, 5}},
		{Shape{1, 2, 3}, Shape{6, 3, 1}, Shape{6, 2, 1}},
		{Shape{0, 2, 3}, Shape{3, 4}, Shape{0, 2, 4}},
		{Shape{2, 0}, Shape{0, 3}, Shape{2, 3}},
		{Shape{0}, Shape{0}, Shape{}},
		{Shape{1, 1}, Shape{1, 1}, Shape{1, 1}},
		{Shape{70, 33}, Shape{33, 129}, Shape{70, 129}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range []DType{Float32, Float64} {
		for _, c := range cases {
			a, av := randTensor(rng, dt, c.a)
			b, bv := randTensor(rng, dt, c.b)
			got := MatMul(a, b)
			want, ws := refMatMul(av, c.a, bv, c.b)
			name := fmt.Sprintf("%v %v·%v", dt, c.a, c.b)
			if !got.Shape().Equal(c.want) || !ws.Equal(c.want) {
				t.Errorf("%s: shape %v (reference %v), want %v", name, got.Shape(), ws, c.want)
			} else {
				closeTo(t, name, got.Float64s(), want, tolOf(dt)*float64(c.a[len(c.a)-1]+1))
			}
			if got.DType() != dt {
				t.Errorf("%s: dtype %v", name, got.DType())
			}
			for _, x := range []*Tensor{a, b, got} {
				x.Release()
			}
		}
	}
}

// TestMatMulTransposedViews checks that transposed operands reach the
// kernel as flags over the original memory, and that other layouts are
// copied and still give the right product.
func TestMatMulTransposedViews(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	dev := newRecorder()
	// base [K, M] and [N, K]: a = baseAᵀ [M, K], b = baseBᵀ [K, N].
	baseA, av := randTensor(rng, Float64, Shape{4, 3}, On(dev))
	defer baseA.Release()
	baseB, bv := randTensor(rng, Float64, Shape{5, 4}, On(dev))
	defer baseB.Release()
	a, b := baseA.T(), baseB.T()
	defer a.Release()
	defer b.Release()
	dev.copies = 0
	got := MatMul(a, b)
	defer got.Release()
	if dev.copies != 0 {
		t.Errorf("MatMul of transposed views made %d copies", dev.copies)
	}
	if len(dev.calls) != 1 {
		t.Fatalf("%d MatMul calls, want 1", len(dev.calls))
	}
	call := dev.calls[0]
	if !call.p.TransA || !call.p.TransB {
		t.Errorf("flags %+v, want TransA and TransB", call.p)
	}
	if call.a.Buf != baseA.Raw().Buf || call.b.Buf != baseB.Raw().Buf {
		t.Errorf("the kernel did not get the operands' own buffers")
	}
	ta := transpose(av, 4, 3)
	tb := transpose(bv, 5, 4)
	want, _ := refMatMul(ta, Shape{3, 4}, tb, Shape{4, 5})
	closeTo(t, "aᵀ·bᵀ", got.Float64s(), want, 1e-12)

	// A batched transpose over a broadcast batch.
	base3, v3 := randTensor(rng, Float64, Shape{2, 4, 3}, On(dev))
	defer base3.Release()
	a3 := base3.Transpose(-1, -2) // [2, 3, 4]
	defer a3.Release()
	dev.calls, dev.copies = nil, 0
	got3 := MatMul(a3, b)
	defer got3.Release()
	if dev.copies != 0 || len(dev.calls) != 1 || !dev.calls[0].p.TransA || !dev.calls[0].p.TransB {
		t.Errorf("batched transposed views: %d copies, calls %+v", dev.copies, dev.calls)
	}
	var ta3 []float64
	for i := range 2 {
		ta3 = append(ta3, transpose(v3[i*12:(i+1)*12], 4, 3)...)
	}
	want3, _ := refMatMul(ta3, Shape{2, 3, 4}, tb, Shape{4, 5})
	closeTo(t, "batched aᵀ·bᵀ", got3.Float64s(), want3, 1e-12)

	// Every other column: rows not contiguous, so a copy.
	wide, wv := randTensor(rng, Float64, Shape{3, 8}, On(dev))
	defer wide.Release()
	strided := wide.SliceStep(1, 0, 8, 2) // [3, 4]
	defer strided.Release()
	dev.calls, dev.copies = nil, 0
	gotS := MatMul(strided, b)
	defer gotS.Release()
	if dev.copies == 0 {
		t.Errorf("a column-strided operand reached the kernel without a copy")
	}
	var sv []float64
	for i := range 3 {
		for j := 0; j < 8; j += 2 {
			sv = append(sv, wv[i*8+j])
		}
	}
	wantS, _ := refMatMul(sv, Shape{3, 4}, tb, Shape{4, 5})
	closeTo(t, "strided·bᵀ", gotS.Float64s(), wantS, 1e-12)
}

func transpose(v []float64, rows, cols int) []float64 {
	out := make([]float64, len(v))
	for i := range rows {
		for j := range cols {
			out[j*rows+i] = v[i*cols+j]
		}
	}
	return out
}

func TestMatMulTrans(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
		// op(a) [2, 3, 4], op(b) [4, 5] stored as given by the flags.
		as, bs := Shape{2, 3, 4}, Shape{4, 5}
		if tr[0] {
			as = Shape{2, 4, 3}
		}
		if tr[1] {
			bs = Shape{5, 4}
		}
		a, av := randTensor(rng, Float64, as)
		b, bv := randTensor(rng, Float64, bs)
		got := MatMulTrans(a, b, tr[0], tr[1])
		oa, ob := av, bv
		if tr[0] {
			oa = nil
			for i := range 2 {
				oa = append(oa, transpose(av[i*12:(i+1)*12], 4, 3)...)
			}
		}
		if tr[1] {
			ob = transpose(bv, 5, 4)
		}
		want, ws := refMatMul(oa, Shape{2, 3, 4}, ob, Shape{4, 5})
		if !got.Shape().Equal(ws) {
			t.Errorf("trans %v: shape %v, want %v", tr, got.Shape(), ws)
		} else {
			closeTo(t, fmt.Sprintf("trans %v", tr), got.Float64s(), want, 1e-12)
		}
		a.Release()
		b.Release()
		got.Release()
	}
}

func TestLinear(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 8))
	cases := []struct {
		x    Shape
		bias bool
	}{
		{Shape{4}, true},
		{Shape{3, 4}, false},
		{Shape{2, 3, 4}, true},
		{Shape{0, 4}, true},
	}
	for _, dt := range []DType{Float32, Float64} {
		for _, c := range cases {
			x, xv := randTensor(rng, dt, c.x)
			w, wv := randTensor(rng, dt, Shape{5, 4})
			var bias *Tensor
			var bv []float64
			if c.bias {
				bias, bv = randTensor(rng, dt, Shape{5})
			}
			got := Linear(x, w, bias)
			rows := c.x.NumElements() / 4
			want := make([]float64, rows*5)
			for r := range rows {
				for o := range 5 {
					s := 0.0
					if c.bias {
						s = bv[o]
					}
					for i := range 4 {
						s += xv[r*4+i] * wv[o*4+i]
					}
					want[r*5+o] = s
				}
			}
			ws := append(c.x[:len(c.x)-1].Clone(), 5)
			name := fmt.Sprintf("%v x%v bias %v", dt, c.x, c.bias)
			if !got.Shape().Equal(ws) {
				t.Errorf("%s: shape %v, want %v", name, got.Shape(), ws)
			} else {
				closeTo(t, name, got.Float64s(), want, tolOf(dt)*8)
			}
			for _, u := range []*Tensor{x, w, bias, got} {
				u.Release()
			}
		}
	}
}

// mustPanic runs fn and checks that it panics with a message containing
// every one of parts.
func mustPanic(t *testing.T, name string, fn func(), parts ...string) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Errorf("%s: no panic", name)
			return
		}
		msg := fmt.Sprint(r)
		for _, p := range parts {
			if !strings.Contains(msg, p) {
				t.Errorf("%s: panic %q does not mention %q", name, msg, p)
			}
		}
	}()
	fn()
}

func TestMatMulPanics(t *testing.T) {
	t.Parallel()
	z := func(s ...int) *Tensor { return Zeros(Shape(s)) }
	cases := []struct {
		name  string
		fn    func()
		parts []string
	}{
		{"inner", func() { MatMul(z(2, 3), z(4, 5)) }, []string{"MatMul", "[2 3]", "[4 5]", "transpose"}},
		{"vector", func() { MatMul(z(3), z(4)) }, []string{"MatMul", "[3]", "[4]"}},
		{"batch", func() { MatMul(z(2, 2, 3), z(3, 3, 4)) }, []string{"MatMul", "[2 2 3]", "[3 3 4]", "broadcast"}},
		{"scalar", func() { MatMul(z(), z(3)) }, []string{"MatMul", "at least one axis"}},
		{"dtype", func() { MatMul(z(2, 3), Zeros(Shape{3, 2}, Of(Float64))) }, []string{"MatMul", "Cast"}},
		{"int", func() { MatMul(Zeros(Shape{2, 2}, Of(Int32)), Zeros(Shape{2, 2}, Of(Int32))) }, []string{"MatMul", "float"}},
		{"trans rank", func() { MatMulTrans(z(3), z(3, 3), false, false) }, []string{"MatMulTrans", "two axes"}},
		{"trans inner", func() { MatMulTrans(z(2, 3), z(2, 3), false, false) }, []string{"MatMulTrans", "[2 3]", "flags"}},
		{"linear in", func() { Linear(z(2, 3), z(4, 5), nil) }, []string{"Linear", "[2 3]", "[4 5]"}},
		{"linear bias", func() { Linear(z(2, 5), z(4, 5), z(5)) }, []string{"Linear", "bias", "[4]"}},
	}
	for _, c := range cases {
		mustPanic(t, c.name, c.fn, c.parts...)
	}
}

// TestNoLeakedTemporaries checks that every buffer the functions allocate
// is freed once the caller releases the inputs and the results.
func TestNoLeakedTemporaries(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(11, 12))
	dev := newRecorder()
	run := func(name string, shapes []Shape, fn func(in []*Tensor) []*Tensor) {
		dev.allocs, dev.frees = 0, 0
		var in []*Tensor
		for _, s := range shapes {
			x, _ := randTensor(rng, Float64, s, On(dev))
			in = append(in, x)
		}
		for _, u := range fn(in) {
			u.Release()
		}
		for _, x := range in {
			x.Release()
		}
		if dev.allocs != dev.frees {
			t.Errorf("%s: %d buffers allocated, %d freed", name, dev.allocs, dev.frees)
		}
	}
	one := func(u *Tensor) []*Tensor { return []*Tensor{u} }
	run("MatMul vector·vector", []Shape{{4}, {4}}, func(in []*Tensor) []*Tensor { return one(MatMul(in[0], in[1])) })
	run("MatMul vector·batch", []Shape{{4}, {2, 4, 3}}, func(in []*Tensor) []*Tensor { return one(MatMul(in[0], in[1])) })
	run("MatMul batch·vector", []Shape{{2, 3, 4}, {4}}, func(in []*Tensor) []*Tensor { return one(MatMul(in[0], in[1])) })
	run("MatMul folded batch", []Shape{{2, 3, 4}, {4, 5}}, func(in []*Tensor) []*Tensor { return one(MatMul(in[0], in[1])) })
	run("MatMul strided", []Shape{{3, 8}, {4, 2}}, func(in []*Tensor) []*Tensor {
		s := in[0].SliceStep(1, 0, 8, 2)
		defer s.Release()
		return one(MatMul(s, in[1]))
	})
	run("MatMulTrans", []Shape{{2, 4, 3}, {5, 4}}, func(in []*Tensor) []*Tensor { return one(MatMulTrans(in[0], in[1], true, true)) })
	run("Linear", []Shape{{2, 3, 4}, {5, 4}, {5}}, func(in []*Tensor) []*Tensor { return one(Linear(in[0], in[1], in[2])) })
	p := ConvParams{PadH: 1, PadW: 1}
	run("Conv2d", []Shape{{1, 2, 5, 5}, {3, 2, 3, 3}, {1, 3, 5, 5}}, func(in []*Tensor) []*Tensor {
		xt := in[0].Transpose(2, 3)
		defer xt.Release()
		return []*Tensor{Conv2d(xt, in[1], p), Conv2dBackwardData(in[2], in[1], in[0].Shape(), p),
			Conv2dBackwardWeight(in[0], in[2], in[1].Shape(), p)}
	})
	pp := PoolParams{KernelH: 2, KernelW: 2}
	run("pooling", []Shape{{1, 2, 4, 4}, {1, 2, 2, 2}}, func(in []*Tensor) []*Tensor {
		y, idx := MaxPool2d(in[0], pp)
		return []*Tensor{y, idx, MaxPool2dBackward(in[1], idx, in[0].Shape(), pp),
			AvgPool2d(in[0], pp), AvgPool2dBackward(in[1], in[0].Shape(), pp)}
	})
}
