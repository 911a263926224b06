#!/usr/bin/python3
"""numpy peer of flock bench gemm: float32 C = A @ B through numpy's BLAS.

For every size MxKxN (A is MxK, B is KxN, both row-major float32 with
values in [-1, 1)) it makes one untimed product, then times products one by
one, writing into a preallocated C, until --min-time has passed and at least
three were made; the figure is the median call time, given as
GFLOP/s = 2*M*N*K / seconds. One JSON record per size goes to stdout.

Run it with Debian's /usr/bin/python3 (numpy over OpenBLAS), with
OPENBLAS_NUM_THREADS set to the thread count and OPENBLAS_CORETYPE unset so
that OpenBLAS picks its AVX-512 kernels (see BENCHMARKS.md); flock bench gemm
does both.
"""

import argparse
import ctypes
import ctypes.util
import json
import os
import statistics
import sys
import time

import numpy as np


def parse_size(s):
    parts = [int(p) for p in s.lower().split("x")]
    if len(parts) == 1:
        parts *= 3
    if len(parts) != 3 or min(parts) < 1:
        raise ValueError("size %r: want N or MxKxN" % s)
    return parts


def openblas_info():
    """Returns OpenBLAS's configuration and the core it chose, if numpy's
    BLAS is OpenBLAS."""
    for name in ("libblas.so.3", "libopenblas.so.0", ctypes.util.find_library("openblas")):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            lib.openblas_get_config.restype = ctypes.c_char_p
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return lib.openblas_get_config().decode(), lib.openblas_get_corename().decode()
        except (OSError, AttributeError):
            continue
    return "", ""


def measure(m, k, n, min_time, rng):
    a = (2 * rng.random((m, k), dtype=np.float32) - 1)
    b = (2 * rng.random((k, n), dtype=np.float32) - 1)
    c = np.empty((m, n), dtype=np.float32)
    np.matmul(a, b, out=c)
    times = []
    start = time.perf_counter()
    while len(times) < 3 or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        np.matmul(a, b, out=c)
        times.append(time.perf_counter() - t0)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="256,1024", help="comma-separated sizes N or MxKxN")
    ap.add_argument("--min-time", type=float, default=0.2, help="seconds of timed products per size")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    config, core = openblas_info()
    threads = int(os.environ.get("OPENBLAS_NUM_THREADS", "0") or 0)
    rng = np.random.default_rng(args.seed)
    for m, k, n in sizes:
        times = measure(m, k, n, args.min_time, rng)
        med = statistics.median(times)
        rec = {
            "record": "gemm", "impl": "numpy", "m": m, "k": k, "n": n, "threads": threads,
            "calls": len(times), "median_s": med, "gflops": 2.0 * m * n * k / med / 1e9,
            "version": "numpy " + np.__version__ + (", " + config if config else ""),
            "kernel": core,
        }
        print(json.dumps(rec), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
