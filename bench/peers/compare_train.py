#!/usr/bin/python3
"""Side-by-side training-step throughput: flock against PyTorch.

Builds bench/cmd/trainstep, then for each pair and each model runs flock's
command and bench/peers/torch_train.py one after the other (A B A B ...),
each a fresh process making one measurement of the same number of steps
on the same network at the same batch size. The first pair is a warm-up
and is recorded but left out of the statistics. Writes

  bench/results/train_step_<date>.jsonl  a machine record, then one record
                                         per measurement (with the load)
  bench/results/train_step_<date>.md     medians, min-max and the median of
                                         the pairwise flock/PyTorch ratios

Run from the repository root with Debian's python3:

  /usr/bin/python3 bench/peers/compare_train.py

or with the python of bench/peers/setup.sh's environment, whose PyTorch 2
the peer then uses.

PyTorch gets its best setup on these machines (BENCHMARKS.md):
torch.set_num_threads(2), OPENBLAS_CORETYPE unset, OPENBLAS_NUM_THREADS=1
(OpenBLAS threads otherwise spin against PyTorch's OpenMP threads). flock
runs with GOMAXPROCS = nproc.
"""

import argparse
import datetime
import json
import os
import platform
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PEER = os.path.join(ROOT, "bench", "peers", "torch_train.py")

# Multiply-add FLOPs of one image's forward pass through the conv and linear
# layers of nn/models (2 per multiply-add); a training step is counted as
# three times that (forward, gradient of the input, gradient of the weight).
FORWARD_FLOPS = {
    "mlp": 2 * (784 * 256 + 256 * 256 + 256 * 10),
    "cnn": 2 * (28 * 28 * 16 * 1 * 9 + 14 * 14 * 32 * 16 * 9 + 1568 * 64 + 64 * 10),
}


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, cwd=ROOT).stdout.strip()
    except OSError as e:
        return f"error: {e}"


def cpu_times():
    """Busy and steal seconds of the whole machine since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
    return (user + nice + system + irq + softirq) / hz, steal / hz


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def others_now(seconds):
    """CPU the rest of the machine uses, in cores, sampled over seconds while this process sleeps."""
    b0, _ = cpu_times()
    time.sleep(seconds)
    b1, _ = cpu_times()
    return (b1 - b0) / seconds


def wait_quiet(threshold, max_wait):
    """Waits (at most max_wait s) until other processes use under threshold cores."""
    t0 = time.perf_counter()
    while True:
        o = others_now(1.0)
        waited = time.perf_counter() - t0
        if o < threshold or waited >= max_wait:
            return round(o, 3), round(waited, 1)


def run_one(cmd, env, quiet, max_wait):
    """Runs cmd, returns its JSON record plus how busy the rest of the machine was."""
    others_before, waited = wait_quiet(quiet, max_wait)
    la = loadavg()
    busy0, steal0 = cpu_times()
    own0 = child_cpu()
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    busy1, steal1 = cpu_times()
    own = child_cpu() - own0
    if p.returncode != 0:
        sys.exit(f"compare_train: {shlex.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if len(lines) != 1:
        sys.exit(f"compare_train: {shlex.join(cmd)}: want one JSON line, got:\n{p.stdout}")
    rec = json.loads(lines[0])
    rec["load"] = {
        "waited_for_quiet_s": waited,
        "others_cores_before": others_before,
        "loadavg_before": la,
        "process_wall_s": round(wall, 3),
        "process_cpu_s": round(own, 3),
        # CPU time the rest of the machine used while the process ran, in cores.
        "others_cores": round(max(0.0, (busy1 - busy0) - own) / wall, 3),
        "steal_cores": round((steal1 - steal0) / wall, 3),
    }
    return rec


def summary(xs):
    return statistics.median(xs), min(xs), max(xs)


def fmt_range(xs, spec):
    m, lo, hi = summary(xs)
    return f"{m:{spec}} ({lo:{spec}}–{hi:{spec}})"

def table(records, models, quiet=None):
    """Markdown rows: medians, ranges and pairwise ratios per model; with
    quiet, only pairs in which other processes used under quiet cores
    during both runs."""
    rows = [
        "| model | flock img/s | PyTorch img/s | flock/PyTorch | flock GFLOP/s | PyTorch GFLOP/s | pairs |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in models:
        meas = [r for r in records if r["model"] == m and not r["warmup_pair"]]
        fl = {r["pair"]: r for r in meas if r["impl"] == "flock"}
        pt = {r["pair"]: r for r in meas if r["impl"] == "pytorch"}
        pairs = sorted(set(fl) & set(pt))
        if quiet is not None:
            pairs = [p for p in pairs
                     if max(fl[p]["load"]["others_cores"], pt[p]["load"]["others_cores"]) < quiet]
        if not pairs:
            rows.append(f"| {m} | – | – | – | – | – | 0 |")
            continue
        f_ips = [fl[p]["img_per_s"] for p in pairs]
        p_ips = [pt[p]["img_per_s"] for p in pairs]
        ratio = [fl[p]["img_per_s"] / pt[p]["img_per_s"] for p in pairs]
        flops = 3 * FORWARD_FLOPS[m]
        rows.append(
            f"| {m} | {fmt_range(f_ips, ',.0f')} | {fmt_range(p_ips, ',.0f')} | {fmt_range(ratio, '.3f')} | "
            f"{statistics.median(f_ips) * flops / 1e9:.1f} | {statistics.median(p_ips) * flops / 1e9:.1f} | "
            f"{len(pairs)} |")
    return rows


def report(machine, records, models, steps, a):
    others = {m: [r["load"]["others_cores"] for r in records if r["model"] == m and not r["warmup_pair"]]
              for m in models}
    flock_threads = next((r["threads"] for r in records if r["impl"] == "flock"), "?")
    onednn = next((r["mkldnn"] for r in records if r["impl"] == "pytorch"), "?")
    unquiet = sum(r["load"]["waited_for_quiet_s"] >= a.max_wait for r in records)
    return [
        f"# Training-step throughput, flock vs PyTorch ({a.date})",
        "",
        "Made by (from the repository root):",
        "",
        "```",
        machine["command"],
        "```",
        "",
        f"One training step: forward, mean cross-entropy, backward, SGD (rate 0.01, momentum 0.9), "
        f"gradients cleared; batch {a.batch} of fixed random 28×28×1 float32 images; the models of "
        f"nn/models. Each measurement is a fresh process: {a.warmup} untimed steps, then "
        + ", ".join(f"{steps[m]} timed steps ({m})" for m in models)
        + f". flock and PyTorch alternate (A B A B), {a.pairs} pairs after one warm-up pair; "
        "figures are the median and (min–max) over the pairs; the ratio is flock/PyTorch, "
        "computed pair by pair.",
        "",
        "All pairs:",
        "",
    ] + table(records, models) + [
        "",
        f"Pairs in which other processes used under {a.quiet} cores during both runs (PyTorch's "
        "two OpenMP threads slow down several-fold when another process takes a core):",
        "",
    ] + table(records, models, a.quiet) + [
        "",
        "GFLOP/s counts a step as 3× the forward pass's multiply-add FLOPs in the conv and linear "
        "layers (" + ", ".join(f"{m}: {3 * FORWARD_FLOPS[m] / 1e6:.2f} MFLOP per image" for m in models)
        + ").",
        "",
        "## Setup",
        "",
        f"- Machine: {machine['nproc']} CPUs (`nproc`), {machine['cpu_model']} (lscpu), "
        f"AVX-512: {'yes' if machine['cpu_flags_avx512'] else 'no'}; kernel {machine['kernel']}; "
        f"git {machine['git_head']}.",
        f"- flock: {machine['go']}, GOMAXPROCS {flock_threads}.",
        f"- PyTorch {machine['torch']} ({machine['python']}"
        f"{', Debian python3-torch' if machine['python'].startswith('/usr/bin/') else ''}), "
        f"torch.set_num_threads({a.threads}), OPENBLAS_CORETYPE unset, OPENBLAS_NUM_THREADS=1, "
        f"oneDNN available: {onednn}.",
        f"- Load: the machine is shared. Load average {machine['loadavg_start']} at the start, "
        f"{machine['loadavg_end']} at the end. CPU used by other processes while each measurement ran, "
        "in cores (median, min–max): "
        + "; ".join(f"{m} {fmt_range(others[m], '.2f')}" for m in models)
        + f". Before each run the driver waited (at most {a.max_wait:.0f} s) until other processes "
        f"used under {a.quiet} cores; {unquiet} of {len(records)} runs started without that quiet. "
        "Per-run figures: `load` in the .jsonl file.",
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--pairs", type=int, default=10, help="measured pairs after the warm-up pair")
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps in each process")
    ap.add_argument("--steps", default="mlp=300,cnn=60", help="timed steps per model, the same for both")
    ap.add_argument("--threads", type=int, default=2, help="PyTorch threads")
    ap.add_argument("--quiet", type=float, default=0.25,
                    help="before each run, wait until other processes use fewer cores than this")
    ap.add_argument("--max-wait", type=float, default=120, help="longest wait for quiet, seconds")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    a = ap.parse_args()
    models = a.models.split(",")
    steps = dict(kv.split("=") for kv in a.steps.split(","))

    tmp = tempfile.mkdtemp(prefix="flock-trainstep-")
    exe = os.path.join(tmp, "trainstep")
    subprocess.run(["go", "build", "-o", exe, "./bench/cmd/trainstep"], cwd=ROOT, check=True)

    flock_env = dict(os.environ)
    peer_env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    peer_env["OPENBLAS_NUM_THREADS"] = "1"

    machine = {
        "record": "machine",
        "command": shlex.quote(os.path.relpath(sys.executable, ROOT) if sys.executable.startswith(ROOT + os.sep) else sys.executable)
        + " bench/peers/compare_train.py" + "".join(
            " " + shlex.quote(x) for x in sys.argv[1:]),
        "date": a.date,
        "start": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "nproc": int(sh("nproc") or 0),
        "cpu_model": sh("lscpu | sed -n 's/^Model name: *//p'"),
        "cpu_flags_avx512": "avx512f" in sh("lscpu"),
        "memory": sh("free -h | sed -n 2p"),
        "kernel": platform.release(),
        "go": sh("go version"),
        "torch": sh(f"{sys.executable} -c 'import torch; print(torch.__version__)'"),
        "python": f"{sys.executable} {platform.python_version()}",
        "git_head": sh("git rev-parse --short HEAD"),
        "peer_env": {"OPENBLAS_CORETYPE": None, "OPENBLAS_NUM_THREADS": "1", "torch_threads": a.threads},
        "loadavg_start": loadavg(),
        "top_start": sh("ps -eo pcpu,etime,comm --sort=-pcpu | head -8"),
    }

    records = []
    for pair in range(a.pairs + 1):
        for m in models:
            n = ["batch", str(a.batch), "warmup", str(a.warmup), "steps", steps[m]]
            runs = [
                ("flock", [exe, "-json", "-model", m] + [("-" if i % 2 == 0 else "") + x for i, x in enumerate(n)],
                 flock_env),
                ("pytorch", [sys.executable, PEER, "--json", "--model", m, "--threads", str(a.threads)]
                 + [("--" if i % 2 == 0 else "") + x for i, x in enumerate(n)], peer_env),
            ]
            for impl, cmd, env in runs:
                rec = run_one(cmd, env, a.quiet, a.max_wait)
                rec["pair"] = pair
                rec["warmup_pair"] = pair == 0
                records.append(rec)
                print(f"pair {pair:2d} {impl:7s} {m}: {rec['img_per_s']:10.1f} img/s  "
                      f"(others {rec['load']['others_cores']:.2f} cores)", file=sys.stderr, flush=True)
    shutil.rmtree(tmp)
    machine["loadavg_end"] = loadavg()
    machine["top_end"] = sh("ps -eo pcpu,etime,comm --sort=-pcpu | head -8")

    os.makedirs(a.out, exist_ok=True)
    base = os.path.join(a.out, f"train_step_{a.date}")
    with open(base + ".jsonl", "w") as f:
        for r in [machine] + records:
            f.write(json.dumps(r) + "\n")
    lines = report(machine, records, models, steps, a)
    with open(base + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {base}.jsonl and {base}.md", file=sys.stderr)


if __name__ == "__main__":
    main()
