package cuda

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
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

// kernelCheckEnv set to "require" makes the tests that compile the kernels
// with NVIDIA's compilers fail, instead of skipping, when NVRTC or ptxas is
// missing: .ci/run sets it after installing them.
const kernelCheckEnv = "FLOCK_KERNEL_CHECK"

// ptxasEnv names the ptxas binary; by default it is looked for beside
// NVRTC (../bin/ptxas, as the toolkit and NVIDIA's wheels lay them out),
// then on PATH, then in /usr/local/cuda/bin.
const ptxasEnv = "FLOCK_PTXAS"

// kernelArchs are the architectures every kernel is compiled for: A100,
// the RTX 30 series (and A10/A40), H100 and H200.
var kernelArchs = []string{"80", "86", "90"}

// localMemoryJustified lists kernels allowed to use local memory on sm_90
// (a stack frame, register spills), each with the reason. Any other kernel
// that does fails TestKernelsCompile: local memory is per-thread traffic
// to DRAM through L1, which memory-bound kernels cannot afford.
var localMemoryJustified = map[string]string{
	// 40 bytes: the scratch of the Payne–Hanek argument reduction of CUDA's
	// sin and cos, their slow path for huge arguments; Box–Muller's angles
	// lie in [0, 2π), so the frame is reserved and never touched. sinpi and
	// cospi have no such path but would change the draws, which follow the
	// CPU backend's math.Sin and math.Cos (TestRandomKernelsOnHost).
	"random_f32": boxMullerScratch,
	"random_f64": boxMullerScratch,
}

const boxMullerScratch = "Payne–Hanek scratch of sin and cos, never touched for angles in [0, 2π)"

// kernelToolchain is NVRTC, opened by the backend's own loading code, and
// ptxas.
type kernelToolchain struct {
	nv    *nvrtc
	ptxas string
}

var (
	toolchainOnce sync.Once
	toolchain     *kernelToolchain
	toolchainErr  error
)

// kernelTools returns NVRTC and ptxas, or skips the test saying why (fails
// it when FLOCK_KERNEL_CHECK=require).
func kernelTools(t *testing.T) *kernelToolchain {
	t.Helper()
	toolchainOnce.Do(func() {
		nv, err := loadNVRTC()
		if err != nil {
			toolchainErr = err
			return
		}
		ptxas, err := findPTXAS(nv.lib.Path)
		if err != nil {
			toolchainErr = err
			return
		}
		toolchain = &kernelToolchain{nv: nv, ptxas: ptxas}
	})
	if toolchainErr != nil {
		msg := fmt.Sprintf("kernels not compiled: %v (.ci/cuda_tools.sh installs NVRTC and ptxas; set %s to their lib directory)", toolchainErr, LibDirEnv)
		if os.Getenv(kernelCheckEnv) == "require" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return toolchain
}

// findPTXAS returns the ptxas to use with the NVRTC at nvrtcPath.
func findPTXAS(nvrtcPath string) (string, error) {
	if p := os.Getenv(ptxasEnv); p != "" {
		return p, nil
	}
	var tried []string
	if strings.ContainsRune(nvrtcPath, '/') {
		p := filepath.Join(filepath.Dir(nvrtcPath), "..", "bin", "ptxas")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		tried = append(tried, p)
	}
	if p, err := exec.LookPath("ptxas"); err == nil {
		return p, nil
	}
	tried = append(tried, "PATH")
	const sys = "/usr/local/cuda/bin/ptxas"
	if _, err := os.Stat(sys); err == nil {
		return sys, nil
	}
	tried = append(tried, sys)
	return "", fmt.Errorf("no ptxas (tried %s; set %s)", strings.Join(tried, ", "), ptxasEnv)
}

// compileModule compiles kernels/<module>.cu for compute_<arch> as the
// backend does at run time. NVRTC's warnings are errors here.
func (k *kernelToolchain) compileModule(module, arch string) ([]byte, error) {
	src, headers, err := kernelSource(module)
	if err != nil {
		return nil, err
	}
	ptx, log, err := k.nv.compileLog(module+".cu", src, headers, "compute_"+arch)
	if err != nil {
		return nil, err
	}
	if log != "" {
		return nil, fmt.Errorf("NVRTC warns:\n%s", log)
	}
	return bytes.TrimRight(ptx, "\x00"), nil
}

// kernelResources is what ptxas reports for one kernel on one architecture.
type kernelResources struct {
	Registers   int
	StackFrame  int // bytes of local memory per thread
	SpillStores int // bytes
	SpillLoads  int // bytes
	SharedMem   int // bytes of static shared memory
	Barriers    int
}

var (
	ptxasEntryRE = regexp.MustCompile(`^ptxas info\s*: Compiling entry function '(\w+)' for 'sm_(\d+)'`)
	ptxasPropsRE = regexp.MustCompile(`^ptxas info\s*: Function properties for (\w+)`)
	ptxasFrameRE = regexp.MustCompile(`^\s*(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads`)
	ptxasUsedRE  = regexp.MustCompile(`^ptxas info\s*: Used (\d+) registers`)
	ptxasSmemRE  = regexp.MustCompile(`(\d+) bytes smem`)
	ptxasBarRE   = regexp.MustCompile(`used (\d+) barriers`)
)

// parsePTXAS reads the per-kernel resources of ptxas -v output. The
// properties of a function the kernels call (CUDA's own, such as the slow
// path of sin and cos) follow the kernel's and are not the kernel's.
func parsePTXAS(out []byte) map[string]kernelResources {
	res := map[string]kernelResources{}
	var name, props string
	sc := bufio.NewScanner(bytes.NewReader(out))
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	for sc.Scan() {
		line := sc.Text()
		if m := ptxasEntryRE.FindStringSubmatch(line); m != nil {
			name = m[1]
			res[name] = kernelResources{}
			continue
		}
		if name == "" {
			continue
		}
		r := res[name]
		if m := ptxasPropsRE.FindStringSubmatch(line); m != nil {
			props = m[1]
			continue
		}
		if m := ptxasFrameRE.FindStringSubmatch(line); m != nil && props == name {
			r.StackFrame, r.SpillStores, r.SpillLoads = atoi(m[1]), atoi(m[2]), atoi(m[3])
		}
		if m := ptxasUsedRE.FindStringSubmatch(line); m != nil {
			r.Registers = atoi(m[1])
			if m := ptxasSmemRE.FindStringSubmatch(line); m != nil {
				r.SharedMem = atoi(m[1])
			}
			if m := ptxasBarRE.FindStringSubmatch(line); m != nil {
				r.Barriers = atoi(m[1])
			}
		}
		res[name] = r
	}
	return res
}

// assemble runs ptxas on one PTX file for sm_<arch>. Its warnings are
// errors.
func (k *kernelToolchain) assemble(ptxFile, arch string) (map[string]kernelResources, error) {
	cmd := exec.Command(k.ptxas, "-arch=sm_"+arch, "-v", "-o", os.DevNull, ptxFile)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s: %v\n%s", cmd, err, out)
	}
	var warn []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "warning") {
			warn = append(warn, l)
		}
	}
	if len(warn) > 0 {
		return nil, fmt.Errorf("%s warns:\n%s", cmd, strings.Join(warn, "\n"))
	}
	return parsePTXAS(out), nil
}

// TestKernelsCompile compiles every kernel source with NVRTC, opened and
// driven by the backend's own code, for compute_80, compute_86 and
// compute_90, and assembles each PTX with ptxas for the matching sm_; every
// launch of the host code is then checked against NVRTC's parameter lists.
// It fails on any error or warning and on a kernel that uses local memory
// (a stack frame or register spills) on sm_90; with -v it prints the
// registers, local memory, spills and shared memory of each kernel on sm_90.
func TestKernelsCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles every kernel for three architectures")
	}
	k := kernelTools(t)
	t.Logf("NVRTC %s (%s), %s", k.nv.Version(), k.nv.lib.Path, k.ptxas)
	dir := t.TempDir()
	var mu sync.Mutex
	resources := map[string]map[string]kernelResources{} // arch → kernel → resources
	entries := map[string]map[string]ptxEntry{}          // arch → kernel → parameters
	t.Run("modules", func(t *testing.T) {
		for _, arch := range kernelArchs {
			for _, m := range Modules() {
				t.Run(arch+"/"+m, func(t *testing.T) {
					t.Parallel()
					ptx, err := k.compileModule(m, arch)
					if err != nil {
						t.Fatalf("compile kernels/%s.cu for compute_%s: %v", m, arch, err)
					}
					file := filepath.Join(dir, m+"_"+arch+".ptx")
					if err := os.WriteFile(file, ptx, 0o644); err != nil {
						t.Fatal(err)
					}
					res, err := k.assemble(file, arch)
					if err != nil {
						t.Fatalf("assemble kernels/%s.cu for sm_%s: %v", m, arch, err)
					}
					params := parsePTX(ptx)
					if len(params) == 0 || len(res) != len(params) {
						t.Fatalf("kernels/%s.cu: %d entries in the PTX, %d assembled", m, len(params), len(res))
					}
					mu.Lock()
					defer mu.Unlock()
					if resources[arch] == nil {
						resources[arch], entries[arch] = map[string]kernelResources{}, map[string]ptxEntry{}
					}
					for name, r := range res {
						resources[arch][name] = r
					}
					for name, e := range params {
						entries[arch][name] = e
					}
				})
			}
		}
	})
	if t.Failed() {
		return
	}
	n := len(entries[kernelArchs[0]])
	for _, arch := range kernelArchs {
		if len(entries[arch]) != n || len(resources[arch]) != n {
			t.Errorf("compute_%s: %d kernels, sm_%s: %d; compute_%s: %d", arch, len(entries[arch]), arch, len(resources[arch]), kernelArchs[0], n)
		}
	}
	checkSignatures(t, entries["80"])
	for _, arch := range kernelArchs {
		checkLaunchGeometry(t, "sm_"+arch, resources[arch])
	}
	names := make([]string, 0, n)
	for name := range resources["90"] {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		r := resources["90"][name]
		if r.StackFrame+r.SpillStores+r.SpillLoads > 0 && localMemoryJustified[name] == "" {
			t.Errorf("%s uses local memory on sm_90: %d-byte stack frame, %d bytes of spill stores, %d of spill loads", name, r.StackFrame, r.SpillStores, r.SpillLoads)
		}
	}
	if testing.Verbose() {
		var b strings.Builder
		fmt.Fprintf(&b, "%d kernels on sm_90 (ptxas %s):\n\n", n, filepath.Base(k.ptxas))
		b.WriteString("| kernel | registers | stack frame (B) | spill stores (B) | spill loads (B) | shared memory (B) | barriers |\n")
		b.WriteString("|---|---|---|---|---|---|---|\n")
		for _, name := range names {
			r := resources["90"][name]
			fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d |\n", name, r.Registers, r.StackFrame, r.SpillStores, r.SpillLoads, r.SharedMem, r.Barriers)
		}
		t.Log("\n" + b.String())
	}
}

var updatePTX = flag.Bool("update-ptx", false, "TestCommittedPTX rewrites the committed kernels/*.ptx from the sources")

// TestCommittedPTX checks that each kernels/<module>.ptx the package
// carries, which the backend loads in place of compiling the source, is
// what NVRTC makes of the source today for the PTX's target. With
// -update-ptx it rewrites them instead (kernels/gen_ptx.sh).
func TestCommittedPTX(t *testing.T) {
	var committed []string
	for _, m := range Modules() {
		if committedPTX(m) != nil {
			committed = append(committed, m)
		}
	}
	if len(committed) == 0 && !*updatePTX {
		t.Skip("the package carries no PTX: kernels are compiled at run time")
	}
	k := kernelTools(t)
	if *updatePTX {
		writeCommittedPTX(t, k)
		return
	}
	for _, m := range committed {
		old := committedPTX(m)
		arch, err := ptxTarget(old)
		if err != nil {
			t.Errorf("kernels/%s.ptx: %v", m, err)
			continue
		}
		fresh, err := k.compileModule(m, arch)
		if err != nil {
			t.Errorf("compile kernels/%s.cu: %v", m, err)
			continue
		}
		if err := samePTX(old, fresh); err != nil {
			t.Errorf("kernels/%s.ptx is not what kernels/%s.cu compiles to (regenerate with kernels/gen_ptx.sh): %v", m, m, err)
		}
	}
}

// writeCommittedPTX writes kernels/<module>.ptx for the modules named by
// FLOCK_PTX_MODULES (comma-separated; every module when empty), for
// compute_<FLOCK_PTX_ARCH> (default 80).
func writeCommittedPTX(t *testing.T, k *kernelToolchain) {
	arch := strings.TrimPrefix(os.Getenv("FLOCK_PTX_ARCH"), "compute_")
	if arch == "" {
		arch = "80"
	}
	modules := Modules()
	if s := os.Getenv("FLOCK_PTX_MODULES"); s != "" {
		modules = strings.Split(s, ",")
	}
	for _, m := range modules {
		ptx, err := k.compileModule(m, arch)
		if err != nil {
			t.Fatalf("compile kernels/%s.cu: %v", m, err)
		}
		p := filepath.Join("kernels", m+".ptx")
		if err := os.WriteFile(p, append(ptx, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d kernels for compute_%s", p, len(parsePTX(ptx)), arch)
	}
}

var ptxTargetRE = regexp.MustCompile(`(?m)^\.target sm_(\d+)`)

// ptxTarget returns the architecture a PTX file is for ("80").
func ptxTarget(ptx []byte) (string, error) {
	m := ptxTargetRE.FindSubmatch(ptx)
	if m == nil {
		return "", errors.New("no .target line")
	}
	return string(m[1]), nil
}

// samePTX compares two PTX texts line by line, leaving out comments (the
// compiler's build identification) and blank lines, and names the first
// line that differs.
func samePTX(committed, fresh []byte) error {
	code := func(b []byte) []string {
		var out []string
		for _, l := range strings.Split(string(b), "\n") {
			l = strings.TrimRight(l, " \t\r\x00")
			if l == "" || strings.HasPrefix(strings.TrimSpace(l), "//") {
				continue
			}
			out = append(out, l)
		}
		return out
	}
	a, b := code(committed), code(fresh)
	for i := 0; i < len(a) || i < len(b); i++ {
		switch {
		case i >= len(a):
			return fmt.Errorf("the source compiles to more: %q", b[i])
		case i >= len(b):
			return fmt.Errorf("the committed PTX has more: %q", a[i])
		case a[i] != b[i]:
			return fmt.Errorf("committed %q, compiled %q", a[i], b[i])
		}
	}
	return nil
}

// TestSamePTX checks the comparison of committed and compiled PTX.
func TestSamePTX(t *testing.T) {
	t.Parallel()
	const ptx = "//\n// Generated by NVIDIA NVVM Compiler\n// Cuda compilation tools, release 13.0, V13.0.88\n\n.version 9.0\n.target sm_80\n.visible .entry k(\n)\n{\n\tret;\n}\n"
	cases := []struct {
		name, other string
		same        bool
	}{
		{"identical", ptx, true},
		{"other compiler build", strings.Replace(ptx, "V13.0.88", "V13.0.48", 1), true},
		{"trailing NUL and newline", ptx + "\n\x00", true},
		{"changed instruction", strings.Replace(ptx, "ret;", "exit;", 1), false},
		{"kernel added", ptx + ".visible .entry k2(\n)\n{\n\tret;\n}\n", false},
		{"kernel removed", ptx[:strings.Index(ptx, ".visible")], false},
	}
	for _, c := range cases {
		if err := samePTX([]byte(ptx), []byte(c.other)); (err == nil) != c.same {
			t.Errorf("%s: samePTX = %v, want same = %v", c.name, err, c.same)
		}
	}
	if a, err := ptxTarget([]byte(ptx)); err != nil || a != "80" {
		t.Errorf("ptxTarget = %q, %v", a, err)
	}
}

// TestParsePTXAS checks the reading of ptxas -v output.
func TestParsePTXAS(t *testing.T) {
	t.Parallel()
	const out = `ptxas info    : 8 bytes gmem
ptxas info    : Compiling entry function 'reduce_block_f64' for 'sm_90'
ptxas info    : Function properties for reduce_block_f64
    256 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 52 registers, used 1 barriers, 256 bytes cumulative stack size, 768 bytes smem
ptxas info    : Compile time = 141.743 ms
ptxas info    : Function properties for __internal_trig_reduction_slowpathd
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'fill_f32' for 'sm_90'
ptxas info    : Function properties for fill_f32
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 18 registers, used 0 barriers
`
	got := parsePTXAS([]byte(out))
	want := map[string]kernelResources{
		"reduce_block_f64": {Registers: 52, StackFrame: 256, SpillStores: 8, SpillLoads: 12, SharedMem: 768, Barriers: 1},
		"fill_f32":         {Registers: 18},
	}
	if len(got) != len(want) {
		t.Fatalf("parsed %v", got)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %+v, want %+v", k, got[k], w)
		}
	}
}

// Per-block limits of sm_80, sm_86 and sm_90.
const (
	maxBlockThreads   = 1024
	blockRegisters    = 64 * 1024
	regAllocUnit      = 256 // registers are given to a warp in units of 256
	maxStaticSharedMB = 48 * 1024
)

// blockLimit is the most threads per block a kernel with resources r can be
// launched with: the driver refuses a block whose warps' registers exceed
// the register file of a block ("too many resources requested for launch").
func blockLimit(r kernelResources) int {
	perWarp := (r.Registers*32 + regAllocUnit - 1) / regAllocUnit * regAllocUnit
	if perWarp == 0 {
		return maxBlockThreads
	}
	return min(blockRegisters/perWarp*32, maxBlockThreads)
}

func TestBlockLimit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ regs, want int }{
		{0, 1024}, {32, 1024}, {64, 1024}, {65, 896}, {72, 896}, {128, 512}, {255, 256},
	} {
		if got := blockLimit(kernelResources{Registers: c.regs}); got != c.want {
			t.Errorf("blockLimit(%d registers) = %d, want %d", c.regs, got, c.want)
		}
	}
}

// exerciseWide calls the kernels whose block size grows with a row's
// length (one block per row, softmax, cross-entropy, layer norm, the
// reductions and batch norm's statistics) on rows long enough that the host
// code chooses the largest block it ever does.
func exerciseWide(b *Backend) error {
	var err error
	do := func(what string, e error) {
		if e != nil && err == nil {
			err = fmt.Errorf("%s: %w", what, e)
		}
	}
	alloc := func(dt backend.DType, shape ...int) backend.View {
		s := backend.Shape(shape)
		buf, e := b.Alloc(max(s.NumElements(), 1) * dt.Size())
		do("alloc", e)
		return backend.Contiguous(buf, dt, s)
	}
	const n = 8192
	for _, dt := range []backend.DType{backend.Float32, backend.Float64} {
		x := alloc(dt, 2, n)
		do("softmax", b.Softmax(alloc(dt, 2, n), x, 1, false))
		do("softmax back", b.SoftmaxBackward(alloc(dt, 2, n), x, x, 1, false))
		for _, it := range []backend.DType{backend.Int32, backend.Int64} {
			ce := backend.CrossEntropyParams{IgnoreIndex: -100}
			tgt := alloc(it, 2)
			do("xent", b.CrossEntropy(alloc(dt, 2), x, tgt, ce))
			do("xent back", b.CrossEntropyBackward(alloc(dt, 2, n), x, tgt, alloc(dt, 2), ce))
		}
		do("layer norm", b.LayerNorm(alloc(dt, 2, n), alloc(dt, 2), alloc(dt, 2), x, alloc(dt, n), alloc(dt, n), n, 1e-5))
		do("layer norm back", b.LayerNormBackward(alloc(dt, 2, n), alloc(dt, n), alloc(dt, n), x, x, alloc(dt, n), alloc(dt, 2), alloc(dt, 2), n))
		do("reduce", b.Reduce(backend.Sum, alloc(dt, 2), x, []int{1}, backend.ReduceParams{}))
		bx := alloc(dt, 8, 2, 32, 32)
		ch := func() backend.View { return alloc(dt, 2) }
		np := backend.NormParams{Eps: 1e-5, Momentum: 0.1, Training: true}
		do("batch norm", b.BatchNorm(alloc(dt, 8, 2, 32, 32), ch(), ch(), bx, ch(), ch(), ch(), ch(), np))
		do("batch norm back", b.BatchNormBackward(alloc(dt, 8, 2, 32, 32), ch(), ch(), bx, bx, ch(), ch(), ch(), np))
	}
	return err
}

// checkLaunchGeometry checks that every launch of the host code (exercise
// and exerciseWide) fits the kernel's resources on arch as ptxas reports
// them: its block within the threads the kernel's registers allow, its
// static shared memory within a block's 48 KiB.
func checkLaunchGeometry(t *testing.T, arch string, res map[string]kernelResources) {
	t.Helper()
	b, f := newFakeBackend()
	if err := exercise(b); err != nil {
		t.Fatal(err)
	}
	if err := exerciseWide(b); err != nil {
		t.Fatal(err)
	}
	widest := map[string]int{}
	for _, l := range f.takeLaunches() {
		widest[l.name] = max(widest[l.name], l.block)
	}
	names := make([]string, 0, len(widest))
	for name := range widest {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		r, ok := res[name]
		if !ok {
			continue // checkSignatures reports it
		}
		if lim := blockLimit(r); widest[name] > lim {
			t.Errorf("%s: %s launched with %d threads per block, its %d registers a thread allow %d", arch, name, widest[name], r.Registers, lim)
		}
		if r.SharedMem > maxStaticSharedMB {
			t.Errorf("%s: %s uses %d bytes of static shared memory, a block has %d", arch, name, r.SharedMem, maxStaticSharedMB)
		}
	}
	for _, name := range []string{"softmax_rows_f32", "xent_f64_i64", "ln_fwd_f32", "reduce_block_f64", "bn_stats_f32"} {
		if widest[name] < 256 {
			t.Errorf("%s: widest launch of %d threads; exerciseWide does not reach the largest block", name, widest[name])
		}
	}
}
