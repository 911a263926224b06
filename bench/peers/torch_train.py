#!/usr/bin/python3
"""PyTorch peer of bench/cmd/trainstep: the same networks, the same step.

The models repeat nn/models/models.go layer for layer, so their parameter
names (``1.weight``, ``3.bias``, ...) are flock's. One training step is
forward, mean cross-entropy, backward, SGD (rate 0.01, momentum 0.9) on one
fixed batch of random 28x28x1 float32 images, gradients cleared with
``zero_grad(set_to_none=True)`` as flock's ZeroGrad does. Each measurement
runs ``--warmup`` untimed and ``--steps`` timed steps and prints
images/s = batch * steps / seconds, as JSON Lines with ``--json``.

Run it with Debian's /usr/bin/python3 (python3-torch), 2 threads, and
OPENBLAS_CORETYPE unset (see BENCHMARKS.md).
"""

import argparse
import datetime
import json
import os
import platform
import sys
import time

import torch
from torch import nn
import torch.nn.functional as F

LEARNING_RATE = 0.01
MOMENTUM = 0.9


def build(name, channels=1, image=28, classes=10):
    """The network flock registers as name, for channels×image×image inputs
    and the given number of classes (Fashion-MNIST's by default)."""
    if name == "mlp":
        return nn.Sequential(
            nn.Flatten(1, -1),
            nn.Linear(channels * image * image, 256), nn.ReLU(),
            nn.Linear(256, 256), nn.ReLU(),
            nn.Linear(256, classes),
        )
    if name == "cnn":
        if image % 4:
            raise SystemExit(f"torch_train: cnn needs an image side divisible by 4, got {image}")
        return nn.Sequential(
            nn.Conv2d(channels, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(1, -1),
            nn.Linear(32 * (image // 4) * (image // 4), 64), nn.ReLU(),
            nn.Linear(64, classes),
        )
    raise SystemExit(f"torch_train: unknown model {name!r} (available: cnn, mlp)")


def measure(name, batch, warmup, steps, seed):
    torch.manual_seed(seed)
    model = build(name)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
    x = torch.randn(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    first = last = None
    for i in range(warmup):
        last = step()
        if i == 0:
            first = last
    start = time.perf_counter()
    for i in range(steps):
        last = step()
        if first is None:
            first = last
    seconds = time.perf_counter() - start
    return {
        "model": name,
        "batch": batch,
        "warmup": warmup,
        "steps": steps,
        "params": sum(p.numel() for p in model.parameters()),
        "seconds": seconds,
        "img_per_s": batch * steps / seconds,
        "ms_per_step": 1000 * seconds / steps,
        "loss_first": first,
        "loss_last": last,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mlp,cnn", help="comma-separated: mlp, cnn")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument("--json", action="store_true", help="print JSON Lines")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    settings = {
        "impl": "pytorch",
        "version": torch.__version__,
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "mkldnn": torch.backends.mkldnn.is_available(),
        "python": platform.python_version(),
        "executable": sys.executable,
        "env": {k: os.environ.get(k) for k in
                ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "OMP_WAIT_POLICY")},
    }
    for _ in range(a.repeat):
        for name in a.model.split(","):
            r = measure(name, a.batch, a.warmup, a.steps, a.seed)
            if a.json:
                rec = {"impl": settings["impl"], "version": settings["version"], **r, **settings,
                       "time": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
                print(json.dumps(rec), flush=True)
            else:
                print(f"{r['model']:<4} batch {r['batch']}: {r['img_per_s']:9.1f} img/s  "
                      f"{r['ms_per_step']:8.3f} ms/step  ({r['steps']} steps, {settings['threads']} threads, "
                      f"loss {r['loss_first']:.4f} → {r['loss_last']:.4f})", flush=True)


if __name__ == "__main__":
    main()
