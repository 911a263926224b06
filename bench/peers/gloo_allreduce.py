#!/usr/bin/python3
"""One rank of the Gloo all-reduce peer of `flock bench allreduce`.

Started once per rank by the flock harness with torchrun's variables (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT) in the environment; joins a
torch.distributed process group with the gloo backend and, for each size
in --sizes (bytes), all-reduces (sum) a float32 tensor of that size: --warmup
untimed operations, then --iters operations each timed on its own after a
barrier. Rank 0 prints one JSON object per size on stdout:

  {"impl": "gloo", "version": torch.__version__, "nproc": n, "bytes": S,
   "seconds": [t_1, ..., t_iters]}

and checks the result against the sum of the ranks' inputs (every rank
fills its tensor with rank + 1, so each element must be n(n+1)/2).
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", required=True, help="comma-separated sizes in bytes")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave)")
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method="env://")
    rank, n = dist.get_rank(), dist.get_world_size()
    want = n * (n + 1) / 2
    for size in [int(s) for s in a.sizes.split(",")]:
        elems = size // 4
        t = torch.empty(elems, dtype=torch.float32)
        for _ in range(a.warmup):
            t.fill_(rank + 1)
            dist.all_reduce(t)
        times = []
        for _ in range(a.iters):
            t.fill_(rank + 1)
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(t)
            times.append(time.perf_counter() - t0)
        if elems > 0 and not (bool((t == want).all())):
            print(f"gloo_allreduce: rank {rank}: wrong sum at {size} bytes", file=sys.stderr)
            sys.exit(1)
        if rank == 0:
            print(json.dumps({"impl": "gloo", "version": torch.__version__, "nproc": n,
                              "bytes": elems * 4, "seconds": times}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
