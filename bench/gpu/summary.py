#!/usr/bin/env python3
"""Table of flock's GPU measurements beside PyTorch's, from the logs that
bench/gpu/run.sh writes in OUT; writes OUT/results.json with every figure.

    python3 bench/gpu/summary.py OUT
"""

import json
import os
import re
import statistics
import sys


def bench_lines(out, name):
    """Parses `go test -bench` lines into {benchmark: {metric: [values]}}."""
    res = {}
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return res
    for line in open(path):
        if not line.startswith("Benchmark"):
            continue
        f = line.split()
        if len(f) < 4 or "/" not in f[0]:
            continue  # a benchmark's name alone, before its sub-benchmarks
        key = re.sub(r"-\d+$", "", f[0])
        m = res.setdefault(key, {})
        for i in range(2, len(f) - 1, 2):
            try:
                m.setdefault(f[i + 1], []).append(float(f[i]))
            except ValueError:
                pass
    return res


def jsonl(out, name):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return []
    rows = []
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            rows.append(json.loads(line))
    return rows


def med(xs):
    return statistics.median(xs) if xs else None


def main():
    out = sys.argv[1]
    kern = bench_lines(out, "kernels.log")
    steps = bench_lines(out, "steps_flock.log")
    tmm = {r["bench"]: r["tflops"] for r in jsonl(out, "torch_matmul.log") if "bench" in r}
    tsteps = {}
    for r in jsonl(out, "steps_torch.log"):
        if "model" in r:
            tsteps.setdefault(r["model"], []).append(r["images_per_sec"])

    results = {"kernels": kern, "steps_flock": steps, "torch_matmul": tmm, "torch_steps": tsteps, "checks": []}
    rows = []

    def row(what, flock, peer, unit, target):
        ratio = flock / peer if flock and peer else None
        met = None if ratio is None else ratio >= target
        rows.append((what, flock, peer, unit, ratio, target, met))
        results["checks"].append(
            {"what": what, "flock": flock, "peer": peer, "unit": unit, "ratio": ratio, "target": target, "met": met}
        )

    copy = med(kern.get("BenchmarkMemory/copy_d2d", {}).get("MB/s", []))
    for k, m in sorted(kern.items()):
        if k.startswith("BenchmarkMemory/") and not k.endswith("copy_d2d"):
            bw = med(m.get("MB/s", []))
            row(k.split("/", 1)[1] + " (vs D2D copy)", bw and bw / 1e3, copy and copy / 1e3, "GB/s", 0.8)
    for k, m in sorted(kern.items()):
        if k.startswith("BenchmarkMatMul/"):
            mode, n = k.split("/", 1)[1].rsplit("_", 1)
            tkey = {"fp32": "fp32", "tf32": "tf32", "bf16_autocast": "bf16"}.get(mode, mode)
            row(f"matmul {mode} {n}³ (vs torch.matmul)", med(m.get("TFLOP/s", [])), tmm.get(f"matmul_{tkey}_{n}"), "TFLOP/s", 0.95)
    for k, m in sorted(steps.items()):
        name = k.split("/", 1)[1].rsplit("_b", 1)[0]
        row(f"train step {name} bf16 (vs PyTorch eager)", med(m.get("img/s", [])), med(tsteps.get(name, [])), "img/s", 0.8)

    def fmt(v):
        return "—" if v is None else f"{v:,.1f}"

    print(f"{'measurement':46s} {'flock':>10s} {'peer':>10s} {'unit':>8s} {'ratio':>6s} {'target':>6s}  met")
    for what, f, p, unit, ratio, target, met in rows:
        r = "—" if ratio is None else f"{ratio:.2f}"
        m = "—" if met is None else ("yes" if met else "NO")
        print(f"{what:46s} {fmt(f):>10s} {fmt(p):>10s} {unit:>8s} {r:>6s} {target:>6.2f}  {m}")
    json.dump(results, open(os.path.join(out, "results.json"), "w"), indent=1)
    print("results:", os.path.join(out, "results.json"))


if __name__ == "__main__":
    main()
