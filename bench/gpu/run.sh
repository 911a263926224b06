#!/usr/bin/env bash
# Runs flock's GPU checks and measurements in one go, on a machine with an
# NVIDIA GPU, its driver, the CUDA libraries and PyTorch, and no Go: the
# binaries are built elsewhere (see bench/gpu/README.md).
#
#   bench/gpu/run.sh [BIN_DIR]
#
# BIN_DIR (default: the repository root) holds:
#   cudatest   CGO_ENABLED=0 go test -c -o cudatest ./backend/cuda/
#   nccltest   CGO_ENABLED=0 go test -c -o nccltest ./dist/nccl/     (optional)
#   flock      CGO_ENABLED=0 go build -o flock ./cmd/flock           (optional)
#
# In order: flock doctor; the backend conformance suite against the CPU
# results (with cuBLAS/cuDNN, then with flock's own kernels); the NCCL test;
# the kernel benchmarks beside their ceilings (device-to-device copy
# bandwidth for memory-bound kernels, torch.matmul for products); training
# steps of ResNet-50 and ViT-B/16 with bf16 autocast, flock and PyTorch
# alternating. It prints a short table and writes everything under OUT
# ($OUT, or gpu-results-<time>/): the logs, results.json (all figures) and
# summary.txt.
#
# Settings (environment): BATCH (128), MODELS (resnet50,vit_base_p16), STEPS
# (20), REPEAT (2 alternations), MATMUL_N (4096), PYTHON (python3),
# QUICK=1 (skip the second conformance run and the model steps).
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="$(cd "${1:-$root}" && pwd)"
out="${OUT:-$PWD/gpu-results-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$out"
batch="${BATCH:-128}"
models="${MODELS:-resnet50,vit_base_p16}"
steps="${STEPS:-20}"
repeat="${REPEAT:-2}"
mm="${MATMUL_N:-4096}"
py="${PYTHON:-python3}"
status=0

say() { printf '\n== %s\n' "$*" | tee -a "$out/run.log"; }

if [[ ! -x "$bin/cudatest" ]]; then
	echo "run.sh: $bin/cudatest missing; build it with: CGO_ENABLED=0 go test -c -o cudatest ./backend/cuda/" >&2
	exit 2
fi
# The test binary reads its kernel sources from its embedded copy, but the
# clang checks and testdata paths are relative to the package directory.
cd "$root/backend/cuda" 2>/dev/null || cd "$bin"

say "environment"
{
	date -u
	uname -a
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv 2>&1 || true
	"$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>&1 || true
} | tee "$out/environment.txt" | tee -a "$out/run.log"

if [[ -x "$bin/flock" ]]; then
	say "flock doctor"
	"$bin/flock" doctor | tee "$out/doctor.txt" | tee -a "$out/run.log"
	"$bin/flock" doctor --json >"$out/doctor.json" || true
fi

say "conformance (cuBLAS and cuDNN when installed)"
"$bin/cudatest" -test.v -test.count=1 -test.timeout=60m \
	-test.run '^(TestConformance|TestMatchesCPU|TestTensorOnGPU|TestKernel.*|TestAllocator.*|TestArgs.*|TestLoader.*)$' \
	${QUICK:+-test.short} >"$out/conformance.log" 2>&1
rc=$?
grep -E '^(--- FAIL|FAIL|ok|PASS)' "$out/conformance.log" | tail -n 20 | tee -a "$out/run.log"
[[ $rc -eq 0 ]] || status=1
if [[ -z "${QUICK:-}" ]]; then
	say "conformance (flock's own matrix product and im2col convolution)"
	"$bin/cudatest" -test.v -test.count=1 -test.timeout=60m -test.run '^TestConformanceOwnKernels$' >"$out/conformance_own.log" 2>&1
	rc=$?
	grep -E '^(--- FAIL|FAIL|ok|PASS)' "$out/conformance_own.log" | tail -n 20 | tee -a "$out/run.log"
	[[ $rc -eq 0 ]] || status=1
fi

if [[ -x "$bin/nccltest" ]]; then
	say "NCCL"
	"$bin/nccltest" -test.v -test.count=1 >"$out/nccl.log" 2>&1 || status=1
	grep -E '^(--- |ok|PASS|FAIL)|NCCL ' "$out/nccl.log" | tee -a "$out/run.log"
fi

if [[ -x "$bin/flock" ]]; then
	say "flock train --device cuda on a streamed .beton (ResNet-18, 160×160 crops)"
	d="$out/train_device"
	mkdir -p "$d"
	"$bin/flock" convert synthetic "$d/train.beton" --n 256 --size 192x192 >"$d/convert.log" 2>&1 &&
		"$bin/flock" convert synthetic "$d/val.beton" --n 64 --size 192x192 --seed 1 >>"$d/convert.log" 2>&1 || status=1
	for dev in cuda cpu; do
		"$bin/flock" train --device "$dev" --workers 1 --data "$d/train.beton" --test-data "$d/val.beton" \
			--model resnet18 --image-size 160 --flip --data-order random --epochs 1 --batch-size 32 --lr 0.01 \
			--warmup 0 --log-every 1 --json >"$d/$dev.jsonl" 2>"$d/$dev.err" || status=1
	done
	# The first step's loss on the GPU against the CPU's (same weights, same
	# batch; TF32 and reduction order apart).
	"$py" - "$d" <<'PYEOF' | tee -a "$out/run.log" || status=1
import json, sys
d = sys.argv[1]
first = {}
for dev in ("cuda", "cpu"):
    recs = [json.loads(l) for l in open(f"{d}/{dev}.jsonl")]
    first[dev] = next(r["loss"] for r in recs if r["kind"] == "train")
    print(dev, "first loss", first[dev], "summary", recs[-1])
ok = abs(first["cuda"] - first["cpu"]) <= 1e-2 * abs(first["cpu"])
print("first-step loss cuda vs cpu:", "ok" if ok else "MISMATCH")
sys.exit(0 if ok else 1)
PYEOF
fi

say "kernel benchmarks"
FLOCK_GPU_MATMUL_N="$mm" "$bin/cudatest" -test.run '^$' -test.bench '^(BenchmarkMemory|BenchmarkMatMul)$' \
	-test.benchtime 30x -test.count=1 >"$out/kernels.log" 2>&1 || status=1
grep -E '^Benchmark' "$out/kernels.log" | tee -a "$out/run.log"
"$py" "$here/torch_step.py" --json --model "" --matmul "$mm" >"$out/torch_matmul.jsonl" 2>"$out/torch_matmul.err" || true

if [[ -z "${QUICK:-}" ]]; then
	say "training steps, batch $batch, bf16 autocast: flock and PyTorch alternating"
	: >"$out/steps_flock.log"
	: >"$out/steps_torch.jsonl"
	for ((r = 0; r < repeat; r++)); do
		FLOCK_GPU_MODELS="$models" FLOCK_GPU_BATCH="$batch" "$bin/cudatest" -test.run '^$' \
			-test.bench '^BenchmarkModelStep$' -test.benchtime "${steps}x" -test.count=1 >>"$out/steps_flock.log" 2>&1 || status=1
		"$py" "$here/torch_step.py" --json --model "$models" --batch "$batch" --steps "$steps" \
			>>"$out/steps_torch.jsonl" 2>>"$out/steps_torch.err" || status=1
	done
	grep -E '^Benchmark|SKIP|skip' "$out/steps_flock.log" | tee -a "$out/run.log"
fi

say "summary"
"$py" - "$out" <<'PYEOF' | tee "$out/summary.txt" | tee -a "$out/run.log"
import json, os, re, statistics, sys

out = sys.argv[1]

def bench_lines(name):
    """Parses `go test -bench` lines into {benchmark: {metric: [values]}}."""
    res = {}
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return res
    for line in open(path):
        if not line.startswith("Benchmark"):
            continue
        f = line.split()
        key = re.sub(r"-\d+$", "", f[0])
        m = res.setdefault(key, {})
        for i in range(2, len(f) - 1, 2):
            try:
                m.setdefault(f[i + 1], []).append(float(f[i]))
            except ValueError:
                pass
    return res

def jsonl(name):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return []
    rows = []
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            rows.append(json.loads(line))
    return rows

med = lambda xs: statistics.median(xs) if xs else None
kern = bench_lines("kernels.log")
steps = bench_lines("steps_flock.log")
tmm = {r["bench"]: r["tflops"] for r in jsonl("torch_matmul.jsonl") if "bench" in r}
tsteps = {}
for r in jsonl("steps_torch.jsonl"):
    tsteps.setdefault(r["model"], []).append(r["images_per_sec"])

results = {"kernels": kern, "steps_flock": steps, "torch_matmul": tmm, "torch_steps": tsteps, "checks": []}
rows = []
def row(what, flock, peer, unit, target):
    ratio = flock / peer if flock and peer else None
    ok = None if ratio is None else ratio >= target
    rows.append((what, flock, peer, unit, ratio, target, ok))
    results["checks"].append({"what": what, "flock": flock, "peer": peer, "unit": unit, "ratio": ratio, "target": target, "met": ok})

copy = med(kern.get("BenchmarkMemory/copy_d2d", {}).get("MB/s", []))
for k, m in sorted(kern.items()):
    if k.startswith("BenchmarkMemory/") and not k.endswith("copy_d2d"):
        row(k.split("/", 1)[1] + " (vs D2D copy)", med(m.get("MB/s", [])) and med(m["MB/s"]) / 1e3, copy and copy / 1e3, "GB/s", 0.8)
for k, m in sorted(kern.items()):
    if k.startswith("BenchmarkMatMul/"):
        mode, n = k.split("/", 1)[1].rsplit("_", 1)
        tkey = {"fp32": "fp32", "tf32": "tf32", "bf16_autocast": "bf16"}.get(mode, mode)
        row(f"matmul {mode} {n}³ (vs torch.matmul)", med(m.get("TFLOP/s", [])), tmm.get(f"matmul_{tkey}_{n}"), "TFLOP/s", 0.95)
for k, m in sorted(steps.items()):
    name = k.split("/", 1)[1].rsplit("_b", 1)[0]
    row(f"train step {name} (vs PyTorch eager)", med(m.get("img/s", [])), med(tsteps.get(name, [])), "img/s", 0.8)

fmt = lambda v: "—" if v is None else f"{v:,.1f}"
print(f"{'measurement':44s} {'flock':>12s} {'peer':>12s} {'unit':>8s} {'ratio':>7s} {'target':>7s}  met")
for what, f, p, unit, ratio, target, ok in rows:
    print(f"{what:44s} {fmt(f):>12s} {fmt(p):>12s} {unit:>8s} {('—' if ratio is None else f'{ratio:.2f}'):>7s} {target:>7.2f}  {'—' if ok is None else ('yes' if ok else 'NO')}")
for name in ("conformance.log", "conformance_own.log", "nccl.log"):
    path = os.path.join(out, name)
    if os.path.exists(path):
        text = open(path).read()
        fails = len(re.findall(r"^\s*--- FAIL", text, re.M))
        passes = len(re.findall(r"^\s*--- PASS", text, re.M))
        skips = len(re.findall(r"^\s*--- SKIP", text, re.M))
        results[name] = {"pass": passes, "fail": fails, "skip": skips}
        print(f"{name}: {passes} passed, {fails} failed, {skips} skipped")
json.dump(results, open(os.path.join(out, "results.json"), "w"), indent=1)
print("results:", os.path.join(out, "results.json"))
PYEOF
exit $status
