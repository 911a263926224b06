package cpu

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"unsafe"
)

//go:generate go run sgemm_gen.go

// The float32 matrix product follows Goto and van de Geijn ("Anatomy of
// High-Performance Matrix Multiplication", ACM TOMS 34(3), 2008) as BLIS
// arranges it (Van Zee and van de Geijn, ACM TOMS 41(3), 2015), for row-major
// C. A register-blocked micro-kernel (sgemm_amd64.s, written by
// sgemm_gen.go) keeps an mr×nr tile of C in vector registers for a depth of
// kc, loading nr floats of a row of op(B) and broadcasting mr floats of a
// column of op(A) per step. Around it:
//
//   - op(B) is packed once per product into micro-panels of nr columns and
//     kc rows, contiguous and zero-padded on the right (packB), unless C has
//     few rows: then each B micro-panel meets too few A micro-panels to repay
//     the copy, and the kernels read B in place, masking the last columns.
//   - op(A) is read in place, its mr rows at a time (the kernels' "r" form),
//     or copied first when its rows are a multiple of 2 KiB apart (they would
//     share a few sets of the L1 cache) or when it is Aᵀ (packA).
//   - For each block of mc rows and kc depth the panels of B are swept: a B
//     micro-panel (kc·nr floats) meets the block's mc/mr micro-panels of A
//     while it is in the L1 or L2 cache, and the A block stays in L2 while
//     it meets every B micro-panel.
//   - Goroutines share the packing of B, then take blocks of rows (or of
//     panels, when rows are few) as they come.
//
// No goroutine splits the inner dimension and the blocking does not depend
// on the number of goroutines, so every element of C is the same sum, in the
// same order, whatever the thread count: results are bitwise reproducible.

// KernelsEnv names the environment variable that forces the CPU kernels'
// instruction-set path: "avx512", "avx2" or "go" (pure Go, the reference).
// Unset or "auto" picks the fastest path the CPU supports; a path the CPU
// lacks falls back to the fastest it has, with a warning.
const KernelsEnv = "FLOCK_CPU_KERNELS"

// sgemmKernel computes an mr×nr tile: C = α·Σₖ a(i,k)·b(k,j) + β·C over kc
// steps. The A micro-panel a is in the "k" form, a(i,k) = a[k·as+i], or the
// "r" form, a(i,k) = a[i·as+k]; the B micro-panel b is packed (b(k,j) =
// b[k·nr+j]) or in place (b(k,j) = b[k·bs+j], columns past the mask not
// read), according to the table the kernel came from. Bit j of mask enables
// column j (masked kernels). With β = 0 C is not read.
type sgemmKernel func(a *float32, as int, b *float32, bs int, c *float32, ldc int, kc int, alpha, beta float32, mask uint32)

const (
	formK = iota // a(i,k) = a[k·as+i]: a packed panel, or Aᵀ in place
	formR        // a(i,k) = a[i·as+k]: A in place
)

const (
	bPacked  = iota // B's micro-panels packed by packB
	bInPlace        // B read where it is, rows bs apart
)

// sgemmArch is one instruction-set path of the float32 product.
type sgemmArch struct {
	name   string
	mr, nr int
	// kern[layout of B][form of A][rows] computes a tile of rows ≤ mr
	// rows; nil where the path lacks the layout.
	kern [2][2][]sgemmKernel
	// masked kernels limit their columns by mask; the others always write
	// nr columns, so the caller hands them a scratch tile at the right edge.
	masked bool
	// kc is the depth of a block and mc its rows; sgemmArchs gives the
	// reasons for their values.
	kc, mc int
	// copyPanel, if not nil, is sgemmCopyPanelAVX512.
	copyPanel func(dst *float32, ldd int, src *float32, lds int, rows, cols, width int)
	// transpose, if not nil, is the transposer of sgemmTransposeAVX512.
	transpose func(dst *float32, ldd int, src *float32, lds int, rows, cols int)
	// peak runs n iterations of independent FMAs, peakFlops per iteration.
	peak      func(n int)
	peakFlops int
}

// sgemmPaths lists the paths this CPU runs, fastest first; nil stands for
// pure Go.
var sgemmPaths = append(sgemmArchs(), nil)

var sgemmActive atomic.Pointer[sgemmArch]

func init() {
	want := strings.ToLower(strings.TrimSpace(os.Getenv(KernelsEnv)))
	if want == "" || want == "auto" {
		sgemmActive.Store(sgemmPaths[0])
		return
	}
	if err := useKernelPath(want); err != nil {
		slog.Warn("cpu: "+KernelsEnv+" names a path this CPU cannot run; using the fastest it has",
			"want", want, "using", pathName(sgemmPaths[0]), "err", err)
		sgemmActive.Store(sgemmPaths[0])
	}
}

func pathName(a *sgemmArch) string {
	if a == nil {
		return "go"
	}
	return a.name
}

// KernelPaths returns the kernel paths this CPU can run, fastest first; the
// last is always "go".
func KernelPaths() []string {
	names := make([]string, len(sgemmPaths))
	for i, a := range sgemmPaths {
		names[i] = pathName(a)
	}
	return names
}

// KernelPath returns the kernel path in use: "avx512", "avx2" or "go".
func KernelPath() string { return pathName(sgemmActive.Load()) }

// useKernelPath switches the kernels to the named path.
func useKernelPath(name string) error {
	for _, a := range sgemmPaths {
		if pathName(a) == name {
			sgemmActive.Store(a)
			return nil
		}
	}
	switch name {
	case "avx512", "avx2":
		return fmt.Errorf("cpu: kernel path %q: not supported by this CPU (it runs %s)", name, strings.Join(KernelPaths(), ", "))
	}
	return fmt.Errorf("cpu: kernel path %q: unknown (want avx512, avx2 or go)", name)
}

// Blocking that does not depend on the instruction set.
const (
	// sgemmMaxPackB bounds the packed copy of op(B), in floats (16 MiB);
	// wider products go in column slabs that fit.
	sgemmMaxPackB = 4 << 20
	// sgemmThreadFlops is the least work worth another goroutine.
	sgemmThreadFlops = 1 << 21
)

// sgemmPolicy holds the thresholds of the packing decisions; tests change
// it to send products through every layout.
var sgemmPolicy = struct {
	// packAAll packs every A.
	packAAll bool
	// packAMinN is the least width of C over which packing an A whose rows
	// alias in the L1 cache pays (see packsA).
	packAMinN int
	// packBMinM is the least height of C over which packing B pays: with
	// C 64 rows high, as in a convolution's forward product, reading B in
	// place runs about 1.7× as fast as packing it; at 256 rows they tie.
	packBMinM int
}{packAMinN: 256, packBMinM: 256}

// sgemmProduct is one float32 product C = α·op(A)·op(B) + β·C, row-major.
type sgemmProduct struct {
	arch           *sgemmArch
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	a, b, c        []float32
	lda, ldb, ldc  int
	// inPlaceB reads B where it is instead of packing it.
	inPlaceB bool
}

// sgemm computes C = α·op(A)·op(B) + β·C with the kernels of arch on up to
// threads goroutines. Arguments are as for gemm; they are not checked.
func sgemm(arch *sgemmArch, threads int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if alpha == 0 || k == 0 {
		scaleMatrix(m, n, beta, c, ldc)
		return
	}
	p := sgemmProduct{arch: arch, transA: transA, transB: transB, m: m, n: n, k: k,
		alpha: alpha, beta: beta, a: a, b: b, c: c, lda: lda, ldb: ldb, ldc: ldc}
	threads = max(1, min(threads, 2*m*n*k/sgemmThreadFlops))
	// A B micro-panel meets ⌈m/mr⌉ A micro-panels: with few of them, packing
	// B costs more than reading it in place, unless its rows are a multiple
	// of 1 KiB apart and would crowd a few sets of the L1 cache.
	p.inPlaceB = !transB && arch.kern[bInPlace][formK] != nil && m < sgemmPolicy.packBMinM && (ldb*4)%1024 != 0
	if p.inPlaceB {
		p.slab(threads, 0, n, nil)
		return
	}
	nr := arch.nr
	nc := n
	if k*roundUp(n, nr) > sgemmMaxPackB {
		nc = max(nr, sgemmMaxPackB/k/nr*nr)
	}
	buf, bp := alignedScratch(p.packedB(min(nc, n)))
	defer putScratch(buf)
	for j0 := 0; j0 < n; j0 += nc {
		p.slab(threads, j0, min(nc, n-j0), bp)
	}
}

// alignedScratch returns scratch of n floats whose first is 64-byte aligned.
func alignedScratch(n int) (*[]float32, []float32) {
	s := getScratch[float32](n + 16)
	off := int((64 - uintptr(unsafe.Pointer(&(*s)[0]))%64) % 64 / 4)
	return s, (*s)[off : off+n]
}

// depth returns the depth of the blocks of the inner dimension: k cut into
// equal blocks of at most arch.kc, rounded up to a multiple of 4 (the
// kernels' unrolling).
func (p *sgemmProduct) depth() int {
	kb := (p.k + p.arch.kc - 1) / p.arch.kc
	return roundUp((p.k+kb-1)/kb, 4)
}

// slab computes columns [j0, j0+nc) of C. With several threads, each
// takes chunks of op(B)'s panels to pack until none is left and waits for
// the others' (unless B is read in place), then takes blocks of C until none
// is left. Taking work as it comes, rather than a fixed share, keeps a
// thread that starts late or that the system delays from holding up the
// others.
func (p *sgemmProduct) slab(threads, j0, nc int, bp []float32) {
	nr, mr := p.arch.nr, p.arch.mr
	panels := (nc + nr - 1) / nr
	if threads == 1 {
		if !p.inPlaceB {
			p.packB(j0, nc, 0, panels, bp)
		}
		p.compute(0, p.m, 0, panels, j0, nc, bp)
		return
	}
	// Blocks of C are cut across rows (each then packs its own rows of A,
	// if any, and reads all of packed B), or across panels when the rows
	// are few or B is read in place (each block then reads its own columns
	// of B). Their sizes shrink as the work runs out (guided
	// self-scheduling: a share of what is left), so that the threads finish
	// together.
	units := (p.m + mr - 1) / mr
	byRows := units >= 2*threads && !(p.inPlaceB && panels >= 2*threads)
	total := panels
	if byRows {
		total = units
	}
	packChunk := (panels + 4*threads - 1) / (4 * threads)
	threads = min(threads, total)
	// The threads wait for each other by spinning (sgemmWait), not in the
	// scheduler: a goroutine that blocks there is woken on the waker's
	// processor, behind the waker's own work, and may wait for it.
	var nextPack, next, unpacked, running atomic.Int64
	if !p.inPlaceB {
		unpacked.Store(int64(panels))
	}
	run := func() {
		if !p.inPlaceB {
			for {
				lo := int(nextPack.Add(int64(packChunk))) - packChunk
				if lo >= panels {
					break
				}
				hi := min(panels, lo+packChunk)
				p.packB(j0, nc, lo, hi, bp)
				unpacked.Add(int64(lo - hi))
			}
			sgemmWait(&unpacked)
		}
		for {
			lo := int(next.Load())
			if lo >= total {
				return
			}
			hi := min(total, lo+max(1, (total-lo)/(2*threads)))
			if !next.CompareAndSwap(int64(lo), int64(hi)) {
				continue
			}
			if byRows {
				p.compute(lo*mr, min(p.m, hi*mr), 0, panels, j0, nc, bp)
			} else {
				p.compute(0, p.m, lo, hi, j0, nc, bp)
			}
		}
	}
	running.Store(int64(threads - 1))
	for range threads - 1 {
		sgemmGo(func() {
			defer running.Add(-1)
			run()
		})
	}
	run()
	sgemmWait(&running)
}

// sgemmPanelPad separates B's packed micro-panels by a cache line, so that
// the rows that packB writes to consecutive panels, and that a kernel reads
// from them, do not fall into one set of the L1 cache when kc·nr floats is
// a multiple of 4 KiB.
const sgemmPanelPad = 16

// packedB returns the floats of op(B)'s nc columns packed.
func (p *sgemmProduct) packedB(nc int) int {
	kc := p.depth()
	panels := (nc + p.arch.nr - 1) / p.arch.nr
	return (p.k + kc - 1) / kc * panels * (kc*p.arch.nr + sgemmPanelPad)
}

// panelAt returns the offset of a packed micro-panel: panel q of the depth
// block [k0, k0+kb) of a slab of panels panels.
func (p *sgemmProduct) panelAt(k0, kb, q, panels int) int {
	kc, nr := p.depth(), p.arch.nr
	return k0/kc*panels*(kc*nr+sgemmPanelPad) + q*(kb*nr+sgemmPanelPad)
}

// packB packs panels [lo, hi) of op(B)'s columns [j0, j0+nc) into bp: for
// each depth block [k0, k0+kb), the kb rows of nr floats of each panel at
// panelAt, columns past nc zero.
func (p *sgemmProduct) packB(j0, nc, lo, hi int, bp []float32) {
	nr, kc := p.arch.nr, p.depth()
	panels := (nc + nr - 1) / nr
	for k0 := 0; k0 < p.k; k0 += kc {
		kb := min(kc, p.k-k0)
		slab := bp[p.panelAt(k0, kb, 0, panels):]
		ps := kb*nr + sgemmPanelPad
		if !p.transB && p.arch.copyPanel != nil {
			// Sixteen rows at a time across the panels, so that B is read
			// nearly in its own order.
			for r0 := 0; r0 < kb; r0 += 16 {
				rows := min(16, kb-r0)
				for q := lo; q < hi; q++ {
					jc := j0 + q*nr
					p.arch.copyPanel(&slab[q*ps+r0*nr], nr, &p.b[(k0+r0)*p.ldb+jc], p.ldb, rows, min(nr, j0+nc-jc), nr)
				}
			}
			continue
		}
		if !p.transB {
			// Row by row, so that B is read in its own order.
			for kk := range kb {
				row := p.b[(k0+kk)*p.ldb:]
				for q := lo; q < hi; q++ {
					jc := j0 + q*nr
					cols := min(nr, j0+nc-jc)
					d := slab[q*ps+kk*nr : q*ps+(kk+1)*nr]
					switch {
					case cols == 32 && nr == 32:
						*(*[32]float32)(d) = *(*[32]float32)(row[jc:])
					case cols == 16 && nr == 16:
						*(*[16]float32)(d) = *(*[16]float32)(row[jc:])
					default:
						copy(d, row[jc:jc+cols])
						clear(d[cols:])
					}
				}
			}
			continue
		}
		for q := lo; q < hi; q++ {
			jc := j0 + q*nr
			cols := min(nr, j0+nc-jc)
			dst := slab[q*ps : q*ps+kb*nr]
			p.transposeInto(dst, nr, p.b[jc*p.ldb+k0:], p.ldb, cols, kb)
		}
	}
}

// transposeInto writes the transpose of rows×cols of src (row stride lds)
// into dst (row stride ldd): cols rows of rows floats, the rest of each of
// dst's ldd-wide rows zero.
func (p *sgemmProduct) transposeInto(dst []float32, ldd int, src []float32, lds, rows, cols int) {
	if rows < ldd {
		for c := range cols {
			clear(dst[c*ldd+rows : (c+1)*ldd])
		}
	}
	transposeWith(p.arch, dst, ldd, src, lds, rows, cols)
}

// transposeWith writes the transpose of the rows×cols matrix src (row
// stride lds) into dst (row stride ldd): with the AVX-512 transposer of
// arch, 16×16 blocks at a time, where arch has one and T is float32, else
// in 32×32 tiles of Go loops.
func transposeWith[T float32 | float64](arch *sgemmArch, dst []T, ldd int, src []T, lds, rows, cols int) {
	if rows == 0 || cols == 0 {
		return
	}
	_, _ = dst[(cols-1)*ldd+rows-1], src[(rows-1)*lds+cols-1]
	if d, ok := any(dst).([]float32); ok && arch != nil && arch.transpose != nil {
		sf := any(src).([]float32)
		for r := 0; r < rows; r += 16 {
			for c := 0; c < cols; c += 16 {
				arch.transpose(&d[c*ldd+r], ldd, &sf[r*lds+c], lds, min(16, rows-r), min(16, cols-c))
			}
		}
		return
	}
	const tile = 32
	for r0 := 0; r0 < rows; r0 += tile {
		for c0 := 0; c0 < cols; c0 += tile {
			for r := r0; r < min(rows, r0+tile); r++ {
				row := src[r*lds : r*lds+cols]
				for c := c0; c < min(cols, c0+tile); c++ {
					dst[c*ldd+r] = row[c]
				}
			}
		}
	}
}

// compute computes rows [i0, i1) and column panels [p0, p1) of the slab at
// j0 (nc wide, packed in bp).
func (p *sgemmProduct) compute(i0, i1, p0, p1, j0, nc int, bp []float32) {
	if i0 >= i1 || p0 >= p1 {
		return
	}
	arch := p.arch
	mr, nr := arch.mr, arch.nr
	kc := p.depth()
	panels := (nc + nr - 1) / nr
	packA := p.packsA()
	var abuf *[]float32
	var ap []float32
	if packA {
		abuf, ap = alignedScratch(arch.mc * packedA(kc))
		defer putScratch(abuf)
	}
	for ic := i0; ic < i1; ic += arch.mc {
		mc := min(arch.mc, i1-ic)
		for k0 := 0; k0 < p.k; k0 += kc {
			kb := min(kc, p.k-k0)
			beta := p.beta
			if k0 > 0 {
				beta = 1
			}
			if packA {
				p.packA(ic, mc, k0, kb, ap)
			}
			for q := p0; q < p1; q++ {
				jc := j0 + q*nr
				cols := min(nr, j0+nc-jc)
				var b *float32
				bs, layout := nr, bPacked
				if p.inPlaceB {
					b, bs, layout = &p.b[k0*p.ldb+jc], p.ldb, bInPlace
				} else {
					b = &bp[p.panelAt(k0, kb, q, panels)]
				}
				for ir := 0; ir < mc; ir += mr {
					rows := min(mr, mc-ir)
					var a *float32
					var as, form int
					switch {
					case packA && p.transA:
						a, as, form = &ap[ir*kb], rows, formK
					case packA:
						a, as, form = &ap[ir*packedA(kb)], packedA(kb), formR
					default:
						a, as, form = &p.a[(ic+ir)*p.lda+k0], p.lda, formR
					}
					kern := arch.kern[layout][form][rows]
					c := p.c[(ic+ir)*p.ldc+jc:]
					if cols == nr || arch.masked {
						kern(a, as, b, bs, &c[0], p.ldc, kb, p.alpha, beta, uint32(1)<<cols-1)
						continue
					}
					p.edge(kern, a, as, b, bs, c, rows, cols, kb, beta)
				}
			}
		}
	}
}

// packsA reports whether compute copies blocks of A before use. The "r"
// form reads A's rows in place as fast as a packed copy of them, without
// the copy, unless the rows are a multiple of 2 KiB apart: then the mr rows
// a kernel reads together crowd one or two sets of the L1 cache. Aᵀ is
// always packed: the "k" form in place would read a cache line per step.
func (p *sgemmProduct) packsA() bool {
	return p.transA || sgemmPolicy.packAAll || (p.n >= sgemmPolicy.packAMinN && p.lda%512 == 0)
}

// edge computes a tile narrower than nr with a kernel that writes nr
// columns, through a scratch tile.
func (p *sgemmProduct) edge(kern sgemmKernel, a *float32, as int, b *float32, bs int, c []float32, rows, cols, kb int, beta float32) {
	var tile [sgemmMaxTile]float32
	nr := p.arch.nr
	kern(a, as, b, bs, &tile[0], nr, kb, 1, 0, 0)
	for i := range rows {
		t := tile[i*nr : i*nr+cols]
		row := c[i*p.ldc : i*p.ldc+cols]
		if beta == 0 {
			for j, v := range t {
				row[j] = p.alpha * v
			}
			continue
		}
		for j, v := range t {
			row[j] = beta*row[j] + p.alpha*v
		}
	}
}

// sgemmMaxTile bounds mr·nr of the paths whose kernels are not masked.
const sgemmMaxTile = 6 * 16

// packedA returns the row stride of A's rows packed kb deep: whole cache
// lines plus one, so that the rows a kernel reads together do not share
// cache sets.
func packedA(kb int) int { return roundUp(kb, 16) + 16 }

// packA copies rows [ic, ic+mc) and depth [k0, k0+kb) of op(A) into ap. A's
// rows (not transA) go as they are, packedA(kb) apart, for the kernels' "r"
// form; Aᵀ's go as micro-panels for the "k" form: the panel of row ir at
// ap[ir·kb], kb groups of its rows' elements.
func (p *sgemmProduct) packA(ic, mc, k0, kb int, ap []float32) {
	if !p.transA {
		ld := packedA(kb)
		for i := range mc {
			copy(ap[i*ld:i*ld+kb], p.a[(ic+i)*p.lda+k0:])
		}
		return
	}
	mr := p.arch.mr
	if cp := p.arch.copyPanel; cp != nil {
		// Sixteen rows of Aᵀ at a time across the panels, so that Aᵀ is
		// read nearly in its own order.
		for r0 := 0; r0 < kb; r0 += 16 {
			n := min(16, kb-r0)
			for ir := 0; ir < mc; ir += mr {
				rows := min(mr, mc-ir)
				cp(&ap[ir*kb+r0*rows], rows, &p.a[(k0+r0)*p.lda+ic+ir], p.lda, n, rows, rows)
			}
		}
		return
	}
	for ir := 0; ir < mc; ir += mr {
		rows := min(mr, mc-ir)
		src := p.a[k0*p.lda+ic+ir:]
		d := ap[ir*kb : ir*kb+rows*kb]
		for kk := range kb {
			copy(d[kk*rows:(kk+1)*rows], src[kk*p.lda:])
		}
	}
}
