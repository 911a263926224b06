#!/bin/bash
# Streaming synchronization over TCP: 2 and 4 flock train processes on
# this host (FLOCK_SHM=0 keeps them off shared memory), the CNN for 2
# epochs at lr 0.1 with H = 8, whole against 4 fragments with overlaps 0,
# 1 and 2, each configuration REPS times; prints a Markdown table of rank
# 0's summaries (medians and ranges).
#
#   go build -o /tmp/flock ./cmd/flock && bench/stream/overlap.sh /tmp/flock 2
set -euo pipefail
flock=${1:?usage: overlap.sh FLOCK [REPS]}
reps=${2:-2}
out=$(mktemp -d)
for rep in $(seq 1 "$reps"); do
  for n in 2 4; do
    for cfg in "whole:" "frag4:--fragments 4" "frag4-ov1:--fragments 4 --overlap 1" "frag4-ov2:--fragments 4 --overlap 2"; do
      name=${cfg%%:*}
      # shellcheck disable=SC2086
      FLOCK_SHM=0 "$flock" run --nproc "$n" -- "$flock" train --epochs 2 --lr 0.1 --sync constant --h 8 --eval-every 0 --json ${cfg#*:} \
        >"$out/$rep-$n-$name.jsonl" 2>"$out/$rep-$n-$name.err"
    done
  done
done
python3 - "$out" <<'PY'
import glob, json, os, statistics as st, sys
rows = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.jsonl"))):
    rep, n, name = os.path.basename(f)[:-6].split("-", 2)
    for line in open(f):
        if "{" in line:
            r = json.loads(line[line.index("{"):])
            if r.get("kind") == "summary":
                rows.setdefault((int(n), name), []).append(r)
label = {"whole": "whole model at the round's end", "frag4": "`--fragments 4`",
         "frag4-ov1": "`--fragments 4 --overlap 1`", "frag4-ov2": "`--fragments 4 --overlap 2`"}
def rng(xs, p=2, unit=""):
    return f"{st.median(xs):.{p}f}{unit} ({min(xs):.{p}f}–{max(xs):.{p}f}{unit})"
print("| processes | synchronization | syncs | bytes per sync | waiting on communication (s) | in flight (s) | hidden behind compute | wall (s) |")
print("|---|---|---|---|---|---|---|---|")
for n in (2, 4):
    for name in ("whole", "frag4", "frag4-ov1", "frag4-ov2"):
        rs = rows[(n, name)]
        c = [r["comm"] for r in rs]
        streamed = all(x.get("sync_s") for x in c)
        hidden = rng([100 * max(0, 1 - x.get("sync_waited_s", 0) / x["sync_s"]) for x in c], 0, "%") if streamed else "–"
        flight = rng([x["sync_s"] for x in c]) if streamed else "–"
        print(f"| {n} | {label[name]} | {c[0]['syncs']} | {c[0]['bytes_sent'] // c[0]['syncs']:,} | "
              f"{rng([x['blocked_s'] for x in c])} | {flight} | {hidden} | {rng([r['wall_s'] for r in rs], 1)} |")
PY
