#!/usr/bin/env bash
# The whole GPU check of flock in one call of at most 8 minutes, on a machine
# with an NVIDIA GPU, its driver and PyTorch with CUDA (the peer), and no Go:
# the binaries come from bench/gpu/build.sh, run where Go is.
#
#   bench/gpu/build.sh           # with Go: bin/gpu/{cudatest,nccltest,flock,fashion-mnist-test.beton}
#   bench/gpu/run.sh [BIN_DIR]   # on the GPU machine; BIN_DIR defaults to bin/gpu
#
# Stages, in order. The first that fails ends the run (unless KEEP_GOING=1):
# summary.txt names its class and quotes its first errors, so that one call
# teaches the most.
#
#   discovery    flock doctor: the driver, a GPU, NVRTC and cuBLAS found
#                (cuDNN and NCCL reported); PyTorch's CUDA libraries are
#                searched first
#   conformance  the backend conformance suite (backend/backendtest, every
#                kernel against a float64 reference) and tensors on the GPU
#   dropout      random draws and dropout masks bit for bit with the CPU
#   nccl         the NCCL communicator at world size 1
#   training     the first training steps of the CNN and ResNet-50 against
#                the CPU's losses; flock train --device cuda on both; data
#                parallel over NCCL (and over a host Comm) against the CPU's
#                losses, over two GPUs too where there are two; flock run
#                --nproc gpu -- flock train --device cuda --strategy dp
#   performance  GEMM 4096³ in TF32 and BF16, memory-bound kernels beside the
#                device-to-device copy, ResNet-50 and ViT-B/16 training steps
#                in bf16, each beside PyTorch eager on the same GPU
#
# Everything goes under OUT ($OUT, or gpu-results-<time>/): summary.txt (also
# printed), results.json, environment.txt and one log per step. The exit
# status is 0 when every stage passed.
#
# Settings (environment): DEADLINE (seconds for the whole run, 470), BATCH
# (training-step benchmarks, 64), STEPS (timed steps, 10), MATMUL_N (4096),
# PYTHON (python3), FULL=1 (also the suite with flock's own GEMM and im2col),
# KEEP_GOING=1 (run every stage after a failed one too, each failure reported
# in summary.txt as it happens; the exit status is still 1 when any failed).
#
# REHEARSAL=1 runs every stage on a machine without a GPU, where each step
# must reach its tests and find no GPU: the script, the binaries and their
# test names are checked before a GPU is lent (.ci/run does this).
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="$(cd "${1:-$root/bin/gpu}" 2>/dev/null && pwd)" || {
	echo "run.sh: no ${1:-$root/bin/gpu}; build it with bench/gpu/build.sh" >&2
	exit 2
}
out="${OUT:-$PWD/gpu-results-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
py="${PYTHON:-python3}"
batch="${BATCH:-64}"
steps="${STEPS:-10}"
mm="${MATMUL_N:-4096}"
rehearsal="${REHEARSAL:-}"
keepgoing="${KEEP_GOING:-}"
[[ "$keepgoing" == 0 ]] && keepgoing=""
failed=0
start=$(date +%s)
deadline=$((start + ${DEADLINE:-470}))
summary="$out/summary.txt"
: >"$summary"
stages=()

note() { printf '%s\n' "$*" | tee -a "$summary"; }

# finish STATUS writes the table of results and exits.
finish() {
	note ""
	note "stages: ${stages[*]}"
	note "elapsed: $(($(date +%s) - start)) s"
	if [[ -s "$out/kernels.log" || -s "$out/steps_flock.log" ]]; then
		"$py" "$here/summary.py" "$out" 2>&1 | tee -a "$summary"
	fi
	note "logs: $out"
	exit "$1"
}

# fail CLASS LOG WHY ends a failed stage, quoting the log. Stages run in
# subshells (runstage), so this ends the stage, not the script.
fail() {
	note ""
	note "FAILED at $1: $3"
	if [[ -n "$2" && -s "$out/$2" ]]; then
		note "--- first errors in $2:"
		grep -E -m 25 -e '--- FAIL|^panic:|_test\.go:[0-9]+:|[Ee]rror|FAIL' "$out/$2" | tee -a "$summary"
		note "--- last lines of $2:"
		tail -n 15 "$out/$2" | tee -a "$summary"
	fi
	exit 1
}

# runstage CLASS FUNC runs the stage FUNC in a subshell and records how it
# ended; a failed stage ends the run unless KEEP_GOING is set. A stage may
# write its own status (instead of FAILED) to $stagestatus.
stagestatus="$out/.stage-status"
runstage() {
	local class=$1 rc st
	rm -f "$stagestatus"
	("$2")
	rc=$?
	if ((rc == 0)); then
		stages+=("$class:ok")
		return
	fi
	st="$(cat "$stagestatus" 2>/dev/null)"
	rm -f "$stagestatus"
	stages+=("$class:${st:-FAILED}")
	failed=1
	if [[ -z "$keepgoing" ]]; then
		finish 1
	fi
	note "KEEP_GOING: on after the failed $class stage"
}

# step CAP LOG CMD... runs CMD with its output in $out/LOG, for at most CAP
# seconds and never past the deadline; its status is CMD's, 124 on timeout.
step() {
	local cap=$1 log=$2 left
	shift 2
	left=$((deadline - $(date +%s)))
	((left < cap)) && cap=$left
	if ((cap < 5)); then
		echo "run.sh: no time left before the deadline" >"$out/$log"
		return 124
	fi
	echo "+ $* (at most ${cap}s)" >"$out/$log"
	timeout -k 5 "$cap" "$@" >>"$out/$log" 2>&1
}

# gotest CLASS CAP LOG BINARY TEST... runs the named tests of a test binary
# and fails CLASS unless each ran and passed. In a rehearsal each must have
# run and skipped for want of a GPU.
gotest() {
	local class=$1 cap=$2 log=$3 exe=$4 rc
	shift 4
	local re
	re="^($(
		IFS='|'
		echo "$*"
	))\$"
	step "$cap" "$log" "$exe" -test.v -test.count=1 -test.timeout=10m -test.run "$re"
	rc=$?
	((rc == 124)) && fail "$class" "$log" "timed out"
	for t in "$@"; do
		grep -q "^=== RUN   $t\$" "$out/$log" || fail "$class" "$log" "$t did not run (not in $(basename "$exe"))"
	done
	if [[ -n "$rehearsal" ]]; then
		((rc == 0)) || fail "$class" "$log" "exit status $rc"
		for t in "$@"; do
			grep -B2 "^--- SKIP: $t " "$out/$log" | grep -q "needs a GPU" || fail "$class" "$log" "$t did not skip for want of a GPU"
		done
		return
	fi
	((rc == 0)) || fail "$class" "$log" "exit status $rc"
	if grep -q -e '--- SKIP' "$out/$log"; then
		fail "$class" "$log" "skipped: $(grep -B1 -m1 -e '--- SKIP' "$out/$log" | head -n 1 | sed 's/^ *//')"
	fi
}

# trainrun CAP LOG WHAT NOGPU CMD... runs CMD, a training on the GPU, for at
# most CAP seconds and checks flock train's summary record in LOG (rank 0's,
# after the "[0] " of flock run); in a rehearsal, that the run reported
# NOGPU.
trainrun() {
	local cap=$1 log=$2 what=$3 nogpu=$4 rc
	shift 4
	if [[ ! -s "$bin/fashion-mnist-test.beton" ]]; then
		fail training "" "$bin/fashion-mnist-test.beton missing (bench/gpu/build.sh writes it)"
	fi
	step "$cap" "$log" "$@"
	rc=$?
	((rc == 124)) && fail training "$log" "$what timed out"
	if [[ -n "$rehearsal" ]]; then
		grep -q -- "$nogpu" "$out/$log" || fail training "$log" "$what did not report the missing driver"
		return
	fi
	((rc == 0)) || fail training "$log" "$what: exit status $rc"
	grep -m 1 '"kind":"summary"' "$out/$log" | sed 's/^[^{]*//' | "$py" -c '
import json, math, sys
s = json.loads(sys.stdin.readline())
assert s["steps"] > 0 and math.isfinite(s["train_loss"]), s
print("%s: %d steps, loss %.4f, %.1f img/s" % (sys.argv[1], s["steps"], s["train_loss"], s["img_per_s"]))
' "$what" >>"$summary" 2>&1 || fail training "$log" "$what: no finite loss in its summary"
}

# flocktrain LOG ARGS... runs flock train --device cuda for a few steps.
flocktrain() {
	local log=$1
	shift
	trainrun 90 "$log" "flock train" "--device cuda: no CUDA driver found" \
		"$bin/flock" train --device cuda --data "$bin/fashion-mnist-test.beton" --epochs 1 --json "$@"
}

# flockrun LOG ARGS... runs flock train --device cuda data-parallel on every
# GPU of the machine, one process each (flock run --nproc gpu: NCCL between
# two GPUs or more, one worker alone on one).
flockrun() {
	local log=$1
	shift
	trainrun 120 "$log" "flock run --nproc gpu ($gpus GPUs)" "--nproc gpu: no CUDA driver found" \
		"$bin/flock" run --nproc gpu -- "$bin/flock" train --device cuda --data "$bin/fashion-mnist-test.beton" --epochs 1 --json --strategy dp "$@"
}

note "flock GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ)${rehearsal:+ (rehearsal without a GPU)}"

# discovery
{
	uname -a
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
	"$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "gpu", torch.cuda.is_available())' 2>&1
} >"$out/environment.txt"
# PyTorch's CUDA libraries (nvidia/*/lib beside it, torch/lib) come first.
torchlibs="$("$py" -c '
import glob, os, torch
d = os.path.dirname(torch.__file__)
print(":".join(sorted(glob.glob(os.path.join(os.path.dirname(d), "nvidia", "*", "lib"))) + [os.path.join(d, "lib")]))
' 2>/dev/null)"
if [[ -n "$torchlibs" ]]; then
	export FLOCK_CUDA_LIB_DIR="${FLOCK_CUDA_LIB_DIR:+$FLOCK_CUDA_LIB_DIR:}$torchlibs"
fi
echo "FLOCK_CUDA_LIB_DIR=${FLOCK_CUDA_LIB_DIR:-}" >>"$out/environment.txt"

# The stages, each a function that runstage runs; discovery's body is not
# indented, for the Python of its here-document.
discovery() {
step 30 doctor.txt "$bin/flock" doctor || fail discovery doctor.txt "flock doctor: exit status $?"
"$bin/flock" doctor --json >"$out/doctor.json" 2>&1 || fail discovery doctor.json "flock doctor --json failed"
"$py" - "$out/doctor.json" "$rehearsal" >>"$out/doctor.txt" 2>&1 <<'PYEOF' || fail discovery doctor.txt "$(tail -n 1 "$out/doctor.txt")"
import json, sys
r = json.load(open(sys.argv[1]))
libs = {l["name"]: l for l in r.get("libraries", [])}
if sys.argv[2]:
    assert not r.get("devices"), "a GPU in a rehearsal: run without REHEARSAL"
    print("rehearsal: no GPU, as expected:", r.get("error", ""))
    sys.exit(0)
missing = [n for n in ("NVRTC", "cuBLAS") if not libs.get(n, {}).get("path")]
if not r.get("devices"):
    sys.exit("no GPU: %s" % r.get("error", ""))
if missing:
    sys.exit("missing %s: %s" % (", ".join(missing), "; ".join(libs[n].get("error", "") for n in missing)))
# PTX from an NVRTC newer than the driver does not load (no JIT of a newer
# PTX ISA; CUDA's minor-version compatibility leaves PTX out).
def version(s):
    return tuple(int(x) for x in s.replace("CUDA", "").strip().split(".")[:2])
drv, nvrtc = r["driver"].get("version", ""), libs["NVRTC"].get("version", "")
try:
    if version(nvrtc) > version(drv):
        sys.exit("NVRTC %s (%s) is newer than the driver (%s): the driver refuses its PTX; "
                 "put an NVRTC of the driver's release first in FLOCK_CUDA_LIB_DIR" % (nvrtc, libs["NVRTC"]["path"], drv))
except ValueError:
    print("versions not compared: driver %r, NVRTC %r" % (drv, nvrtc))
print("found:", ", ".join("%s %s" % (n, l.get("version", "")) for n, l in libs.items() if l.get("path")))
PYEOF
head -n 3 "$out/environment.txt" | tee -a "$summary"
grep -E '^(GPU|  cuda:|CUDA driver|found:|rehearsal:)' "$out/doctor.txt" | tee -a "$summary"
}
runstage discovery discovery

conformance() {
	gotest conformance 200 conformance.log "$bin/cudatest" TestTensorOnGPU TestConformance
	if [[ -n "${FULL:-}" ]]; then
		gotest conformance 200 conformance_own.log "$bin/cudatest" TestConformanceOwnKernels
	fi
}
runstage conformance conformance
dropout() { gotest dropout 60 dropout.log "$bin/cudatest" TestMatchesCPU; }
runstage dropout dropout
nccl() { gotest nccl 60 nccl.log "$bin/nccltest" TestWorldOfOne; }
runstage nccl nccl

training() {
	gotest training 180 training.log "$bin/cudatest" TestTrainStepsMatchCPU TestResNetOpsMatchCPU TestResNetGradientsMatchCPU
	flocktrain train_cnn.log --model cnn --train-images 2048 --batch-size 128
	flocktrain train_resnet50.log --model resnet50 --train-images 256 --batch-size 32
	# Two ranks of one NCCL communicator cannot share a GPU: the two-rank test
	# needs two (a rehearsal runs it to its skip).
	gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
	dpTests=(TestDataParallelMatchesCPU)
	if [[ -n "$rehearsal" ]] || ((gpus >= 2)); then
		dpTests+=(TestDataParallelTwoGPUs)
	fi
	gotest training 150 training_nccl.log "$bin/nccltest" "${dpTests[@]}"
	flockrun run_dp_cnn.log --model cnn --train-images 2048 --batch-size 128
}
runstage training training

# performance: a failed or skipped measurement is reported, and the other
# measurements still run; bench and peer note a failure in perf.
bench() {
	local log=$1 rc
	shift
	step 150 "$log" "$bin/cudatest" -test.run '^$' -test.v -test.count=1 "$@"
	rc=$?
	if [[ -n "$rehearsal" ]]; then
		grep -q -e '--- SKIP: Benchmark' "$out/$log" && grep -q 'needs a GPU' "$out/$log" || fail performance "$log" "the benchmarks did not run to their GPU check"
	elif ((rc != 0)) || grep -q -e '--- SKIP\|--- FAIL' "$out/$log" || ! grep -q '^Benchmark[^ ]*/[^ ]* .*/op' "$out/$log"; then
		perf="failed ($log)"
	fi
}
peer() {
	local log=$1 rc
	shift
	step 120 "$log" "$py" "$here/torch_step.py" --json "$@"
	rc=$?
	if [[ -n "$rehearsal" ]]; then
		grep -q -e "PyTorch sees no GPU" -e "No module named 'torch'" "$out/$log" || fail performance "$log" "torch_step.py did not reach its GPU check"
	elif ((rc != 0)); then
		perf="failed ($log)"
	fi
}
performance() {
	perf=ok
	FLOCK_GPU_MATMUL_N="$mm" bench kernels.log -test.bench '^Benchmark(MatMul|Memory)$/^(tf32|bf16_autocast|copy|unary|binary|reduce|softmax)' -test.benchtime 20x
	peer torch_matmul.log --model "" --matmul "$mm"
	FLOCK_GPU_MODELS=resnet50,vit_base_p16 FLOCK_GPU_BATCH="$batch" bench steps_flock.log -test.bench '^BenchmarkModelStep$' -test.benchtime "${steps}x"
	peer steps_torch.log --model resnet50,vit_base_p16 --batch "$batch" --warmup 3 --steps "$steps"
	if [[ "$perf" != ok ]]; then
		echo "$perf" >"$stagestatus"
		exit 1
	fi
}
runstage performance performance
finish "$failed"
