#!/usr/bin/env python3
"""PyTorch peer of flock's GPU training-step benchmark (BenchmarkModelStep of
backend/cuda, run by bench/gpu/run.sh).

One training step is what flock's bench.TrainStep does: forward on one fixed
batch of N(0, 1) 3x224x224 float32 images, mean cross-entropy against fixed
random labels of 1000 classes, backward, SGD (rate 0.01, momentum 0.9),
gradients cleared with zero_grad(set_to_none=True), and the loss read back
to the host (.item(), which synchronises, as flock's step does). Mixed
precision is torch.autocast(bfloat16) around forward and loss, with float32
weights and optimizer state; TF32 is allowed for the float32 work, as
flock's benchmark sets Options.TF32. PyTorch runs eager (no torch.compile),
channels-first, cuDNN benchmark mode on.

Each measurement runs --warmup untimed and --steps timed steps and prints
images/s = batch * steps / seconds as one JSON line per model and repeat.

    python3 bench/gpu/torch_step.py --model resnet50,vit_base_p16 --batch 128 --json
"""

import argparse
import datetime
import json
import platform
import sys
import time

import torch
from torch import nn
import torch.nn.functional as F

LEARNING_RATE = 0.01
MOMENTUM = 0.9


def build(name, num_classes):
    import torchvision

    builders = {
        "resnet50": lambda: torchvision.models.resnet50(num_classes=num_classes),
        "resnet18": lambda: torchvision.models.resnet18(num_classes=num_classes),
        "vit_base_p16": lambda: torchvision.models.vit_b_16(num_classes=num_classes),
    }
    if name not in builders:
        raise SystemExit(f"torch_step: unknown model {name!r} (available: {', '.join(sorted(builders))})")
    return builders[name]()


def measure(name, batch, warmup, steps, autocast, seed):
    torch.manual_seed(seed)
    dev = torch.device("cuda")
    model = build(name, 1000).to(dev)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
    x = torch.randn(batch, 3, 224, 224, device=dev)
    labels = torch.randint(0, 1000, (batch,), device=dev)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = F.cross_entropy(model(x), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    first = step()
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    last = first
    for _ in range(steps):
        last = step()
    torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    return {
        "impl": "pytorch",
        "version": torch.__version__,
        "model": name,
        "batch": batch,
        "steps": steps,
        "autocast": "bf16" if autocast else "off",
        "images_per_sec": batch * steps / secs,
        "ms_per_step": 1e3 * secs / steps,
        "loss_first": first,
        "loss_last": last,
        "device": torch.cuda.get_device_name(0),
        "cudnn": torch.backends.cudnn.version(),
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "time": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def matmul(n, mode, repeat):
    """TFLOP/s of torch.matmul at n³ in float32, TF32 or bfloat16 inputs."""
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
    dt = torch.bfloat16 if mode == "bf16" else torch.float32
    a = torch.randn(n, n, device=dev, dtype=dt)
    b = torch.randn(n, n, device=dev, dtype=dt)
    for _ in range(3):
        torch.matmul(a, b)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(repeat):
        torch.matmul(a, b)
    torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    torch.backends.cuda.matmul.allow_tf32 = False
    return {"impl": "pytorch", "bench": f"matmul_{mode}_{n}", "tflops": 2 * n**3 * repeat / secs / 1e12}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet50,vit_base_p16", help="comma-separated models")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--autocast", choices=["bf16", "off"], default="bf16")
    p.add_argument("--matmul", type=int, default=0, help="also time torch.matmul at this size (0: skip)")
    p.add_argument("--json", action="store_true", help="print JSON Lines")
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("torch_step: PyTorch sees no GPU")
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cuda.matmul.allow_tf32 = True
    out = []
    if args.matmul:
        for mode in ("fp32", "tf32", "bf16"):
            out.append(matmul(args.matmul, mode, 20))
    torch.backends.cuda.matmul.allow_tf32 = True
    for _ in range(args.repeat):
        for name in filter(None, args.model.split(",")):
            out.append(measure(name, args.batch, args.warmup, args.steps, args.autocast == "bf16", args.seed))
    for r in out:
        if args.json:
            print(json.dumps(r), flush=True)
        elif "model" in r:
            print(f"{r['model']:9s} batch {r['batch']}: {r['images_per_sec']:9.1f} img/s  {r['ms_per_step']:8.2f} ms/step")
        else:
            print(f"{r['bench']:22s} {r['tflops']:8.1f} TFLOP/s")


if __name__ == "__main__":
    sys.exit(main())
