"""torchft peer of `flock bench strategy --measure sync`: the cost of one
synchronization of torchft's LocalSGD and DiLoCo over Gloo.

Starts torchft's lighthouse (the Rust server in torchft._torchft) in this
process and --nproc replica processes on this machine, each one replica
group of one rank with its own TCPStore, a torchft Manager (synchronous
quorum, min_replica_size = nproc) over torchft's ProcessGroupGloo, and the
parameters of --model as bench/peers/torch_model.py builds it. For each
strategy every replica wraps an SGD optimizer in LocalSGD or DiLoCo (outer
optimizer SGD, Nesterov momentum 0.9, rate 0.7, one fragment) with
sync_every = 1 and no gradients, so that each optimizer.step() is one
synchronization and nothing else: the quorum through the lighthouse, the
all-reduce (avg) of every parameter and, for DiLoCo, the pseudo-gradient
and outer step. Each pair times --iters steps of each strategy after
--warmup untimed ones (first pair only), one warm-up pair first; the figure
is the median T on replica 0, also as bus bandwidth 2(n-1)/n · S/T in GB/s
for S bytes of parameters. Prints one JSON record per pair and strategy.

Run it with the python of bench/peers/setup.sh's environment.
"""

import argparse
import datetime
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from importlib.metadata import version

STRATEGIES = ("localsgd", "diloco")


def replica(a, rid, lighthouse, out):
    import torch
    from torch.distributed import TCPStore
    from torchft import Manager, ProcessGroupGloo
    from torchft.local_sgd import DiLoCo, LocalSGD

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch_model  # noqa: E402  (the same architectures)

    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    model = torch_model.build(a.model, a.image, a.channels, a.classes)
    params = sum(p.numel() for p in model.parameters())
    store = TCPStore("localhost", 0, 1, is_master=True, wait_for_workers=False)
    inner = torch.optim.SGD(model.parameters(), lr=0.01)
    outer = torch.optim.SGD(model.parameters(), lr=0.7, momentum=0.9, nesterov=True)
    manager = Manager(
        pg=ProcessGroupGloo(), min_replica_size=a.nproc, use_async_quorum=False,
        load_state_dict=lambda sd: model.load_state_dict(sd["model"]),
        state_dict=lambda: {"model": model.state_dict()},
        replica_id=f"replica{rid}", store_addr="localhost", store_port=store.port,
        rank=0, world_size=1, lighthouse_addr=lighthouse,
        timeout=datetime.timedelta(seconds=a.timeout), quorum_timeout=datetime.timedelta(seconds=a.timeout),
    )
    # Made once: DiLoCo registers its fragment's state with the manager.
    wrappers = {
        "localsgd": LocalSGD(manager, model, inner, sync_every=1),
        "diloco": DiLoCo(manager, [model], inner, outer, sync_every=1),
    }
    try:
        for pair in range(a.pairs + 1):
            for name in a.strategies:
                with wrappers[name]:
                    for _ in range(a.warmup if pair == 0 else 0):
                        inner.step()
                    times = []
                    for _ in range(a.iters):
                        t0 = time.perf_counter()
                        inner.step()
                        times.append(time.perf_counter() - t0)
                if rid == 0:
                    t = statistics.median(times)
                    s = 4 * params
                    out.put({
                        "record": "sync", "impl": "torchft-" + name, "model": a.model, "params": params,
                        "nproc": a.nproc, "bytes": s, "pair": pair, "warmup_pair": pair == 0,
                        "median_s": t, "busbw_gbps": 2 * (a.nproc - 1) / a.nproc * s / t / 1e9,
                        "transport": "gloo (torchft ProcessGroupGloo, TCP)",
                        "version": f"torchft {version('torchft')}, torch {torch.__version__}",
                    })
    finally:
        manager.shutdown(wait=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--image", type=int, default=32)
    ap.add_argument("--channels", type=int, default=3)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--timeout", type=float, default=120, help="seconds of torchft's quorum and collectives")
    a = ap.parse_args()
    a.strategies = a.strategies.split(",")
    for s in a.strategies:
        if s not in STRATEGIES:
            raise SystemExit(f"torchft_sync: unknown strategy {s!r} (strategies: {', '.join(STRATEGIES)})")
    from torchft._torchft import LighthouseServer

    lighthouse = LighthouseServer(bind="127.0.0.1:0", min_replicas=a.nproc)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=replica, args=(a, rid, lighthouse.address(), out)) for rid in range(a.nproc)]
    for p in procs:
        p.start()
    want = (a.pairs + 1) * len(a.strategies)
    got = 0
    try:
        while got < want:
            try:
                rec = out.get(timeout=5)
            except Exception:  # queue.Empty: see whether a replica died
                dead = [p for p in procs if p.exitcode not in (None, 0)]
                if dead:
                    raise SystemExit(f"torchft_sync: replica exited with status {dead[0].exitcode}")
                continue
            print(json.dumps(rec), flush=True)
            got += 1
        for p in procs:
            p.join(timeout=a.timeout)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
        lighthouse.shutdown()


if __name__ == "__main__":
    main()
