#!/usr/bin/env bash
# Installs NVIDIA's CUDA compilers from PyPI for the test that compiles and
# assembles every kernel (backend/cuda TestKernelsCompile): NVRTC (libnvrtc,
# CUDA C++ to PTX, no GPU needed), from nvidia-cuda-nvrtc, and ptxas (PTX to
# machine code), from nvidia-cuda-nvcc. CUDA 13.0 is the release of driver
# 580 on the lent GPUs: PTX from a newer NVRTC declares an ISA version that
# driver refuses to load.
#
#   .ci/cuda_tools.sh [DIR]
#
# Installs into DIR (default .cache/cuda-<version>, ignored by git) with pip
# --target, leaving system Python alone; does nothing when DIR already holds
# this version. Prints the directory of libnvrtc, for FLOCK_CUDA_LIB_DIR
# (ptxas is in ../bin beside it, where the test looks).
set -euo pipefail
cd "$(dirname "$0")/.."

version=13.0.88
dir="${1:-.cache/cuda-$version}"
python="${PYTHON:-python3}"

if [[ "$(cat "$dir/.installed" 2>/dev/null)" != "$version" ]]; then
	rm -rf "$dir"
	"$python" -m pip install --quiet --no-deps --disable-pip-version-check --root-user-action=ignore \
		--target "$dir" "nvidia-cuda-nvrtc==$version" "nvidia-cuda-nvcc==$version" >&2
	echo "$version" >"$dir/.installed"
fi
lib="$(cd "$dir/nvidia/cu13/lib" && pwd)"
if [[ ! -e "$lib/libnvrtc.so.13" || ! -x "$lib/../bin/ptxas" ]]; then
	echo "cuda_tools.sh: $dir lacks nvidia/cu13/lib/libnvrtc.so.13 or nvidia/cu13/bin/ptxas" >&2
	exit 1
fi
echo "$lib"
