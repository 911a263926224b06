#!/usr/bin/python3
"""PyTorch peer of flock's convolution benchmarks (BenchmarkConv2d* in
backend/cpu/bench_test.go): the same shapes, the same three passes.

For each shape it times, on float32 tensors of N(0, 1) values,
F.conv2d (forward), and aten.convolution_backward asked for the input's
gradient only (data) and for the weight's gradient only (weight), as
flock's backend computes them, and prints one line per shape: the median
milliseconds of --runs timed calls after two untimed ones, and GFLOP/s
(2·N·O·OH·OW·C/groups·KH·KW per pass).

Run it with Debian's /usr/bin/python3 (python3-torch), 2 threads and
OPENBLAS_CORETYPE unset (see BENCHMARKS.md):

    /usr/bin/python3 bench/peers/torch_conv.py --threads 2

or with the PyTorch 2 of bench/peers/setup.sh's environment, where
--compile runs each pass under torch.compile (inductor): its first call
compiles, outside the timed calls, and its seconds are reported apart.
--json prints one JSON record per shape and pass instead of the text, as
bench/peers/compare_conv.py reads them; --shapes picks shapes by a regular
expression.
"""

import argparse
import json
import re
import statistics
import time

import torch
import torch.nn.functional as F

# name, batch, in channels, side, out channels, kernel, stride, padding, groups;
# the names are those of the Go benchmarks.
SHAPES = [
    ("N8_64to64_56x56_k3_s1", 8, 64, 56, 64, 3, 1, 1, 1),
    ("N8_128to128_28x28_k3_s1", 8, 128, 28, 128, 3, 1, 1, 1),
    ("N2_3to64_224x224_k7_s2", 2, 3, 224, 64, 7, 2, 3, 1),
    ("N8_256to1024_14x14_k1_s1", 8, 256, 14, 1024, 1, 1, 0, 1),
    ("N64_64to64_32x32_k3_s1", 64, 64, 32, 64, 3, 1, 1, 1),
    ("N64_64to128_32x32_k3_s2", 64, 64, 32, 128, 3, 2, 1, 1),
    ("N64_128to128_16x16_k3_s1", 64, 128, 16, 128, 3, 1, 1, 1),
    ("N64_256to256_8x8_k3_s1", 64, 256, 8, 256, 3, 1, 1, 1),
    ("N64_512to512_4x4_k3_s1", 64, 512, 4, 512, 3, 1, 1, 1),
    ("N64_64to64_32x32_k3_s1_g64", 64, 64, 32, 64, 3, 1, 1, 64),
    ("N64_256to256_16x16_k3_s2_g256", 64, 256, 16, 256, 3, 2, 1, 256),
]


def median_ms(fn, runs):
    fn()
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--compile", action="store_true", help="each pass under torch.compile (PyTorch 2)")
    ap.add_argument("--json", action="store_true", help="JSON records instead of text")
    ap.add_argument("--shapes", default="", help="regular expression choosing shapes by name")
    args = ap.parse_args()
    if args.compile and not hasattr(torch, "compile"):
        raise SystemExit(f"torch_conv: --compile needs PyTorch 2, not {torch.__version__}")
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    if not args.json:
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    for name, n, c, hw, o, k, s, p, g in SHAPES:
        if not re.search(args.shapes, name):
            continue
        x = torch.randn(n, c, hw, hw)
        w = torch.randn(o, c // g, k, k)
        y = F.conv2d(x, w, None, s, p, 1, g)
        dy = torch.randn_like(y)
        flops = 2 * n * o * (c // g) * k * k * y.shape[2] * y.shape[3]

        def backward(mask):
            return lambda: torch.ops.aten.convolution_backward(
                dy, x, w, None, [s, s], [p, p], [1, 1], False, [0, 0], g, mask)

        passes = [
            ("forward", lambda: F.conv2d(x, w, None, s, p, 1, g)),
            ("data", backward([True, False, False])),
            ("weight", backward([False, True, False])),
        ]
        cells = []
        for label, fn in passes:
            compile_s = None
            if args.compile:
                torch._dynamo.reset()
                fn = torch.compile(fn)
                start = time.perf_counter()
                fn()
                compile_s = time.perf_counter() - start
            ms = median_ms(fn, args.runs)
            if args.json:
                rec = {"shape": name, "pass": label, "ms": ms, "gflops": flops / ms / 1e6,
                       "runs": args.runs, "threads": torch.get_num_threads(),
                       "version": torch.__version__, "compile": args.compile}
                if compile_s is not None:
                    rec["compile_s"] = compile_s
                print(json.dumps(rec), flush=True)
            cells.append(f"{label} {ms:8.2f} ms {flops / ms / 1e6:7.1f} GFLOP/s")
        if not args.json:
            print(f"{name:28s} " + "  ".join(cells))


if __name__ == "__main__":
    main()
