#!/usr/bin/python3
"""PyTorch peer of `flock bench model`: the same networks, the same step.

Builds the model flock registers under the same name (torchvision's ResNets
and VisionTransformer, the CIFAR ResNets of He et al. with option-A
shortcuts, and the small networks of torch_train.py), then times the phases
of a training step on one fixed batch of N(0, 1) images with random labels:
forward (model and mean cross-entropy), backward, and SGD (rate 0.01,
momentum 0.9) with zero_grad(set_to_none=True). Prints one JSON record per
measurement with the field names of flock's bench.ModelStepResult (medians
over the timed steps, in milliseconds).

Run it with Debian's /usr/bin/python3 (python3-torch, python3-torchvision),
2 threads and OPENBLAS_CORETYPE unset (see BENCHMARKS.md), or with the
PyTorch 2 of bench/peers/setup.sh's environment. With --compile (PyTorch 2)
the model runs under torch.compile (inductor, C++ kernels on the CPU): the
first step compiles its forward and backward graphs, untimed, before the
--warmup steps (the record's warmup counts it), and the record's compile_s
is that step's time less the median timed step. The optimizer step stays
eager.
"""

import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_train  # noqa: E402  (the small networks)

LEARNING_RATE = 0.01
MOMENTUM = 0.9


class CIFARBlock(nn.Module):
    """BasicBlock of He et al. (2016), section 4.2, with option-A shortcuts:
    stride-2 subsampling and zero-padded channels, no parameters."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.pad = cout - cin
        self.stride = stride

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        sc = x
        if self.stride != 1 or self.pad:
            sc = x[:, :, ::self.stride, ::self.stride]
            sc = F.pad(sc, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))
        return F.relu(out + sc)


class CIFARResNet(nn.Module):
    def __init__(self, depth, channels, classes):
        super().__init__()
        n = (depth - 2) // 6
        self.conv1 = nn.Conv2d(channels, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        layers, cin = [], 16
        for i, cout in enumerate((16, 32, 64)):
            blocks = []
            for j in range(n):
                blocks.append(CIFARBlock(cin, cout, 2 if (i > 0 and j == 0) else 1))
                cin = cout
            layers.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3 = layers
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


VIT = {"tiny": (192, 12, 3), "small": (384, 12, 6), "base": (768, 12, 12), "large": (1024, 24, 16)}


def build(name, image, channels, classes):
    import torchvision
    if name in ("mlp", "cnn"):
        return torch_train.build(name, channels, image, classes)
    if name.startswith("resnet") and name[6:].isdigit() and int(name[6:]) in (20, 32, 44, 56, 110):
        return CIFARResNet(int(name[6:]), channels, classes)
    if name.startswith("resnet") or name.startswith("wide_resnet"):
        m = getattr(torchvision.models, name)(num_classes=classes)
        if channels != 3 or image <= 64:
            # flock's registry: the small-input stem (3x3 conv, stride 1,
            # no max-pool) for sides up to 64.
            k, s, p = (3, 1, 1) if image <= 64 else (7, 2, 3)
            m.conv1 = nn.Conv2d(channels, 64, k, s, p, bias=False)
            if image <= 64:
                m.maxpool = nn.Identity()
        return m
    if name.startswith("vit_"):
        size, patch = name[4:].split("_p")
        dim, depth, heads = VIT[size]
        m = torchvision.models.VisionTransformer(
            image_size=image, patch_size=int(patch), num_layers=depth, num_heads=heads,
            hidden_dim=dim, mlp_dim=4 * dim, num_classes=classes)
        if channels != 3:
            m.conv_proj = nn.Conv2d(channels, dim, int(patch), int(patch))
        return m
    raise SystemExit(f"torch_model: unknown model {name!r}")


def measure(a, name):
    torch.manual_seed(a.seed)
    model = build(name, a.image, a.channels, a.classes)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
    params = sum(p.numel() for p in model.parameters())
    if a.compile:
        model = torch.compile(model)
    x = torch.randn(a.batch, a.channels, a.image, a.image)
    y = torch.randint(0, a.classes, (a.batch,))
    times = {"forward": [], "backward": [], "optimizer": [], "step": []}
    losses = []

    def step(record):
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(x), y)
        losses.append(loss.item())
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        if record is None:
            return t3 - t0
        if record:
            for k, v in (("forward", t1 - t0), ("backward", t2 - t1), ("optimizer", t3 - t2), ("step", t3 - t0)):
                times[k].append(1000 * v)

    first = None
    if a.compile:
        first = step(None)
    for _ in range(a.warmup):
        step(False)
    for _ in range(a.steps):
        step(True)
    med = {k: statistics.median(v) for k, v in times.items()}
    r = {
        "model": name, "batch": a.batch, "image": a.image, "channels": a.channels,
        "classes": a.classes, "warmup": a.warmup + 1 if a.compile else a.warmup, "steps": a.steps,
        "params": params,
        "threads": torch.get_num_threads(),
        "forward_ms": med["forward"], "backward_ms": med["backward"],
        "optimizer_ms": med["optimizer"], "step_ms": med["step"],
        "img_per_s": a.batch / (med["step"] / 1000),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "loss_first": losses[0], "loss_last": losses[-1],
    }
    if a.compile:
        r["compile_s"] = max(first - med["step"] / 1000, 0.0)
        r["compile_backend"] = "inductor"
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--image", type=int, default=32)
    ap.add_argument("--channels", type=int, default=3)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument("--compile", action="store_true", help="run the model under torch.compile (PyTorch 2)")
    a = ap.parse_args()
    if a.compile and not hasattr(torch, "compile"):
        raise SystemExit(f"torch_model: --compile needs PyTorch 2, not {torch.__version__}")
    torch.set_num_threads(a.threads)
    r = measure(a, a.model)
    r.update({
        "impl": "pytorch", "version": torch.__version__,
        "mkldnn": torch.backends.mkldnn.is_available(),
        "python": platform.python_version(),
        "env": {k: os.environ.get(k) for k in
                ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "OMP_WAIT_POLICY")},
        "time": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    })
    print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
