#!/usr/bin/env bash
# Compiles the kernel sources of this directory to PTX beside them
# (<module>.ptx), with NVRTC driven by the backend's own binding, for the
# virtual architecture compute_80 (A100), which the driver JIT-compiles for
# sm_86, sm_89 and sm_90 as well. The backend embeds <module>.ptx when it
# exists and loads it instead of compiling the source at run time;
# TestCommittedPTX then checks that it is what the source compiles to.
#
#   backend/cuda/kernels/gen_ptx.sh            # every module
#   ARCH=compute_90 backend/cuda/kernels/gen_ptx.sh elementwise reduce
#
# Needs Go and NVRTC: FLOCK_CUDA_LIB_DIR names its directory, or
# .ci/cuda_tools.sh installs it (CUDA 13.0). A driver older than the NVRTC
# that made the PTX refuses it, and the backend falls back to compiling the
# source.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ -z "${FLOCK_CUDA_LIB_DIR:-}" ]]; then
	FLOCK_CUDA_LIB_DIR="$("$here/../../../.ci/cuda_tools.sh")"
fi
export FLOCK_CUDA_LIB_DIR FLOCK_KERNEL_CHECK=require
export FLOCK_PTX_ARCH="${ARCH:-compute_80}"
FLOCK_PTX_MODULES="$(IFS=,; echo "$*")"
export FLOCK_PTX_MODULES
cd "$here/.."
go test -run '^TestCommittedPTX$' -count=1 -v . -args -update-ptx | grep -E '\.ptx:|FAIL|ok'
