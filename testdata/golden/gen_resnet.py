#!/usr/bin/env python3
"""Generate testdata/golden/models_resnet.safetensors, the PyTorch reference
for package nn/models' ResNets.

Architectures. For every network under test the metadata entry
"arch.<name>" holds JSON with the options that build it in flock
(family "torchvision" or "cifar", depth, classes, in_channels, small_stem,
groups, width_per_group, shortcut), its parameter count "params" and its
state-dict "keys" as [key, shape] pairs in state_dict order. The torchvision
networks are torchvision's own builders (resnet18 … wide_resnet50_2,
resnext50_32x4d); the small stem replaces conv1 by a 3×3 stride-1 convolution
and maxpool by nn.Identity; the CIFAR family (He et al., 2016, §4.2) is
defined below with torchvision's BasicBlock and the parameter-free option A
shortcut (or option B, a 1×1 convolution and batch norm).

Cases. Each numerical case NAME (metadata "case.NAME": the arch it uses, the
batch and image size, seeds and labels) builds its network in float64 with
weights drawn from hash_uniform (hashinit.py; the Go test draws the same
numbers): the k-th state-dict entry, counting from 0, takes
u = hash_uniform(weight_seed + k, numel) and becomes

    4-D conv weight       u·√2·√(3/fan_in)
    2-D linear weight     u·√(3/fan_in)
    running_mean          0.1·u
    running_var           1 + 0.5·|u|
    other 1-D weight      1 + 0.1·u     (batch-norm γ)
    other 1-D bias        0.1·u         (batch-norm β, fc bias)

(integer buffers stay 0). The input is hash_uniform(input_seed, N·C·H·W)
in NCHW order. The case records, in float64,

    NAME.f64.logits_eval           logits in evaluation mode
    NAME.f64.logits_train          logits in training mode (batch statistics)
    NAME.f64.loss                  cross-entropy of logits_train and labels
    NAME.f64.grad.<param>          ∂loss/∂param summarised as
                                   [Σg, ‖g‖₂, g·hash_uniform(dot_seed + k, numel),
                                    g at sample_indices(numel, 64)…]
    NAME.f64.state_after.<buffer>  running_mean and running_var after the
                                   training forward pass

and, as information for the float32 check's tolerance, the largest error of
PyTorch's own float32 run (same weights rounded to float32) relative to
max|logit| in the case JSON ("torch_f32_err").

Run with Debian's torch (1.13) and torchvision (0.14):

    /usr/bin/python3 testdata/golden/gen_resnet.py
"""

import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torchvision.models.resnet import BasicBlock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hashinit import hash_uniform, sample_indices  # noqa: E402
from safetensors_io import write_safetensors  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = 64


class ZeroPadShortcut(nn.Module):
    """Option A of He et al. (2016): x[:, :, ::s, ::s] with the channels
    zero-padded, before channels first and after channels last."""

    def __init__(self, stride, before, after):
        super().__init__()
        self.stride, self.before, self.after = stride, before, after

    def forward(self, x):
        s = self.stride
        return F.pad(x[:, :, ::s, ::s], (0, 0, 0, 0, self.before, self.after))


class CIFARResNet(nn.Module):
    """The CIFAR-10 ResNet of He et al. (2016), depth 6n+2: a 3×3 stem
    convolution to 16 channels, three stages of n BasicBlocks with 16, 32
    and 64 channels (stride 2 at the start of stages 2 and 3), global average
    pooling and a linear layer, named as torchvision's ResNet."""

    def __init__(self, depth, num_classes=10, in_channels=3, shortcut="A"):
        super().__init__()
        assert (depth - 2) % 6 == 0
        n = (depth - 2) // 6
        self.conv1 = nn.Conv2d(in_channels, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        inp = 16
        for i, planes in enumerate([16, 32, 64]):
            blocks = []
            for j in range(n):
                stride = 2 if i > 0 and j == 0 else 1
                ds = None
                if stride != 1 or inp != planes:
                    if shortcut == "A":
                        before = (planes - inp) // 2
                        ds = ZeroPadShortcut(stride, before, planes - inp - before)
                    else:
                        ds = nn.Sequential(nn.Conv2d(inp, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))
                blocks.append(BasicBlock(inp, planes, stride, ds))
                inp = planes
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


TORCHVISION = {
    18: torchvision.models.resnet18,
    34: torchvision.models.resnet34,
    50: torchvision.models.resnet50,
    101: torchvision.models.resnet101,
    152: torchvision.models.resnet152,
}


def arch(family, depth, classes, in_channels=3, small_stem=False, groups=1, width_per_group=64, shortcut="A"):
    return dict(family=family, depth=depth, classes=classes, in_channels=in_channels,
                small_stem=small_stem, groups=groups, width_per_group=width_per_group, shortcut=shortcut)


ARCHS = {
    "resnet18": arch("torchvision", 18, 1000),
    "resnet34": arch("torchvision", 34, 1000),
    "resnet50": arch("torchvision", 50, 1000),
    "resnet101": arch("torchvision", 101, 1000),
    "resnet152": arch("torchvision", 152, 1000),
    "wide_resnet50_2": arch("torchvision", 50, 1000, width_per_group=128),
    "resnext50_32x4d": arch("torchvision", 50, 1000, groups=32, width_per_group=4),
    "resnet18_small_stem": arch("torchvision", 18, 10, small_stem=True),
    "resnet18_small_stem_gray": arch("torchvision", 18, 10, in_channels=1, small_stem=True),
    "resnet50_gray": arch("torchvision", 50, 7, in_channels=1),
    "resnet20": arch("cifar", 20, 10),
    "resnet32": arch("cifar", 32, 10),
    "resnet44": arch("cifar", 44, 10),
    "resnet56": arch("cifar", 56, 10),
    "resnet110": arch("cifar", 110, 10),
    "resnet20_b": arch("cifar", 20, 10, shortcut="B"),
    "resnet56_b_gray": arch("cifar", 56, 100, in_channels=1, shortcut="B"),
}


def build(a):
    if a["family"] == "cifar":
        return CIFARResNet(a["depth"], a["classes"], a["in_channels"], a["shortcut"])
    m = TORCHVISION[a["depth"]](weights=None, num_classes=a["classes"], groups=a["groups"],
                                width_per_group=a["width_per_group"])
    if a["small_stem"]:
        m.conv1 = nn.Conv2d(a["in_channels"], 64, 3, 1, 1, bias=False)
        m.maxpool = nn.Identity()
    elif a["in_channels"] != 3:
        m.conv1 = nn.Conv2d(a["in_channels"], 64, 7, 2, 3, bias=False)
    return m


def hash_init(model, seed):
    """Set the state dict from hash_uniform, as the module docstring says."""
    with torch.no_grad():
        for k, (name, t) in enumerate(model.state_dict().items()):
            if not t.is_floating_point():
                continue
            u = torch.from_numpy(hash_uniform(seed + k, t.numel())).reshape(t.shape)
            leaf = name.rsplit(".", 1)[-1]
            if t.dim() == 4:
                v = u * math.sqrt(2) * math.sqrt(3 / t[0].numel())
            elif t.dim() == 2:
                v = u * math.sqrt(3 / t[0].numel())
            elif leaf == "running_mean":
                v = 0.1 * u
            elif leaf == "running_var":
                v = 1 + 0.5 * u.abs()
            elif leaf == "weight":
                v = 1 + 0.1 * u
            elif leaf == "bias":
                v = 0.1 * u
            else:
                raise ValueError(f"no hash rule for {name} {tuple(t.shape)}")
            t.copy_(v.to(t.dtype))


CASES = {
    "resnet18": dict(arch="resnet18", batch=2, height=64, width=64, weight_seed=1_000_000, labels=[17, 923]),
    "resnet50": dict(arch="resnet50", batch=2, height=64, width=64, weight_seed=2_000_000, labels=[417, 5]),
    "resnet18_small_stem_gray": dict(arch="resnet18_small_stem_gray", batch=2, height=28, width=28,
                                     weight_seed=3_000_000, labels=[3, 8]),
    "resnet20": dict(arch="resnet20", batch=2, height=32, width=32, weight_seed=4_000_000, labels=[6, 1]),
    "resnet20_b": dict(arch="resnet20_b", batch=2, height=32, width=32, weight_seed=5_000_000, labels=[0, 9]),
}


def run_case(name, c, out, meta):
    a = ARCHS[c["arch"]]
    c = dict(c, dot_seed=c["weight_seed"] + 500_000, input_seed=c["weight_seed"] + 900_000, samples=SAMPLES)
    shape = (c["batch"], a["in_channels"], c["height"], c["width"])
    x = torch.from_numpy(hash_uniform(c["input_seed"], int(np.prod(shape))).reshape(shape))
    labels = torch.tensor(c["labels"], dtype=torch.int64)

    torch.manual_seed(0)
    m = build(a).double()
    hash_init(m, c["weight_seed"])
    m32 = build(a)
    m32.load_state_dict(m.state_dict())  # float64 → float32 rounding, as the Go test loads it
    keys = list(m.state_dict().keys())

    m.eval()
    with torch.no_grad():
        eval_logits = m(x)
    m.train()
    logits = m(x)
    loss = F.cross_entropy(logits, labels)
    loss.backward()

    p = f"{name}.f64."
    out[p + "logits_eval"] = eval_logits.numpy()
    out[p + "logits_train"] = logits.detach().numpy()
    out[p + "loss"] = loss.detach().numpy()
    params = dict(m.named_parameters())
    for k, key in enumerate(keys):
        if key in params:
            g = params[key].grad.detach().reshape(-1).numpy()
            dot = float(g @ hash_uniform(c["dot_seed"] + k, g.size))
            stats = [g.sum(), np.sqrt((g * g).sum()), dot] + [g[i] for i in sample_indices(g.size, SAMPLES)]
            out[p + "grad." + key] = np.array(stats, dtype=np.float64)
    for key, b in m.named_buffers():
        if key.endswith("running_mean") or key.endswith("running_var"):
            out[p + "state_after." + key] = b.detach().numpy().copy()

    m32.eval()
    with torch.no_grad():
        e32 = m32(x.float()).double()
    m32.train()
    with torch.no_grad():
        t32 = m32(x.float())
        l32 = F.cross_entropy(t32, labels).double()
    t32 = t32.double()
    scale = lambda ref: max(1.0, ref.abs().max().item())  # noqa: E731
    c["torch_f32_err"] = {
        "logits_eval": ((e32 - eval_logits).abs().max() / scale(eval_logits)).item(),
        "logits_train": ((t32 - logits.detach()).abs().max() / scale(logits.detach())).item(),
        "loss": ((l32 - loss.detach()).abs() / scale(loss.detach())).item(),
    }
    meta["case." + name] = json.dumps(c)
    print(f"{name}: loss {loss.item():.6f}, torch f32 errors {c['torch_f32_err']}")


def main():
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    out, meta = {}, {}
    for name, a in ARCHS.items():
        m = build(a)
        sd = m.state_dict()
        entry = dict(a, params=sum(p.numel() for p in m.parameters()),
                     keys=[[k, list(v.shape)] for k, v in sd.items()])
        meta["arch." + name] = json.dumps(entry)
        print(f"{name}: {entry['params']:,} parameters, {len(sd)} state-dict entries")
        del m, sd
    for name, c in CASES.items():
        run_case(name, c, out, meta)
    write_safetensors(os.path.join(HERE, "models_resnet.safetensors"), out, meta)


if __name__ == "__main__":
    main()
