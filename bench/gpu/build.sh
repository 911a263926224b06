#!/usr/bin/env bash
# Builds, on a machine with Go (no GPU or CUDA needed), what bench/gpu/run.sh
# runs on a GPU machine that has no Go, into DIR (default bin/gpu, ignored
# by git; about 40 MB):
#
#   cudatest                   go test -c ./backend/cuda (suite, training, benchmarks)
#   nccltest                   go test -c ./dist/nccl (communicator, data-parallel training)
#   flock                      go build ./cmd/flock
#   fashion-mnist-test.beton   the 10000 test images, for flock train --device cuda
#
#   bench/gpu/build.sh [DIR]
#
# The binaries need no cgo: the CUDA libraries are opened at run time. They
# are linked against the C library (purego needs dlopen), which every Linux
# with the NVIDIA driver has.
set -euo pipefail
cd "$(dirname "$0")/../.."

dir="${1:-bin/gpu}"
mkdir -p "$dir"
export CGO_ENABLED=0
flags=(-ldflags=-s\ -w)
go test -c "${flags[@]}" -o "$dir/cudatest" ./backend/cuda
go test -c "${flags[@]}" -o "$dir/nccltest" ./dist/nccl
go build "${flags[@]}" -o "$dir/flock" ./cmd/flock
if [[ ! -s "$dir/fashion-mnist-test.beton" ]]; then
	"$dir/flock" convert fashion-mnist "$dir/fashion-mnist-test.beton" --split test ||
		"$dir/flock" convert fashion-mnist "$dir/fashion-mnist-test.beton" --split test --download
fi
du -sh "$dir"
