//go:build ignore

// sgemm_gen writes sgemm_amd64.s and sgemm_kernels_amd64.go, the register-
// blocked micro-kernels of the float32 matrix product and their helpers:
//
//	go run sgemm_gen.go
//
// A kernel computes one tile C[0:mr, 0:nr] = α·Σₖ a(i, k)·b(k, j) + β·C for
// k < kc. It reads a in one of two forms,
//
//	"k": a(i, k) = a[k·as + i]  (a packed micro-panel of Aᵀ, as = mr)
//	"r": a(i, k) = a[i·as + k]  (rows of A, in place or copied)
//
// and b in one of two layouts,
//
//	"p": b(k, j) = b[k·nr + j]  (a packed micro-panel, zero-padded)
//	"s": b(k, j) = b[k·bs + j]  (B in place, columns past the mask not read)
//
// The AVX-512 kernels keep a tile of up to 14×32 in 28 zmm accumulators (two
// vectors per row), load the two vectors of b once per k and broadcast each
// a(i, k) into a register, so that a step is 2+mr loads for 2·mr FMAs; the
// k loop is unrolled four times and prefetches b (and a in the "k" form)
// eight steps ahead. The AVX2 kernels do the same with a 6×16 tile in 12 ymm
// accumulators, for packed b only. With β = 0 the kernels do not read C. The
// AVX-512 kernels mask the columns of C (and of b in place) beyond the tile's
// width, bit j of mask for column j; the AVX2 kernels always write 16
// columns, and their caller gives them a scratch tile at the edge.
//
// It also writes the AVX-512 kernels of the direct convolution
// (conv_direct.go; see directKernel), which share the tile, the "r" form
// of A and the step, with B read in place under per-tap masks.
package main

import (
	"bytes"
	"fmt"
	"go/format"
	"log"
	"os"
	"strings"
)

type isa struct {
	name   string // AVX512 or AVX2
	mrMax  int
	vecs   int    // vectors per row of the tile
	vbytes int    // bytes per vector
	reg    string // Z or Y
	masked bool
}

var isas = []isa{
	{name: "AVX512", mrMax: 14, vecs: 2, vbytes: 64, reg: "Z", masked: true},
	{name: "AVX2", mrMax: 6, vecs: 2, vbytes: 32, reg: "Y", masked: false},
}

const unroll = 4

type gen struct{ b bytes.Buffer }

func (g *gen) p(format string, args ...any) { fmt.Fprintf(&g.b, format+"\n", args...) }

func (s isa) nr() int { return s.vecs * s.vbytes / 4 }

func (s isa) acc(row, v int) string { return fmt.Sprintf("%s%d", s.reg, row*s.vecs+v) }

// bvec is the register holding vector v of b's current row; bcast the one
// holding the broadcast a(i, k) (two, alternating, to shorten dependences).
func (s isa) bvec(v int) string {
	if s.name == "AVX512" {
		return fmt.Sprintf("Z%d", 28+v)
	}
	return fmt.Sprintf("Y%d", 12+v)
}

func (s isa) bcast(i int) string {
	if s.name == "AVX512" {
		return fmt.Sprintf("Z%d", 30+i%2)
	}
	return fmt.Sprintf("Y%d", 14+i%2)
}

func kernelName(s isa, k kind, mr int) string {
	return fmt.Sprintf("sgemm%s%s%s%d", s.name, k.a, k.b, mr)
}

// kinds returns the kernel layouts of an instruction set: B in place needs
// masked loads at the right edge, which AVX2 lacks.
func (s isa) kinds() []kind {
	ks := []kind{{"k", "p"}, {"r", "p"}}
	if s.masked {
		ks = append(ks, kind{"k", "s"}, kind{"r", "s"})
	}
	return ks
}

// rowAddr is the address of a(i, k) in the "r" form at byte displacement
// disp: rows are split five to a base register R8, R9, R10 and reached with
// the row stride DX and 3·DX in R11.
func rowAddr(i, disp int) string {
	base := []string{"R8", "R9", "R10"}[i/5]
	switch i % 5 {
	case 0:
		return fmt.Sprintf("%d(%s)", disp, base)
	case 1:
		return fmt.Sprintf("%d(%s)(DX*1)", disp, base)
	case 2:
		return fmt.Sprintf("%d(%s)(DX*2)", disp, base)
	case 3:
		return fmt.Sprintf("%d(%s)(R11*1)", disp, base)
	default:
		return fmt.Sprintf("%d(%s)(DX*4)", disp, base)
	}
}

// zeroAcc clears the accumulators of an mr-row tile.
func (g *gen) zeroAcc(s isa, mr int) {
	for i := range mr {
		for v := range s.vecs {
			r := s.acc(i, v)
			if s.name == "AVX512" {
				g.p("\tVPXORD %s, %s, %s", r, r, r)
			} else {
				g.p("\tVXORPS %s, %s, %s", r, r, r)
			}
		}
	}
}

// rowBases sets R9 and R10, the base registers of rows 5–9 and 10–13 of
// the "r" form (see rowAddr), from R8 and the row stride DX, as far as mr
// rows need them.
func (g *gen) rowBases(mr int) {
	if mr > 5 {
		g.p("\tLEAQ (R8)(DX*4), R9")
		g.p("\tADDQ DX, R9")
	}
	if mr > 10 {
		g.p("\tLEAQ (R9)(DX*4), R10")
		g.p("\tADDQ DX, R10")
	}
}

// step emits one k of the tile: load b's row u of the unrolled block,
// broadcast a(i, k) and accumulate.
func (g *gen) step(s isa, k kind, mr, u int) {
	for v := range s.vecs {
		if k.b == "p" {
			g.p("\tVMOVUPS %d(BX), %s", u*s.nr()*4+v*s.vbytes, s.bvec(v))
		} else {
			g.p("\tVMOVUPS.Z %d(BX), K%d, %s", v*s.vbytes, v+1, s.bvec(v))
		}
	}
	if k.b == "s" {
		g.p("\tADDQ R14, BX")
	}
	g.rowFMAs(s, mr, func(i int) string {
		if k.a == "k" {
			return fmt.Sprintf("%d(AX)", 4*i)
		}
		return rowAddr(i, 4*u)
	})
	if k.a == "k" {
		g.p("\tADDQ DX, AX")
	}
}

// kind is a kernel's layout of A ("k" or "r" form) and of B: "p" a packed
// panel (rows of nr floats, one after another), "s" B in place (rows of
// at least the tile's width, bs floats apart, read under the column mask).
type kind struct{ a, b string }

func (g *gen) kernel(s isa, k kind, mr int) {
	name := kernelName(s, k, mr)
	nrb := s.nr() * 4
	g.p("// func %s(a *float32, as int, b *float32, bs int, c *float32, ldc int, kc int, alpha, beta float32, mask uint32)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-68", name)
	g.p("\tMOVQ a+0(FP), AX")
	g.p("\tMOVQ as+8(FP), DX")
	g.p("\tSHLQ $2, DX")
	g.p("\tMOVQ b+16(FP), BX")
	if k.b == "s" {
		g.p("\tMOVQ bs+24(FP), R14")
		g.p("\tSHLQ $2, R14")
	}
	g.p("\tMOVQ c+32(FP), DI")
	g.p("\tMOVQ ldc+40(FP), SI")
	g.p("\tSHLQ $2, SI")
	g.p("\tMOVQ kc+48(FP), CX")
	if s.masked {
		g.p("\tMOVL mask+64(FP), R13")
		g.p("\tKMOVW R13, K1")
		g.p("\tSHRL $16, R13")
		g.p("\tKMOVW R13, K2")
	}
	g.zeroAcc(s, mr)
	if k.a == "r" {
		g.p("\tMOVQ AX, R8")
		g.p("\tLEAQ (DX)(DX*2), R11")
		g.rowBases(mr)
	}
	// Fetch the tile of C while the products run.
	g.p("\tMOVQ DI, R12")
	for i := range mr {
		for off := 0; off < s.vecs*s.vbytes; off += 64 {
			g.p("\tPREFETCHT0 %d(R12)", off)
		}
		if i < mr-1 {
			g.p("\tADDQ SI, R12")
		}
	}
	g.p("\tMOVQ CX, R13")
	g.p("\tSHRQ $%d, R13", 2)
	g.p("\tJZ %s_tail", name)
	g.p("%s_loop:", name)
	for u := range unroll {
		if k.a == "k" {
			g.p("\tPREFETCHT0 (AX)(DX*8)")
		}
		for off := 0; off < nrb; off += 64 {
			if k.b == "p" {
				g.p("\tPREFETCHT0 %d(BX)", u*nrb+off+8*nrb)
			} else {
				g.p("\tPREFETCHT0 %d(BX)(R14*8)", off)
			}
		}
		g.step(s, k, mr, u)
	}
	if k.b == "p" {
		g.p("\tADDQ $%d, BX", unroll*nrb)
	}
	if k.a == "r" {
		for _, r := range []string{"R8", "R9", "R10"}[:(mr+4)/5] {
			g.p("\tADDQ $%d, %s", 4*unroll, r)
		}
	}
	g.p("\tDECQ R13")
	g.p("\tJNZ %s_loop", name)
	g.p("%s_tail:", name)
	g.p("\tANDQ $%d, CX", unroll-1)
	g.p("\tJZ %s_store", name)
	g.p("%s_tailloop:", name)
	g.step(s, k, mr, 0)
	if k.b == "p" {
		g.p("\tADDQ $%d, BX", nrb)
	}
	if k.a == "r" {
		for _, r := range []string{"R8", "R9", "R10"}[:(mr+4)/5] {
			g.p("\tADDQ $4, %s", r)
		}
	}
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_tailloop", name)
	g.p("%s_store:", name)
	alpha, beta, tmp := s.bvec(0), s.bvec(1), s.bcast(0)
	g.p("\tVBROADCASTSS alpha+56(FP), %s", alpha)
	g.p("\tVBROADCASTSS beta+60(FP), %s", beta)
	g.p("\tMOVL beta+60(FP), R13")
	g.p("\tANDL $0x7fffffff, R13")
	g.p("\tJZ %s_beta0", name)
	mask := func(v int) string {
		if !s.masked {
			return ""
		}
		return fmt.Sprintf("K%d, ", v+1)
	}
	for i := range mr {
		for v := range s.vecs {
			acc := s.acc(i, v)
			g.p("\tVMULPS %s, %s, %s", alpha, acc, acc)
			if s.masked {
				g.p("\tVMOVUPS.Z %d(DI), %s%s", v*s.vbytes, mask(v), tmp)
			} else {
				g.p("\tVMOVUPS %d(DI), %s", v*s.vbytes, tmp)
			}
			g.p("\tVFMADD231PS %s, %s, %s", beta, tmp, acc)
			g.p("\tVMOVUPS %s, %s%d(DI)", acc, mask(v), v*s.vbytes)
		}
		if i < mr-1 {
			g.p("\tADDQ SI, DI")
		}
	}
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("%s_beta0:", name)
	for i := range mr {
		for v := range s.vecs {
			acc := s.acc(i, v)
			g.p("\tVMULPS %s, %s, %s", alpha, acc, acc)
			g.p("\tVMOVUPS %s, %s%d(DI)", acc, mask(v), v*s.vbytes)
		}
		if i < mr-1 {
			g.p("\tADDQ SI, DI")
		}
	}
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// directKernel emits convDirectAVX512_<mr>, the kernel of the direct
// convolution (conv_direct.go): an mr×32 tile of y, whose two 16-column
// vectors are runs of output positions each in its own sample plane, summed
// over a table of taps. Tap t of the table gives the byte offset of A's
// column block from a (a in the "r" form, the tap's depth columns in a
// row), the byte offsets from b of the two vectors' first input positions,
// and the masks of their valid lanes; the depth steps of a tap move both
// input pointers on by bs floats (a channel plane). The tile is stored,
// under mask, to c0 and c1 (rows ldc floats apart), without reading them.
func (g *gen) directKernel(mr int) {
	s := isas[0]
	name := fmt.Sprintf("convDirectAVX512_%d", mr)
	g.p("// func %s(a *float32, as int, b *float32, bs int, taps *convTap, ntaps int, depth int, c0, c1 *float32, ldc int, mask uint32)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-84", name)
	g.p("\tMOVQ a+0(FP), DI")
	g.p("\tMOVQ as+8(FP), DX")
	g.p("\tSHLQ $2, DX")
	g.p("\tLEAQ (DX)(DX*2), R11")
	g.p("\tMOVQ b+16(FP), AX")
	g.p("\tMOVQ bs+24(FP), R14")
	g.p("\tSHLQ $2, R14")
	g.p("\tMOVQ taps+32(FP), SI")
	g.p("\tMOVQ ntaps+40(FP), R13")
	g.zeroAcc(s, mr)
	g.p("\tTESTQ R13, R13")
	g.p("\tJZ %s_store", name)
	g.p("%s_tap:", name)
	g.p("\tMOVQ 0(SI), R8")
	g.p("\tADDQ DI, R8")
	g.rowBases(mr)
	g.p("\tMOVQ 8(SI), BX")
	g.p("\tADDQ AX, BX")
	g.p("\tMOVQ 16(SI), R12")
	g.p("\tADDQ AX, R12")
	g.p("\tKMOVW 24(SI), K3")
	g.p("\tKMOVW 28(SI), K4")
	g.p("\tMOVQ depth+48(FP), CX")
	g.p("\tSHRQ $2, CX")
	g.p("\tJZ %s_tail", name)
	bases := []string{"R8", "R9", "R10"}[:(mr+4)/5]
	g.p("%s_loop:", name)
	for u := range unroll {
		g.p("\tPREFETCHT0 (BX)(R14*8)")
		g.p("\tPREFETCHT0 (R12)(R14*8)")
		g.directStep(s, mr, u)
	}
	for _, r := range bases {
		g.p("\tADDQ $%d, %s", 4*unroll, r)
	}
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_loop", name)
	g.p("%s_tail:", name)
	g.p("\tMOVQ depth+48(FP), CX")
	g.p("\tANDQ $%d, CX", unroll-1)
	g.p("\tJZ %s_next", name)
	g.p("%s_tailloop:", name)
	g.directStep(s, mr, 0)
	for _, r := range bases {
		g.p("\tADDQ $4, %s", r)
	}
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_tailloop", name)
	g.p("%s_next:", name)
	g.p("\tADDQ $32, SI")
	g.p("\tDECQ R13")
	g.p("\tJNZ %s_tap", name)
	g.p("%s_store:", name)
	g.p("\tMOVL mask+80(FP), R13")
	g.p("\tKMOVW R13, K1")
	g.p("\tSHRL $16, R13")
	g.p("\tKMOVW R13, K2")
	g.p("\tMOVQ c0+56(FP), DI")
	g.p("\tMOVQ c1+64(FP), SI")
	g.p("\tMOVQ ldc+72(FP), DX")
	g.p("\tSHLQ $2, DX")
	for i := range mr {
		g.p("\tVMOVUPS %s, K1, (DI)", s.acc(i, 0))
		g.p("\tVMOVUPS %s, K2, (SI)", s.acc(i, 1))
		if i < mr-1 {
			g.p("\tADDQ DX, DI")
			g.p("\tADDQ DX, SI")
		}
	}
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// directStep emits one depth step of the direct kernel: the two input
// vectors under their masks, then the broadcasts and FMAs of step u of the
// unrolled block.
func (g *gen) directStep(s isa, mr, u int) {
	g.p("\tVMOVUPS.Z (BX), K3, %s", s.bvec(0))
	g.p("\tVMOVUPS.Z (R12), K4, %s", s.bvec(1))
	g.p("\tADDQ R14, BX")
	g.p("\tADDQ R14, R12")
	g.rowFMAs(s, mr, func(i int) string { return rowAddr(i, 4*u) })
}

// rowFMAs emits the products of one step with b's row loaded: for each of
// mr rows, a(i, k) broadcast from src(i) and its FMAs into the row's
// accumulators.
func (g *gen) rowFMAs(s isa, mr int, src func(i int) string) {
	for i := range mr {
		g.p("\tVBROADCASTSS %s, %s", src(i), s.bcast(i))
		for v := range s.vecs {
			g.p("\tVFMADD231PS %s, %s, %s", s.bvec(v), s.bcast(i), s.acc(i, v))
		}
	}
}

// peak emits a loop of independent FMAs on registers, which measures the
// core's floating-point peak: n iterations of 24 vector FMAs.
func (g *gen) peak(s isa) {
	name := "sgemmPeak" + s.name
	regs := 24
	if s.name == "AVX2" {
		regs = 12
	}
	g.p("// func %s(n int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-8", name)
	g.p("\tMOVQ n+0(FP), CX")
	for i := range regs {
		r := fmt.Sprintf("%s%d", s.reg, i)
		if s.name == "AVX512" {
			g.p("\tVPXORD %s, %s, %s", r, r, r)
		} else {
			g.p("\tVXORPS %s, %s, %s", r, r, r)
		}
	}
	g.p("\tTESTQ CX, CX")
	g.p("\tJZ %s_done", name)
	a, b := s.reg+"30", s.reg+"31"
	if s.name == "AVX2" {
		a, b = "Y14", "Y15"
	}
	for _, r := range []string{a, b} {
		if s.name == "AVX512" {
			g.p("\tVPXORD %s, %s, %s", r, r, r)
		} else {
			g.p("\tVXORPS %s, %s, %s", r, r, r)
		}
	}
	g.p("%s_loop:", name)
	for range 24 / regs {
		for i := range regs {
			g.p("\tVFMADD231PS %s, %s, %s%d", a, b, s.reg, i)
		}
	}
	g.p("\tDECQ CX")
	g.p("\tJNZ %s_loop", name)
	g.p("%s_done:", name)
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// transpose emits sgemmTransposeAVX512(dst, ldd, src, lds, rows, cols),
// which writes dst[c·ldd + r] = src[r·lds + c] for r < rows ≤ 16 and
// c < cols ≤ 16: a 16×16 transpose in four rounds of shuffles (pairs of
// floats, pairs of doubles, then 128-bit lanes twice). Rows past rows are
// loaded from the last row and never stored; columns past cols are neither
// loaded nor stored.
func (g *gen) transpose() {
	const name = "sgemmTransposeAVX512"
	z := func(i int) string { return fmt.Sprintf("Z%d", i) }
	// Intel operand order (dst, a, b) written in Go's reversed order.
	op := func(ins string, dst, a, b int) { g.p("\t%s %s, %s, %s", ins, z(b), z(a), z(dst)) }
	shuf := func(dst, a, b int, imm string) { g.p("\tVSHUFF32X4 $%s, %s, %s, %s", imm, z(b), z(a), z(dst)) }
	g.p("// func %s(dst *float32, ldd int, src *float32, lds int, rows, cols int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	g.p("\tMOVQ dst+0(FP), DI")
	g.p("\tMOVQ ldd+8(FP), DX")
	g.p("\tSHLQ $2, DX")
	g.p("\tMOVQ src+16(FP), SI")
	g.p("\tMOVQ lds+24(FP), BX")
	g.p("\tSHLQ $2, BX")
	// K2: the first rows lanes; K1: the first cols lanes.
	g.p("\tMOVQ rows+32(FP), CX")
	g.p("\tMOVQ CX, R10")
	g.p("\tMOVL $1, AX")
	g.p("\tSHLL CX, AX")
	g.p("\tDECL AX")
	g.p("\tKMOVW AX, K2")
	g.p("\tMOVQ cols+40(FP), CX")
	g.p("\tMOVL $1, AX")
	g.p("\tSHLL CX, AX")
	g.p("\tDECL AX")
	g.p("\tKMOVW AX, K1")
	for r := range 16 {
		g.p("\tVMOVUPS.Z (SI), K1, %s", z(r))
		if r < 15 {
			g.p("\tLEAQ (SI)(BX*1), R9")
			g.p("\tDECQ R10")
			g.p("\tCMPQ R10, $0")
			g.p("\tCMOVQGT R9, SI")
		}
	}
	for i := range 8 {
		op("VUNPCKLPS", 16+2*i, 2*i, 2*i+1)
		op("VUNPCKHPS", 16+2*i+1, 2*i, 2*i+1)
	}
	for i := range 4 {
		t := 16 + 4*i
		op("VUNPCKLPD", 4*i, t, t+2)
		op("VUNPCKHPD", 4*i+1, t, t+2)
		op("VUNPCKLPD", 4*i+2, t+1, t+3)
		op("VUNPCKHPD", 4*i+3, t+1, t+3)
	}
	for j := range 4 {
		v := 16 + 4*j
		shuf(v, j, 4+j, "0x88")
		shuf(v+1, j, 4+j, "0xDD")
		shuf(v+2, 8+j, 12+j, "0x88")
		shuf(v+3, 8+j, 12+j, "0xDD")
	}
	for j := range 4 {
		v := 16 + 4*j
		shuf(j, v, v+2, "0x88")
		shuf(8+j, v, v+2, "0xDD")
		shuf(4+j, v+1, v+3, "0x88")
		shuf(12+j, v+1, v+3, "0xDD")
	}
	for c := range 16 {
		g.p("\tVMOVUPS %s, K2, (DI)", z(c))
		if c < 15 {
			g.p("\tCMPQ CX, $%d", c+1)
			g.p("\tJLE %s_done", name)
			g.p("\tADDQ DX, DI")
		}
	}
	g.p("%s_done:", name)
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

// copyPanel emits sgemmCopyPanelAVX512(dst, ldd, src, lds, rows, cols,
// width), which copies rows rows of cols ≤ 32 floats from src to dst (rows
// lds and ldd floats apart), writing width ≥ cols floats of each row of dst,
// zero past cols: a micro-panel of B (width 32) or of Aᵀ (width cols)
// packed.
func (g *gen) copyPanel() {
	const name = "sgemmCopyPanelAVX512"
	g.p("// func %s(dst *float32, ldd int, src *float32, lds int, rows, cols, width int)", name)
	g.p("TEXT ·%s(SB), NOSPLIT, $0-56", name)
	g.p("\tMOVQ dst+0(FP), DI")
	g.p("\tMOVQ ldd+8(FP), R8")
	g.p("\tSHLQ $2, R8")
	g.p("\tMOVQ src+16(FP), SI")
	g.p("\tMOVQ lds+24(FP), BX")
	g.p("\tSHLQ $2, BX")
	g.p("\tMOVQ rows+32(FP), DX")
	// K1, K2: the first cols floats of each half; K3, K4: the first width.
	g.p("\tMOVQ cols+40(FP), CX")
	g.p("\tMOVQ $1, AX")
	g.p("\tSHLQ CX, AX")
	g.p("\tDECQ AX")
	g.p("\tKMOVW AX, K1")
	g.p("\tSHRQ $16, AX")
	g.p("\tKMOVW AX, K2")
	g.p("\tMOVQ width+48(FP), CX")
	g.p("\tMOVQ $1, AX")
	g.p("\tSHLQ CX, AX")
	g.p("\tDECQ AX")
	g.p("\tKMOVW AX, K3")
	g.p("\tSHRQ $16, AX")
	g.p("\tKMOVW AX, K4")
	g.p("\tTESTQ DX, DX")
	g.p("\tJZ %s_done", name)
	g.p("%s_loop:", name)
	g.p("\tVMOVUPS.Z (SI), K1, Z0")
	g.p("\tVMOVUPS.Z 64(SI), K2, Z1")
	g.p("\tVMOVUPS Z0, K3, (DI)")
	g.p("\tVMOVUPS Z1, K4, 64(DI)")
	g.p("\tADDQ BX, SI")
	g.p("\tADDQ R8, DI")
	g.p("\tDECQ DX")
	g.p("\tJNZ %s_loop", name)
	g.p("%s_done:", name)
	g.p("\tVZEROUPPER")
	g.p("\tRET")
	g.p("")
}

func main() {
	var asm gen
	asm.p("// Code generated by sgemm_gen.go; DO NOT EDIT.")
	asm.p("")
	asm.p("//go:build !purego")
	asm.p("")
	asm.p("#include \"textflag.h\"")
	asm.p("")
	var decl gen
	decl.p("// Code generated by sgemm_gen.go; DO NOT EDIT.")
	decl.p("")
	decl.p("//go:build !purego")
	decl.p("")
	decl.p("package cpu")
	decl.p("")
	for _, s := range isas {
		for _, k := range s.kinds() {
			for mr := 1; mr <= s.mrMax; mr++ {
				asm.kernel(s, k, mr)
				decl.p("//go:noescape")
				decl.p("func %s(a *float32, as int, b *float32, bs int, c *float32, ldc int, kc int, alpha, beta float32, mask uint32)", kernelName(s, k, mr))
				decl.p("")
			}
		}
		asm.peak(s)
		decl.p("func sgemmPeak%s(n int)", s.name)
		decl.p("")
		if s.name == "AVX512" {
			asm.transpose()
			decl.p("//go:noescape")
			decl.p("func sgemmTransposeAVX512(dst *float32, ldd int, src *float32, lds int, rows, cols int)")
			decl.p("")
			asm.copyPanel()
			decl.p("//go:noescape")
			decl.p("func sgemmCopyPanelAVX512(dst *float32, ldd int, src *float32, lds int, rows, cols, width int)")
			decl.p("")
			var names []string
			for mr := 1; mr <= s.mrMax; mr++ {
				asm.directKernel(mr)
				name := fmt.Sprintf("convDirectAVX512_%d", mr)
				names = append(names, name)
				decl.p("//go:noescape")
				decl.p("func %s(a *float32, as int, b *float32, bs int, taps *convTap, ntaps int, depth int, c0, c1 *float32, ldc int, mask uint32)", name)
				decl.p("")
			}
			decl.p("var convDirectAVX512Kernels = [...]convDirectKernel{nil, %s}", strings.Join(names, ", "))
			decl.p("")
		}
	}
	for _, s := range isas {
		for _, k := range s.kinds() {
			var names []string
			for mr := 1; mr <= s.mrMax; mr++ {
				names = append(names, kernelName(s, k, mr))
			}
			decl.p("var sgemm%s%sKernels = [...]sgemmKernel{nil, %s}", s.name, strings.ToUpper(k.a+k.b), strings.Join(names, ", "))
			decl.p("")
		}
	}
	src, err := format.Source(decl.b.Bytes())
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("sgemm_kernels_amd64.go", src, 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("sgemm_amd64.s", asm.b.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
