#!/usr/bin/env bash
# Re-measures, side by side in one command each, every benchmark table of
# bench/results that has a PyTorch or data-loader peer, against today's
# peers from bench/peers/setup.sh's environment (installed first when
# missing): PyTorch 2 eager and torch.compile next to Debian's PyTorch 1.13
# for the models and convolutions, FFCV's Loader and PyTorch 2's DataLoader
# for loading, torchft's LocalSGD and DiLoCo for Local SGD's
# synchronization, PyTorch 2's Gloo for the all-reduce, PyTorch 2 for the
# training steps of compare_train.py. Each table names its peers' versions;
# its ratios are medians (min–max) of alternating rounds.
#
#   bench/peers/measure.sh            the full settings, into bench/results
#                                     as <table>_<today>.{md,jsonl}
#   bench/peers/measure.sh --smoke    each command once with the smallest
#                                     settings (one measured round, tiny
#                                     sizes), into a temporary directory
#   --out DIR                         write the tables into DIR instead
#   --only REGEX                      only the tables whose name matches
#
# Run it from anywhere on a quiet machine: the figures are timings.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
smoke=0
out=bench/results
only=.
while (($#)); do
	case $1 in
	--smoke) smoke=1 ;;
	--out) out=$2; shift ;;
	--only) only=$2; shift ;;
	*) echo "measure.sh: unknown argument $1 (want --smoke, --out DIR, --only REGEX)" >&2; exit 2 ;;
	esac
	shift
done
if ((smoke)) && [[ $out == bench/results ]]; then
	out=$(mktemp -d /tmp/flock-measure-XXXXXX)
fi
mkdir -p "$out"

venv_python=$(bash bench/peers/setup.sh | tail -n 1)
# Named from the repository root, where the commands run, when below it.
rel=$(realpath --no-symlinks --relative-to=. "$venv_python")
[[ $rel == ../* ]] || venv_python=./$rel
date=$(date -u +%F)
work=$(mktemp -d /tmp/flock-measure-work-XXXXXX)
trap 'rm -rf "$work"' EXIT
go build -o "$work/flock" ./cmd/flock
flock=$work/flock

# measure NAME COMMAND...: runs COMMAND, which writes <kind>_<date>.md and
# .jsonl into $work/run, and moves them to $out/NAME_<date>.{md,jsonl}.
measure() {
	local name=$1
	shift
	[[ $name =~ $only ]] || return 0
	echo "measure.sh: $name: $*" >&2
	local start=$SECONDS
	rm -rf "$work/run"
	mkdir -p "$work/run"
	"$@" --out "$work/run" >"$work/run.log" 2>&1 || { tail -n 30 "$work/run.log" >&2; echo "measure.sh: $name failed" >&2; exit 1; }
	local md jsonl
	md=$(ls "$work"/run/*.md)
	jsonl=$(ls "$work"/run/*.jsonl)
	sed -e "s|$(basename "$jsonl")|${name}_${date}.jsonl|g" -e "s|$work/run|$out|g" "$md" >"$out/${name}_${date}.md"
	sed -e "s|$work/run|$out|g" "$jsonl" >"$out/${name}_${date}.jsonl"
	echo "measure.sh: $name: $out/${name}_${date}.md ($((SECONDS - start)) s)" >&2
}

models=torch,torch2,torch2-compile
if ((smoke)); then
	measure model-cnn-mlp "$flock" bench model --model cnn,mlp --batch 8 --image 28 --channels 1 --peer $models --pairs 1 --steps 2 --warmup 1
	measure model-resnet18 "$flock" bench model --model resnet18 --batch 2 --image 32 --peer $models --pairs 1 --steps 1 --warmup 1
	measure model-resnet50 "$flock" bench model --model resnet50 --batch 1 --image 64 --peer $models --pairs 1 --steps 1 --warmup 1
	measure model-vit_tiny_p4 "$flock" bench model --model vit_tiny_p4 --batch 2 --image 32 --peer $models --pairs 1 --steps 1 --warmup 1
	measure conv /usr/bin/python3 bench/peers/compare_conv.py --peers $models --pairs 1 --shapes 'N64_512to512' --benchtime 1x --runs 1
	measure loader-turbojpeg-ffcv "$flock" bench loader --synthetic 64 --synthetic-res 64 --size 32 --batch-size 8 --batches 2 --warmup 1 --workers 1,2 --peer ffcv --pairs 1
	measure loader-go-ffcv env FLOCK_JPEG=go "$flock" bench loader --synthetic 64 --synthetic-res 64 --size 32 --batch-size 8 --batches 2 --warmup 1 --workers 1 --peer ffcv --pairs 1
	measure loader-turbojpeg-torch2 "$flock" bench loader --synthetic 64 --synthetic-res 64 --size 32 --batch-size 8 --batches 2 --warmup 1 --workers 1 --peer torch --python "$venv_python" --pairs 1
	measure strategy-torchft "$flock" bench strategy --measure sync --model cnn --image 28 --channels 1 --peer torchft --pairs 1 --iters 2 --warmup 1
	measure allreduce-torch2 "$flock" bench allreduce --nproc 2 --size 1MiB --peer gloo --python "$venv_python" --pairs 1
	measure train_step-torch2 "$venv_python" bench/peers/compare_train.py --models mlp,cnn --pairs 1 --warmup 1 --steps mlp=2,cnn=2 --max-wait 1 --date "$date"
else
	measure model-cnn-mlp "$flock" bench model --model cnn,mlp --batch 128 --image 28 --channels 1 --peer $models --pairs 3 --steps 20 --warmup 5
	measure model-resnet18 "$flock" bench model --model resnet18 --batch 64 --image 32 --peer $models --pairs 5
	measure model-resnet50 "$flock" bench model --model resnet50 --batch 8 --image 224 --peer $models --pairs 3
	measure model-vit_tiny_p4 "$flock" bench model --model vit_tiny_p4 --batch 64 --image 32 --peer $models --pairs 3
	measure conv /usr/bin/python3 bench/peers/compare_conv.py --peers $models --pairs 3
	measure loader-turbojpeg-ffcv "$flock" bench loader --synthetic 512 --peer ffcv --pairs 3
	measure loader-go-ffcv env FLOCK_JPEG=go "$flock" bench loader --synthetic 512 --peer ffcv --pairs 3
	measure loader-turbojpeg-torch2 "$flock" bench loader --synthetic 512 --peer torch --python "$venv_python" --pairs 3
	measure strategy-torchft "$flock" bench strategy --measure sync --peer torchft --pairs 7
	measure allreduce-torch2 "$flock" bench allreduce --nproc 2,4 --size 1MiB,16MiB,100MiB --peer gloo --python "$venv_python" --pairs 5 --timeout 2m
	measure train_step-torch2 "$venv_python" bench/peers/compare_train.py --date "$date"
fi
echo "measure.sh: tables in $out" >&2
