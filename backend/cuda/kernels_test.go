package cuda

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/flockml/flock/backend"
)

func dtypeNamed(t *testing.T, name string) backend.DType {
	t.Helper()
	dt, err := backend.ParseDType(name)
	if err != nil {
		t.Fatal(err)
	}
	return dt
}

// exercise calls every kernel of the backend with representative operands:
// strided and contiguous views, every dtype a kernel takes, optional
// operands present and absent. It returns the first error.
func exercise(b *Backend) error {
	var err error
	alloc := func(dt backend.DType, shape ...int) backend.View {
		s := backend.Shape(shape)
		buf, e := b.Alloc(max(s.NumElements(), 1) * dt.Size())
		if e != nil && err == nil {
			err = e
		}
		return backend.Contiguous(buf, dt, s)
	}
	transposed := func(v backend.View) backend.View {
		r := len(v.Shape)
		v.Shape = v.Shape.Clone()
		v.Strides = append([]int(nil), v.Strides...)
		v.Shape[r-1], v.Shape[r-2] = v.Shape[r-2], v.Shape[r-1]
		v.Strides[r-1], v.Strides[r-2] = v.Strides[r-2], v.Strides[r-1]
		return v
	}
	do := func(what string, e error) {
		if e != nil && err == nil {
			err = fmt.Errorf("%s: %w", what, e)
		}
	}
	all := []backend.DType{backend.Float32, backend.Float64, backend.Float16, backend.BFloat16, backend.Int32, backend.Int64, backend.Uint8, backend.Bool}
	for _, from := range all {
		for _, to := range all {
			do("copy", b.Copy(transposed(alloc(to, 5, 3)), alloc(from, 3, 5)))
		}
		do("fill", b.Fill(transposed(alloc(from, 4, 6)), 1))
		do("where", b.Where(alloc(from, 2, 3), alloc(backend.Bool, 2, 3), alloc(from, 2, 3), transposed(alloc(from, 3, 2))))
		for _, it := range []backend.DType{backend.Int32, backend.Int64} {
			do("gather", b.Gather(alloc(from, 4, 2), alloc(from, 4, 5), alloc(it, 4, 2), 1))
			if from == backend.Int32 || from == backend.Int64 {
				do("scatter", b.ScatterAdd(alloc(from, 4, 5), alloc(it, 4, 2), alloc(from, 4, 2), 1))
			}
		}
	}
	do("copy contiguous", b.Copy(alloc(backend.Float32, 7), alloc(backend.Float32, 7)))
	for _, dt := range []backend.DType{backend.Float32, backend.Float64, backend.Int32, backend.Int64} {
		do("unary", b.Unary(backend.Neg, alloc(dt, 3, 4), transposed(alloc(dt, 4, 3)), 0))
		x := alloc(dt, 4, 5)
		y := alloc(dt, 1, 5)
		y.Shape, y.Strides = backend.Shape{4, 5}, []int{0, 1}
		do("binary", b.Binary(backend.Add, alloc(dt, 4, 5), x, y))
		do("compare", b.Binary(backend.Lt, alloc(backend.Bool, 4, 5), x, y))
	}
	for _, dt := range []backend.DType{backend.Float32, backend.Float64} {
		do("unary gelu", b.Unary(backend.GELU, alloc(dt, 1000), alloc(dt, 1000), 0))
		x := alloc(dt, 3, 257, 129)
		do("reduce sum", b.Reduce(backend.Sum, alloc(dt, 3, 129), x, []int{1}, backend.ReduceParams{}))
		do("reduce thread", b.Reduce(backend.Max, alloc(dt, 257, 129), x, []int{0}, backend.ReduceParams{}))
		do("reduce all", b.Reduce(backend.Var, alloc(dt), x, []int{0, 1, 2}, backend.ReduceParams{Correction: 1}))
		do("argmax", b.Reduce(backend.ArgMax, alloc(backend.Int64, 3, 257), x, []int{2}, backend.ReduceParams{}))
		do("matmul", b.MatMul(alloc(dt, 2, 5, 7), alloc(dt, 2, 5, 3), alloc(dt, 2, 7, 3), backend.MatMulParams{Alpha: 1, TransB: true}))
		conv := backend.ConvParams{StrideH: 2, StrideW: 1, PadH: 1, PadW: 1, DilationH: 1, DilationW: 2, Groups: 2}
		cx, cw, cy := alloc(dt, 2, 4, 9, 8), alloc(dt, 6, 2, 3, 3), alloc(dt, 2, 6, 5, 6)
		do("conv", b.Conv2d(cy, cx, cw, conv))
		do("conv data", b.Conv2dBackwardData(cx, cy, cw, conv))
		do("conv weight", b.Conv2dBackwardWeight(cw, cx, cy, conv))
		pool := backend.PoolParams{KernelH: 3, KernelW: 3, StrideH: 2, StrideW: 2, PadH: 1, PadW: 1, DilationH: 1, DilationW: 1}
		px, py := alloc(dt, 2, 3, 8, 8), alloc(dt, 2, 3, 4, 4)
		idx := alloc(backend.Int64, 2, 3, 4, 4)
		do("max pool", b.Pool2d(backend.MaxPool, py, idx, px, pool))
		do("max pool back", b.Pool2dBackward(backend.MaxPool, px, py, idx, pool))
		do("avg pool", b.Pool2d(backend.AvgPool, py, backend.View{}, px, pool))
		do("avg pool back", b.Pool2dBackward(backend.AvgPool, px, py, backend.View{}, pool))
		sx := alloc(dt, 4, 10)
		do("softmax rows", b.Softmax(alloc(dt, 4, 10), sx, 1, false))
		do("softmax cols", b.Softmax(alloc(dt, 4, 10), sx, 0, true))
		do("softmax back rows", b.SoftmaxBackward(alloc(dt, 4, 10), sx, sx, 1, true))
		do("softmax back cols", b.SoftmaxBackward(alloc(dt, 4, 10), sx, sx, 0, false))
		for _, it := range []backend.DType{backend.Int32, backend.Int64} {
			tgt := alloc(it, 4)
			ce := backend.CrossEntropyParams{LabelSmoothing: 0.1, IgnoreIndex: -100}
			do("xent", b.CrossEntropy(alloc(dt, 4), sx, tgt, ce))
			dl := alloc(dt, 1)
			dl.Shape, dl.Strides = backend.Shape{4}, []int{0}
			do("xent back", b.CrossEntropyBackward(alloc(dt, 4, 10), sx, tgt, dl, ce))
			gi := alloc(it, 4, 3)
			do("gather", b.Gather(alloc(dt, 4, 3), sx, gi, 1))
			do("scatter", b.ScatterAdd(alloc(dt, 4, 10), gi, alloc(dt, 4, 3), 1))
			vi := alloc(it, 6)
			do("index select", b.IndexSelect(alloc(dt, 6, 10), sx, vi, 0))
			do("index add", b.IndexAdd(alloc(dt, 4, 10), vi, alloc(dt, 6, 10), 0))
		}
		bx := alloc(dt, 4, 3, 5, 5)
		ch := func() backend.View { return alloc(dt, 3) }
		np := backend.NormParams{Eps: 1e-5, Momentum: 0.1, Training: true}
		do("batch norm", b.BatchNorm(alloc(dt, 4, 3, 5, 5), ch(), ch(), bx, ch(), ch(), ch(), ch(), np))
		do("batch norm back", b.BatchNormBackward(alloc(dt, 4, 3, 5, 5), ch(), ch(), bx, bx, ch(), ch(), ch(), np))
		do("batch norm relu", b.BatchNormReLU(alloc(dt, 4, 3, 5, 5), ch(), ch(), bx, ch(), ch(), ch(), ch(), np))
		do("batch norm relu back", b.BatchNormReLUBackward(alloc(dt, 4, 3, 5, 5), ch(), ch(), bx, bx, bx, ch(), ch(), ch(), np))
		for op := backend.ReLUGrad; op <= backend.SigmoidGrad; op++ {
			do(fmt.Sprintf("activation grad %d", op), b.Binary(op, alloc(dt, 4, 3), alloc(dt, 4, 3), alloc(dt, 4, 3)))
		}
		np.Training = false
		do("batch norm eval", b.BatchNorm(alloc(dt, 4, 3, 5, 5), backend.View{}, backend.View{}, bx, backend.View{}, backend.View{}, ch(), ch(), np))
		lx := alloc(dt, 6, 7)
		do("layer norm", b.LayerNorm(alloc(dt, 6, 7), alloc(dt, 6), alloc(dt, 6), lx, alloc(dt, 7), alloc(dt, 7), 7, 1e-5))
		do("layer norm back", b.LayerNormBackward(alloc(dt, 6, 7), alloc(dt, 7), alloc(dt, 7), lx, lx, alloc(dt, 7), alloc(dt, 6), alloc(dt, 6), 7))
		do("random", b.Random(alloc(dt, 33), backend.RandomParams{Kind: backend.Normal, B: 1, Seed: 3}))
		do("dropout", b.Dropout(alloc(dt, 33), alloc(backend.Bool, 33), alloc(dt, 33), 0.5, 1, 2))
		do("sgd", b.SGDStep(alloc(dt, 9), alloc(dt, 9), alloc(dt, 9), SGDParams{LR: 0.1, Momentum: 0.9}))
		do("adamw", b.AdamWStep(alloc(dt, 9), alloc(dt, 9), alloc(dt, 9), alloc(dt, 9), AdamWParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: 1}))
	}
	return err
}

// TestKernelLaunches runs every kernel's host side on the fake device: the
// arguments pass validation, layouts merge, and each launch names a kernel
// of the embedded sources with a well-formed argument buffer.
func TestKernelLaunches(t *testing.T) {
	t.Parallel()
	b, f := newFakeBackend()
	if err := exercise(b); err != nil {
		t.Fatal(err)
	}
	launches := f.takeLaunches()
	names := map[string]bool{}
	for _, l := range launches {
		names[l.name] = true
		if l.grid <= 0 {
			t.Errorf("%s launched on %d blocks", l.name, l.grid)
		}
		if len(l.args)%8 != 0 && len(l.args)%4 != 0 {
			t.Errorf("%s: argument buffer of %d bytes", l.name, len(l.args))
		}
		found := false
		for _, m := range Modules() {
			if m == l.module {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: module %s is not embedded", l.name, l.module)
		}
	}
	for _, want := range []string{"copy_f16_f32", "copy_b8_bf16", "fill_bf16", "where_u8", "unary_i64", "binary_f32",
		"compare_i32", "reduce_block_f64", "reduce_final_f32", "reduce_thread_f32", "gemm_f64", "im2col_f32", "col2im_f64",
		"pool_max_back_f32", "softmax_cols_f64", "xent_back_f32_i64", "gather_f32_i32", "scatter_add_f64_i64",
		"index_check_i32", "bn_finish_f32", "bn_back_dx_f64", "unary_f32", "bn_eval_stats_f64", "ln_back_wb_final_f32", "random_f64", "dropout_f32",
		"sgd_f32", "adamw_f64"} {
		if !names[want] {
			t.Errorf("no launch of %s", want)
		}
	}
	// The copy between equal dtypes of contiguous views is a plain device
	// copy, not a kernel.
	x, _ := b.Alloc(64)
	y, _ := b.Alloc(64)
	if err := b.Copy(backend.Contiguous(y, backend.Float32, backend.Shape{16}), backend.Contiguous(x, backend.Float32, backend.Shape{16})); err != nil {
		t.Fatal(err)
	}
	if l := f.takeLaunches(); len(l) != 0 {
		t.Errorf("contiguous copy launched %s", l[0].name)
	}
}

// TestKernelArgumentErrors checks that bad arguments are refused on the host,
// before anything reaches the device.
func TestKernelArgumentErrors(t *testing.T) {
	t.Parallel()
	b, f := newFakeBackend()
	v := func(dt backend.DType, shape ...int) backend.View {
		buf, _ := b.Alloc(backend.Shape(shape).NumElements() * dt.Size())
		return backend.Contiguous(buf, dt, shape)
	}
	transposed := func(x backend.View) backend.View {
		x.Shape = backend.Shape{x.Shape[1], x.Shape[0]}
		x.Strides = []int{x.Strides[1], x.Strides[0]}
		return x
	}
	broadcastBatch := func(x backend.View, n int) backend.View {
		x.Shape = append(backend.Shape{n}, x.Shape[1:]...)
		x.Strides = append([]int{0}, x.Strides[1:]...)
		return x
	}
	over := v(backend.Float32, 4)
	over.Shape = backend.Shape{5}
	over.Strides = []int{1}
	cases := map[string]error{
		"overrun":       b.Unary(backend.Exp, over, over, 0),
		"shape":         b.Binary(backend.Add, v(backend.Float32, 3), v(backend.Float32, 3), v(backend.Float32, 4)),
		"int div":       b.Binary(backend.Div, v(backend.Int32, 3), v(backend.Int32, 3), v(backend.Int32, 3)),
		"random int":    b.Random(v(backend.Int32, 4), backend.RandomParams{B: 1}),
		"dropout p":     b.Dropout(v(backend.Float32, 4), v(backend.Bool, 4), v(backend.Float32, 4), 1.5, 0, 0),
		"reduce axes":   b.Reduce(backend.Sum, v(backend.Float32, 3), v(backend.Float32, 3, 4), []int{1, 1}, backend.ReduceParams{}),
		"argmax axes":   b.Reduce(backend.ArgMax, v(backend.Int64), v(backend.Float32, 3, 4), []int{0, 1}, backend.ReduceParams{}),
		"empty max":     b.Reduce(backend.Max, v(backend.Float32, 3), v(backend.Float32, 3, 0), []int{1}, backend.ReduceParams{}),
		"matmul shapes": b.MatMul(v(backend.Float32, 2, 2), v(backend.Float32, 2, 3), v(backend.Float32, 2, 2), backend.MatMulParams{Alpha: 1}),
		// A transposed view is TransA's job; the CPU backend refuses it too.
		"matmul transposed inner axis": b.MatMul(v(backend.Float32, 2, 3), transposed(v(backend.Float32, 4, 2)), v(backend.Float32, 4, 3), backend.MatMulParams{Alpha: 1}),
		"matmul transposed b":          b.MatMul(v(backend.Float32, 2, 3), v(backend.Float32, 2, 4), transposed(v(backend.Float32, 3, 4)), backend.MatMulParams{Alpha: 1}),
		"matmul broadcast dst":         b.MatMul(broadcastBatch(v(backend.Float32, 1, 2, 3), 4), v(backend.Float32, 4, 2, 4), v(backend.Float32, 4, 4, 3), backend.MatMulParams{Alpha: 1}),
		"pool padding":                 b.Pool2d(backend.AvgPool, v(backend.Float32, 1, 1, 2, 2), backend.View{}, v(backend.Float32, 1, 1, 4, 4), backend.PoolParams{KernelH: 2, KernelW: 2, StrideH: 2, StrideW: 2, PadH: 2, DilationH: 1, DilationW: 1}),
		"conv groups":                  b.Conv2d(v(backend.Float32, 1, 3, 2, 2), v(backend.Float32, 1, 3, 2, 2), v(backend.Float32, 3, 3, 1, 1), backend.ConvParams{StrideH: 1, StrideW: 1, DilationH: 1, DilationW: 1, Groups: 2}),
		"xent target type":             b.CrossEntropy(v(backend.Float32, 2), v(backend.Float32, 2, 3), v(backend.Float32, 2), backend.CrossEntropyParams{}),
		"bn eval":                      b.BatchNorm(v(backend.Float32, 2, 3), backend.View{}, backend.View{}, v(backend.Float32, 2, 3), backend.View{}, backend.View{}, backend.View{}, backend.View{}, backend.NormParams{}),
		"bn relu back without y":       b.BatchNormReLUBackward(v(backend.Float32, 2, 3), backend.View{}, backend.View{}, v(backend.Float32, 2, 3), backend.View{}, v(backend.Float32, 2, 3), backend.View{}, v(backend.Float32, 3), v(backend.Float32, 3), backend.NormParams{Training: true}),
		"int activation grad":          b.Binary(backend.ReLUGrad, v(backend.Int32, 3), v(backend.Int32, 3), v(backend.Int32, 3)),
		"scatter bcast":                b.ScatterAdd(backend.View{Buf: over.Buf, DType: backend.Float32, Shape: backend.Shape{4}, Strides: []int{0}}, v(backend.Int64, 4), v(backend.Float32, 4), 0),
	}
	for name, err := range cases {
		if err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.HasPrefix(err.Error(), "cuda: ") {
			t.Errorf("%s: error %q does not name the package", name, err)
		}
	}
	if l := f.takeLaunches(); len(l) != 0 {
		t.Errorf("a refused call launched %s", l[0].name)
	}
}

// TestKernelReportsBadIndex checks the path of a kernel-detected error: the
// position the device reports is turned into the CPU backend's message.
func TestKernelReportsBadIndex(t *testing.T) {
	t.Parallel()
	b, f := newFakeBackend()
	idx, _ := b.Alloc(3 * 8)
	if err := b.Write(idx, 0, []byte{1, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	index := backend.Contiguous(idx, backend.Int64, backend.Shape{3})
	// The fake runs no kernel: play the device, which reports position 1.
	err := b.checkIndex("index_select", index, 0, 4)
	if err != nil {
		t.Fatalf("no position reported, yet %v", err)
	}
	word := b.errBuf.blk.ptr
	f2 := &reportingEngine{fakeEngine: f, word: word, pos: 1}
	b.eng = f2
	err = b.checkIndex("index_select", index, 0, 4)
	if err == nil || err.Error() != "cuda: index_select: index 9 at position [1] out of range [0, 4) for axis 0" {
		t.Errorf("error %v", err)
	}
}

// reportingEngine is a fake device whose kernels report a bad position in
// the error word.
type reportingEngine struct {
	*fakeEngine
	word uintptr
	pos  int64
}

func (r *reportingEngine) launch(module, name string, grid, block, shmem int, a *Args) error {
	if err := r.fakeEngine.launch(module, name, grid, block, shmem, a); err != nil {
		return err
	}
	var w [8]byte
	for i := range w {
		w[i] = byte(r.pos >> (8 * i))
	}
	return r.fakeEngine.upload(r.word, w[:])
}

// ptxEntry is a kernel of a PTX module with the size and alignment of each
// parameter.
type ptxEntry struct {
	params []Param
}

// size is the size of the entry's parameter space: the end of its last
// parameter.
func (e ptxEntry) size() int {
	if len(e.params) == 0 {
		return 0
	}
	p := e.params[len(e.params)-1]
	return p.Offset + p.Size
}

var (
	clangOnce sync.Once
	clangPTX  map[string]ptxEntry
	clangErr  error
)

// compileWithClang compiles every kernel file with clang's CUDA front end
// (when installed) and returns the entries of the PTX. clang checks the
// sources' syntax and types and lays out the parameters as nvcc and NVRTC
// do; the PTX itself is not what the backend loads.
func compileWithClang(t *testing.T) map[string]ptxEntry {
	t.Helper()
	clangOnce.Do(func() {
		var clang string
		for _, c := range []string{os.Getenv("FLOCK_CLANG"), "clang", "clang-14", "clang-15", "clang-16", "clang-17", "clang-18"} {
			if c == "" {
				continue
			}
			if p, err := exec.LookPath(c); err == nil {
				clang = p
				break
			}
		}
		if clang == "" {
			clangErr = errors.New("no clang on PATH (set FLOCK_CLANG)")
			return
		}
		dir, err := os.MkdirTemp("", "flock-ptx")
		if err != nil {
			clangErr = err
			return
		}
		defer os.RemoveAll(dir)
		clangPTX = map[string]ptxEntry{}
		for _, m := range Modules() {
			out := filepath.Join(dir, m+".ptx")
			cmd := exec.Command(clang, "-x", "cuda", "--cuda-device-only", "--cuda-gpu-arch=sm_80", "-nocudainc", "-nocudalib",
				"-Xclang", "-target-feature", "-Xclang", "+ptx70", "-include", "testdata/clang_prelude.h",
				"-O1", "-S", "-o", out, filepath.Join("kernels", m+".cu"))
			msg, err := cmd.CombinedOutput()
			if err != nil {
				if bytes.Contains(msg, []byte("unknown target")) || bytes.Contains(msg, []byte("nvptx")) && !bytes.Contains(msg, []byte("error:")) {
					clangErr = fmt.Errorf("%s cannot target NVPTX: %s", clang, msg)
					return
				}
				clangErr = fmt.Errorf("compile kernels/%s.cu with %s: %v\n%s", m, clang, err, msg)
				clangPTX = nil
				return
			}
			ptx, err := os.ReadFile(out)
			if err != nil {
				clangErr = err
				return
			}
			for name, e := range parsePTX(ptx) {
				clangPTX[name] = e
			}
		}
	})
	if clangPTX == nil {
		if clangErr != nil && strings.HasPrefix(clangErr.Error(), "compile ") {
			t.Fatal(clangErr)
		}
		t.Skipf("kernel sources not checked: %v", clangErr)
	}
	return clangPTX
}

var (
	entryRE = regexp.MustCompile(`^\.visible \.entry (\w+)\($`)
	paramRE = regexp.MustCompile(`^\s*\.param (?:\.align (\d+) )?\.(u|s|b|f)(\d+) \w+?(?:\[(\d+)\])?,?$`)
)

// parsePTX lists the entries of a PTX file and their parameters.
func parsePTX(ptx []byte) map[string]ptxEntry {
	out := map[string]ptxEntry{}
	sc := bufio.NewScanner(bytes.NewReader(ptx))
	var name string
	var e ptxEntry
	off := 0
	for sc.Scan() {
		line := sc.Text()
		if m := entryRE.FindStringSubmatch(line); m != nil {
			name, e, off = m[1], ptxEntry{}, 0
			continue
		}
		if name == "" {
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(line), ")") {
			out[name] = e
			name = ""
			continue
		}
		if m := paramRE.FindStringSubmatch(line); m != nil {
			bits, _ := strconv.Atoi(m[3])
			size := bits / 8
			align := size
			if m[1] != "" {
				align, _ = strconv.Atoi(m[1])
			}
			if m[4] != "" {
				n, _ := strconv.Atoi(m[4])
				size *= n
			}
			off = (off + align - 1) &^ (align - 1)
			e.params = append(e.params, Param{Offset: off, Size: size, Align: align})
			off += size
		}
	}
	return out
}

// TestKernelSignatures compiles the kernel sources (with clang, when
// installed) and checks every launch of the host code against the kernel's
// parameter list: the kernel exists, and each packed argument has the size,
// alignment and offset the compiler gave the parameter.
func TestKernelSignatures(t *testing.T) {
	checkSignatures(t, compileWithClang(t))
}

// checkSignatures checks every launch of the host code against the kernels
// of ptx: the kernel exists, each packed argument matches its parameter,
// and every kernel has a caller.
func checkSignatures(t *testing.T, ptx map[string]ptxEntry) {
	t.Helper()
	b, f := newFakeBackend()
	if err := exercise(b); err != nil {
		t.Fatal(err)
	}
	checked := map[string]bool{}
	for _, l := range f.takeLaunches() {
		if checked[l.name] {
			continue
		}
		checked[l.name] = true
		e, ok := ptx[l.name]
		if !ok {
			t.Errorf("launch of %s, which the sources do not define", l.name)
			continue
		}
		if len(e.params) != len(l.params) {
			t.Errorf("%s: %d arguments packed, the kernel takes %d", l.name, len(l.params), len(e.params))
			continue
		}
		for i := range e.params {
			if e.params[i] != l.params[i] {
				t.Errorf("%s: argument %d packed as %+v, the kernel's parameter is %+v", l.name, i, l.params[i], e.params[i])
			}
		}
		// The driver refuses a buffer of any other size than the
		// parameter space, tail padding included, with "too many
		// resources requested for launch".
		if n := e.size(); len(l.args) != n {
			t.Errorf("%s: %d bytes of arguments, the kernel's parameters take %d", l.name, len(l.args), n)
		}
	}
	// Every kernel of the sources has a caller.
	var unused []string
	for name := range ptx {
		if !checked[name] {
			unused = append(unused, name)
		}
	}
	sort.Strings(unused)
	if len(unused) > 0 {
		t.Errorf("kernels no host code launches: %v", unused)
	}
}
