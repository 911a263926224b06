package backend

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

var (
	unaryNames = [...]string{"Neg", "Exp", "Log", "Sqrt", "Rsqrt", "Tanh", "Sigmoid", "ReLU", "GELU", "GELUTanh",
		"Abs", "Sign", "Erf", "Reciprocal", "Square", "PowScalar", "AddScalar", "MulScalar"}
	binaryNames = [...]string{"Add", "Sub", "Mul", "Div", "Maximum", "Minimum", "Pow", "Eq", "Ne", "Lt", "Le", "Gt", "Ge",
		"ReLUGrad", "GELUGrad", "GELUTanhGrad", "TanhGrad", "SigmoidGrad"}
	reduceNames = [...]string{"Sum", "Mean", "Max", "Min", "ArgMax", "ArgMin", "Var"}
)

// String names the operation as its constant does.
func (op UnaryOp) String() string { return opName(unaryNames[:], int(op), "UnaryOp") }

// String names the operation as its constant does.
func (op BinaryOp) String() string { return opName(binaryNames[:], int(op), "BinaryOp") }

// String names the operation as its constant does.
func (op ReduceOp) String() string { return opName(reduceNames[:], int(op), "ReduceOp") }

func opName(names []string, i int, kind string) string {
	if i >= 0 && i < len(names) {
		return names[i]
	}
	return fmt.Sprintf("%s(%d)", kind, i)
}

// OpTime is what a Profiler measured of one kind of call: the backend
// method, its operation, and for matrix products, convolutions and
// reductions the operands' shapes.
type OpTime struct {
	Op    string
	Calls int64
	Time  time.Duration
}

// Profiler is a Backend that times every kernel call of the Backend it
// wraps, by kind of call. Everything else (results, errors, the optional
// fused kernels: FusedSGD, FusedAdamW, FusedBatchNormReLU) is the wrapped
// backend's. On a backend that queues its work (a GPU), set Sync so that
// each call is timed to its end; a CPU backend's calls return when
// done. Use it as the device of the tensors to profile (tensor.On, or the
// default device), then read Times.
type Profiler struct {
	inner Backend
	// Sync waits for the backend's queued work after each call.
	Sync bool

	mu    sync.Mutex
	times map[string]*OpTime
}

// NewProfiler returns a Profiler over b.
func NewProfiler(b Backend) *Profiler {
	return &Profiler{inner: b, times: map[string]*OpTime{}}
}

// Times returns what was measured since the Profiler was made or Reset,
// the longest total first.
func (p *Profiler) Times() []OpTime {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]OpTime, 0, len(p.times))
	for _, t := range p.times {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b OpTime) int {
		if c := cmp.Compare(b.Time, a.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Op, b.Op)
	})
	return out
}

// Reset forgets what was measured.
func (p *Profiler) Reset() {
	p.mu.Lock()
	p.times = map[string]*OpTime{}
	p.mu.Unlock()
}

// Wrapped returns the backend the Profiler times.
func (p *Profiler) Wrapped() Backend { return p.inner }

// time runs call, adding its duration to op's.
func (p *Profiler) time(op string, call func() error) error {
	start := time.Now()
	err := call()
	if p.Sync && err == nil {
		err = p.inner.Synchronize()
	}
	d := time.Since(start)
	p.mu.Lock()
	t := p.times[op]
	if t == nil {
		t = &OpTime{Op: op}
		p.times[op] = t
	}
	t.Calls++
	t.Time += d
	p.mu.Unlock()
	return err
}

func dims(s Shape) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return strings.Join(parts, "×")
}

func (p *Profiler) Name() string                     { return p.inner.Name() }
func (p *Profiler) Alloc(nbytes int) (Buffer, error) { return p.inner.Alloc(nbytes) }
func (p *Profiler) Free(buf Buffer)                  { p.inner.Free(buf) }
func (p *Profiler) Synchronize() error               { return p.inner.Synchronize() }

func (p *Profiler) Write(buf Buffer, off int, src []byte) error {
	return p.time("Write", func() error { return p.inner.Write(buf, off, src) })
}

func (p *Profiler) Read(dst []byte, buf Buffer, off int) error {
	return p.time("Read", func() error { return p.inner.Read(dst, buf, off) })
}

func (p *Profiler) Copy(dst, src View) error {
	return p.time("Copy", func() error { return p.inner.Copy(dst, src) })
}

func (p *Profiler) Fill(dst View, value float64) error {
	return p.time("Fill", func() error { return p.inner.Fill(dst, value) })
}

func (p *Profiler) Random(dst View, r RandomParams) error {
	return p.time("Random", func() error { return p.inner.Random(dst, r) })
}

func (p *Profiler) Unary(op UnaryOp, dst, x View, arg float64) error {
	return p.time("Unary "+op.String(), func() error { return p.inner.Unary(op, dst, x, arg) })
}

func (p *Profiler) Binary(op BinaryOp, dst, a, b View) error {
	return p.time("Binary "+op.String(), func() error { return p.inner.Binary(op, dst, a, b) })
}

func (p *Profiler) Where(dst, cond, a, b View) error {
	return p.time("Where", func() error { return p.inner.Where(dst, cond, a, b) })
}

func (p *Profiler) Reduce(op ReduceOp, dst, x View, axes []int, r ReduceParams) error {
	return p.time(fmt.Sprintf("Reduce %s %s over %v", op, dims(x.Shape), axes), func() error { return p.inner.Reduce(op, dst, x, axes, r) })
}

func (p *Profiler) MatMul(dst, a, b View, m MatMulParams) error {
	op := fmt.Sprintf("MatMul %s = %s%s · %s%s", dims(dst.Shape), dims(a.Shape), tee(m.TransA), dims(b.Shape), tee(m.TransB))
	return p.time(op, func() error { return p.inner.MatMul(dst, a, b, m) })
}

func tee(t bool) string {
	if t {
		return "ᵀ"
	}
	return ""
}

func (p *Profiler) Conv2d(dst, x, w View, c ConvParams) error {
	return p.time("Conv2d "+dims(x.Shape)+" * "+dims(w.Shape), func() error { return p.inner.Conv2d(dst, x, w, c) })
}

func (p *Profiler) Conv2dBackwardData(dx, dy, w View, c ConvParams) error {
	return p.time("Conv2dBackwardData "+dims(dx.Shape)+" * "+dims(w.Shape), func() error { return p.inner.Conv2dBackwardData(dx, dy, w, c) })
}

func (p *Profiler) Conv2dBackwardWeight(dw, x, dy View, c ConvParams) error {
	return p.time("Conv2dBackwardWeight "+dims(x.Shape)+" * "+dims(dw.Shape), func() error { return p.inner.Conv2dBackwardWeight(dw, x, dy, c) })
}

func (p *Profiler) Pool2d(op PoolOp, dst, indices, x View, pp PoolParams) error {
	return p.time("Pool2d", func() error { return p.inner.Pool2d(op, dst, indices, x, pp) })
}

func (p *Profiler) Pool2dBackward(op PoolOp, dx, dy, indices View, pp PoolParams) error {
	return p.time("Pool2dBackward", func() error { return p.inner.Pool2dBackward(op, dx, dy, indices, pp) })
}

func (p *Profiler) Softmax(dst, x View, axis int, log bool) error {
	return p.time("Softmax", func() error { return p.inner.Softmax(dst, x, axis, log) })
}

func (p *Profiler) SoftmaxBackward(dx, y, dy View, axis int, log bool) error {
	return p.time("SoftmaxBackward", func() error { return p.inner.SoftmaxBackward(dx, y, dy, axis, log) })
}

func (p *Profiler) CrossEntropy(loss, logits, target View, c CrossEntropyParams) error {
	return p.time("CrossEntropy", func() error { return p.inner.CrossEntropy(loss, logits, target, c) })
}

func (p *Profiler) CrossEntropyBackward(dlogits, logits, target, dloss View, c CrossEntropyParams) error {
	return p.time("CrossEntropyBackward", func() error { return p.inner.CrossEntropyBackward(dlogits, logits, target, dloss, c) })
}

func (p *Profiler) BatchNorm(y, saveMean, saveInvStd, x, weight, bias, runningMean, runningVar View, n NormParams) error {
	return p.time("BatchNorm", func() error {
		return p.inner.BatchNorm(y, saveMean, saveInvStd, x, weight, bias, runningMean, runningVar, n)
	})
}

func (p *Profiler) BatchNormBackward(dx, dweight, dbias, dy, x, weight, saveMean, saveInvStd View, n NormParams) error {
	return p.time("BatchNormBackward", func() error {
		return p.inner.BatchNormBackward(dx, dweight, dbias, dy, x, weight, saveMean, saveInvStd, n)
	})
}

func (p *Profiler) LayerNorm(y, mean, rstd, x, weight, bias View, normSize int, eps float64) error {
	return p.time("LayerNorm", func() error { return p.inner.LayerNorm(y, mean, rstd, x, weight, bias, normSize, eps) })
}

func (p *Profiler) LayerNormBackward(dx, dweight, dbias, dy, x, weight, mean, rstd View, normSize int) error {
	return p.time("LayerNormBackward", func() error {
		return p.inner.LayerNormBackward(dx, dweight, dbias, dy, x, weight, mean, rstd, normSize)
	})
}

func (p *Profiler) Dropout(dst, mask, x View, prob float64, seed, offset uint64) error {
	return p.time("Dropout", func() error { return p.inner.Dropout(dst, mask, x, prob, seed, offset) })
}

func (p *Profiler) Gather(dst, x, index View, axis int) error {
	return p.time("Gather", func() error { return p.inner.Gather(dst, x, index, axis) })
}

func (p *Profiler) ScatterAdd(dst, index, src View, axis int) error {
	return p.time("ScatterAdd", func() error { return p.inner.ScatterAdd(dst, index, src, axis) })
}

func (p *Profiler) IndexSelect(dst, x, index View, axis int) error {
	return p.time("IndexSelect", func() error { return p.inner.IndexSelect(dst, x, index, axis) })
}

func (p *Profiler) IndexAdd(dst, index, src View, axis int) error {
	return p.time("IndexAdd", func() error { return p.inner.IndexAdd(dst, index, src, axis) })
}

// BatchNormReLU implements FusedBatchNormReLU when the wrapped backend
// does (ErrUnimplemented otherwise, which callers take as its absence).
func (p *Profiler) BatchNormReLU(y, saveMean, saveInvStd, x, weight, bias, runningMean, runningVar View, n NormParams) error {
	f, ok := p.inner.(FusedBatchNormReLU)
	if !ok {
		return ErrUnimplemented
	}
	return p.time("BatchNormReLU", func() error {
		return f.BatchNormReLU(y, saveMean, saveInvStd, x, weight, bias, runningMean, runningVar, n)
	})
}

// BatchNormReLUBackward implements FusedBatchNormReLU; see BatchNormReLU.
func (p *Profiler) BatchNormReLUBackward(dx, dweight, dbias, dy, y, x, weight, saveMean, saveInvStd View, n NormParams) error {
	f, ok := p.inner.(FusedBatchNormReLU)
	if !ok {
		return ErrUnimplemented
	}
	return p.time("BatchNormReLUBackward", func() error {
		return f.BatchNormReLUBackward(dx, dweight, dbias, dy, y, x, weight, saveMean, saveInvStd, n)
	})
}

// SGDStep implements FusedSGD when the wrapped backend does.
func (p *Profiler) SGDStep(param, grad, buf View, s SGDParams) error {
	f, ok := p.inner.(FusedSGD)
	if !ok {
		return ErrUnimplemented
	}
	return p.time("SGDStep", func() error { return f.SGDStep(param, grad, buf, s) })
}

// AdamWStep implements FusedAdamW when the wrapped backend does.
func (p *Profiler) AdamWStep(param, grad, m, v View, a AdamWParams) error {
	f, ok := p.inner.(FusedAdamW)
	if !ok {
		return ErrUnimplemented
	}
	return p.time("AdamWStep", func() error { return f.AdamWStep(param, grad, m, v, a) })
}

var (
	_ Backend            = (*Profiler)(nil)
	_ FusedBatchNormReLU = (*Profiler)(nil)
	_ FusedSGD           = (*Profiler)(nil)
	_ FusedAdamW         = (*Profiler)(nil)
)
