#!/usr/bin/python3
"""Side-by-side convolutions: flock's backend against PyTorch peers.

Builds the test binary of backend/cpu, then for each round runs flock's
convolution benchmarks (BenchmarkConv2dForward, BackwardData and
BackwardWeight) and then bench/peers/torch_conv.py once for each peer, one
after the other, each a fresh process timing the same shapes and passes.
The first round is a warm-up, recorded but left out of the statistics.
Writes

  bench/results/conv_<date>.jsonl  a machine record, then one record per
                                   shape, pass, implementation and round
  bench/results/conv_<date>.md     medians (min-max) over the rounds and the
                                   round-by-round speed-up peer ms / flock ms

The peers:

  torch           Debian's PyTorch (/usr/bin/python3)
  torch2          PyTorch 2 of bench/peers/setup.sh's environment, eager
  torch2-compile  the same, each pass under torch.compile (inductor); its
                  compilation is outside the timed calls, reported apart

Run from the repository root, e.g.

  /usr/bin/python3 bench/peers/compare_conv.py --peers torch,torch2,torch2-compile

PyTorch gets its best setup on these machines (BENCHMARKS.md): 2 threads,
OPENBLAS_CORETYPE unset.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join("bench", "peers", "torch_conv.py")
PASSES = {"Forward": "forward", "BackwardData": "data", "BackwardWeight": "weight"}
PEERS = ("torch", "torch2", "torch2-compile")
BENCH_LINE = re.compile(r"^BenchmarkConv2d(Forward|BackwardData|BackwardWeight)/(\S+?)(-\d+)?\s+\d+\s+([\d.]+) ns/op")


def peers_python():
    venv = os.environ.get("FLOCK_PEERS_VENV") or os.path.join(ROOT, ".cache", "peers", "venv")
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        raise SystemExit(f"compare_conv: no virtual environment at {venv}: install it with bench/peers/setup.sh (or set FLOCK_PEERS_VENV)")
    # Commands run in the repository root: name it from there when below.
    rel = os.path.relpath(python, ROOT)
    return python if rel.startswith("..") else os.path.join(".", rel)


def peer_command(peer, a):
    python = "/usr/bin/python3" if peer == "torch" else peers_python()
    cmd = [python, SCRIPT, "--json", "--threads", str(a.threads), "--runs", str(a.runs), "--shapes", a.shapes]
    if peer == "torch2-compile":
        cmd.append("--compile")
    return cmd


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run(cmd, **kw):
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    r = subprocess.run(cmd, cwd=kw.pop("cwd", ROOT), env=env, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise SystemExit(f"compare_conv: {shlex.join(cmd)}: exit {r.returncode}\n{r.stderr}")
    return r.stdout


def flock_round(binary, a):
    out = run([binary, "-test.run", "XXX", "-test.bench", f"Conv2d(Forward|BackwardData|BackwardWeight)/{a.shapes}",
               "-test.benchtime", a.benchtime], cwd=os.path.join(ROOT, "backend", "cpu"))
    recs = []
    for line in out.splitlines():
        m = BENCH_LINE.match(line)
        if m:
            recs.append({"shape": m.group(2), "pass": PASSES[m.group(1)], "ms": float(m.group(4)) / 1e6})
    if not recs:
        raise SystemExit(f"compare_conv: no benchmark lines from {binary} for shapes {a.shapes!r}:\n{out}")
    return recs


def summarize(records, peers):
    """Per shape and pass: each implementation's median (min-max) ms over
    the measured rounds and each peer's speed-up, peer ms / flock ms round
    by round."""
    def stats(xs):
        return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)} if xs else None

    keys = []
    for r in records:
        if r["impl"] == "flock" and (r["shape"], r["pass"]) not in keys:
            keys.append((r["shape"], r["pass"]))
    rows = []
    for shape, pas in keys:
        sel = [r for r in records if r["shape"] == shape and r["pass"] == pas and not r["warmup_round"]]
        flock = {r["round"]: r["ms"] for r in sel if r["impl"] == "flock"}
        row = {"record": "summary", "shape": shape, "pass": pas, "flock_ms": stats(list(flock.values()))}
        for p in peers:
            ps = [r for r in sel if r["impl"] == p]
            row[p + "_ms"] = stats([r["ms"] for r in ps])
            row[p + "_speedup"] = stats([r["ms"] / flock[r["round"]] for r in ps if r["round"] in flock])
            cs = [r["compile_s"] for r in ps if "compile_s" in r]
            if cs:
                row[p + "_compile_s"] = statistics.median(cs)
        rows.append(row)
    return rows


def table(rows, peers):
    head = "| shape | pass | flock ms |" + "".join(f" {p} ms | {p}/flock ms (min–max) |" for p in peers)
    lines = [head, "|---|---|---:|" + "---:|---:|" * len(peers)]
    for r in rows:
        line = f"| {r['shape']} | {r['pass']} | {r['flock_ms']['median']:.2f} |"
        for p in peers:
            ms, sp = r[p + "_ms"], r[p + "_speedup"]
            line += f" {ms['median']:.2f} | {sp['median']:.2f} ({sp['min']:.2f}–{sp['max']:.2f}) |" if ms and sp else " | |"
        lines.append(line)
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peers", default="torch,torch2,torch2-compile", help="comma-separated peers: " + ", ".join(PEERS))
    ap.add_argument("--pairs", type=int, default=3, help="measured rounds after one warm-up round")
    ap.add_argument("--shapes", default=".", help="regular expression choosing shapes by name")
    ap.add_argument("--benchtime", default="5x", help="flock's -test.benchtime")
    ap.add_argument("--runs", type=int, default=7, help="the peers' timed calls per pass")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    a = ap.parse_args()
    if a.pairs < 1 or a.runs < 1:
        raise SystemExit(f"compare_conv: pairs {a.pairs}, runs {a.runs}: want ≥ 1")
    peers = [p for p in a.peers.split(",") if p]
    for p in peers:
        if p not in PEERS or peers.count(p) > 1:
            raise SystemExit(f"compare_conv: peer {p!r}: unknown or given twice (peers: {', '.join(PEERS)})")
    commands = {p: peer_command(p, a) for p in peers}

    start = datetime.datetime.now(datetime.timezone.utc)
    tmp = tempfile.mkdtemp(prefix="flock-conv-")
    binary = os.path.join(tmp, "cpu.test")
    run(["go", "test", "-c", "-o", binary, "./backend/cpu"])
    records = []
    for rnd in range(a.pairs + 1):
        for impl in ["flock"] + peers:
            if impl == "flock":
                recs = flock_round(binary, a)
            else:
                recs = [json.loads(line) for line in run(commands[impl]).splitlines() if line.startswith("{")]
            for r in recs:
                r.update({"impl": impl, "round": rnd, "warmup_round": rnd == 0})
                records.append(r)
            print(f"round {rnd}{' (warm-up)' if rnd == 0 else ''}  {impl}: {len(recs)} passes", file=sys.stderr, flush=True)
    versions = {p: next((r["version"] for r in records if r["impl"] == p), "?") for p in peers}
    machine = {
        "record": "machine", "time": start.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": shlex.join([os.path.relpath(sys.executable) if sys.executable.startswith(ROOT) else sys.executable] + sys.argv),
        "cpu": cpu_model(), "nproc": os.cpu_count(), "load": os.getloadavg(),
        "go": run(["go", "version"]).strip(), "pairs": a.pairs, "benchtime": a.benchtime, "runs": a.runs,
        "threads": a.threads, "peers": {p: {"version": versions[p], "command": shlex.join(commands[p])} for p in peers},
    }
    rows = summarize(records, peers)
    os.makedirs(a.out, exist_ok=True)
    date = start.strftime("%Y-%m-%d")
    jsonl = os.path.join(a.out, f"conv_{date}.jsonl")
    with open(jsonl, "w") as f:
        for r in [machine] + records + rows:
            f.write(json.dumps(r) + "\n")
    md = os.path.join(a.out, f"conv_{date}.md")
    with open(md, "w") as f:
        f.write(f"# Convolutions, flock vs PyTorch peers ({date})\n\n")
        f.write(f"Made by (from the repository root):\n\n```\n{machine['command']}\n```\n\n")
        f.write(f"Each round runs flock's convolution benchmarks (`-test.benchtime {a.benchtime}`) and then each peer "
                f"(bench/peers/torch_conv.py, {a.threads} threads, median of {a.runs} timed calls after two untimed ones); "
                f"{a.pairs} rounds after one warm-up round. Milliseconds per pass are medians over the rounds; the speed-up "
                "is the peer's time over flock's, round by round, median (min–max) (above 1: flock faster). "
                "\"data\" and \"weight\" are the input's and the weight's gradients computed alone.\n\n")
        f.write(table(rows, peers))
        f.write("\n## Setup\n\n")
        f.write(f"- Machine: {machine['nproc']} CPUs, {machine['cpu']}; {machine['go']}; load average "
                f"{' '.join(f'{x:.2f}' for x in machine['load'])} at the start.\n")
        for p in peers:
            f.write(f"- {p}: PyTorch {versions[p]} (`{machine['peers'][p]['command']}`).\n")
            cs = [r[p + "_compile_s"] for r in rows if p + "_compile_s" in r]
            if cs:
                f.write(f"  torch.compile took {statistics.median(cs):.2f} s per pass (median; {min(cs):.2f}–{max(cs):.2f}), outside the timed calls.\n")
        f.write(f"- Records: `{os.path.basename(jsonl)}`.\n")
    print(md)


if __name__ == "__main__":
    main()
