#!/usr/bin/env bash
# Compiles the kernel sources of this directory to PTX with nvcc, for the
# virtual architecture compute_80 (A100), which the driver JIT-compiles for
# sm_86 (RTX 3090), sm_89 and sm_90 (H100) as well. The backend embeds
# <module>.ptx when it exists and loads it instead of compiling the source
# with NVRTC at run time.
#
#   backend/cuda/kernels/gen_ptx.sh            # every module
#   ARCH=compute_90 backend/cuda/kernels/gen_ptx.sh elementwise reduce
#
# Needs nvcc (CUDA 11.8 or later) on PATH or in /usr/local/cuda/bin.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
arch="${ARCH:-compute_80}"
nvcc="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
if [[ ! -x "$nvcc" ]]; then
	echo "gen_ptx.sh: nvcc not found (set NVCC or put it on PATH)" >&2
	exit 1
fi

modules=("$@")
if [[ ${#modules[@]} -eq 0 ]]; then
	for f in "$here"/*.cu; do
		m="$(basename "$f" .cu)"
		modules+=("$m")
	done
fi

"$nvcc" --version | tail -n 1
for m in "${modules[@]}"; do
	src="$here/$m.cu"
	[[ -f "$src" ]] || { echo "gen_ptx.sh: no $src" >&2; exit 1; }
	# The same dialect as NVRTC: C++14, no toolkit headers, IEEE division
	# and square roots, contraction of multiply-adds allowed.
	"$nvcc" -ptx -arch="$arch" -std=c++14 -I"$here" -o "$here/$m.ptx.tmp" "$src"
	mv "$here/$m.ptx.tmp" "$here/$m.ptx"
	echo "$m.ptx: $(grep -c '\.entry' "$here/$m.ptx") kernels"
done
