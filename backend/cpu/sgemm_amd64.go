//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

// sgemmArchs returns the float32 product's paths this CPU supports, fastest
// first. AVX-512 needs only AVX512F, and the operating system's support of
// the zmm and mask state, which x/sys/cpu checks.
//
// The blocking, for cores with 48 KiB of L1d and 1–2 MiB of L2 (Intel
// Sapphire Rapids and later, AMD Zen 4/5):
//
//   - AVX-512, 14×32 tile: 28 zmm accumulators, 2 for the row of B, 2 for
//     the broadcasts of A, all 32 registers; a step is 2 vector loads and 14
//     broadcasts for 28 FMAs, 184 bytes for 14 cycles of two FMA pipes, which
//     L2 sustains. kc = 512 and mc = 112: a B micro-panel (64 KiB) and the A
//     block (112 rows of 512 floats, about 230 KiB packed) stay in L2 while
//     the block's 8 A micro-panels meet every B micro-panel; the deep kc
//     halves the loads and stores of C and the kernel calls of kc = 256. On
//     the 2-core Xeon of BENCHMARKS.md (1 thread, 1024³, 2048³ and the conv
//     shapes) kc = 512–1024 with mc = 56–112 measured 3–10% above kc = 256
//     with mc = 168, which keeps a B micro-panel in L1.
//   - AVX2, 6×16 tile: 12 ymm accumulators, 2 for B, 2 for broadcasts, all
//     16 registers. kc = 256: a B micro-panel is 16 KiB, within any AVX2
//     core's 32 KiB L1; mc = 96: an A block is about 100 KiB, within any L2
//     of 256 KiB or more.
//
// op(B) is packed whole (up to 16 MiB, in slabs beyond), so that it is read
// from L3 or memory once per block of rows.
func sgemmArchs() []*sgemmArch {
	var archs []*sgemmArch
	if cpu.X86.HasAVX512F {
		archs = append(archs, &sgemmArch{
			name: "avx512", mr: 14, nr: 32, masked: true,
			kern: [2][2][]sgemmKernel{
				{sgemmAVX512KPKernels[:], sgemmAVX512RPKernels[:]},
				{sgemmAVX512KSKernels[:], sgemmAVX512RSKernels[:]},
			},
			kc:        512,
			mc:        112,
			transpose: sgemmTransposeAVX512,
			copyPanel: sgemmCopyPanelAVX512,
			peak:      sgemmPeakAVX512,
			peakFlops: 24 * 16 * 2,
		})
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		archs = append(archs, &sgemmArch{
			name: "avx2", mr: 6, nr: 16,
			kern:      [2][2][]sgemmKernel{{sgemmAVX2KPKernels[:], sgemmAVX2RPKernels[:]}},
			kc:        256,
			mc:        96,
			peak:      sgemmPeakAVX2,
			peakFlops: 24 * 8 * 2,
		})
	}
	return archs
}
