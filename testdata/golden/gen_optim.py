#!/usr/bin/env python3
"""Golden values for flock's optimizers: five steps of each torch.optim
optimizer (and of LARS, written here in torch from You et al. 2017,
Algorithm 1, with the formula optim/lars.go documents) on fixed parameters
and fixed per-step gradients.

Run with Debian's PyTorch:  /usr/bin/python3 testdata/golden/gen_optim.py
Writes testdata/golden/optim.safetensors with, for each case C:
  C.w0, C.b0                initial parameters ([3, 4] and [4])
  C.gw.K, C.gb.K            the gradients given at step K (K = 0..4)
  C.w.K, C.b.K              the parameters after step K
and the cases' settings in the metadata (JSON per case).
"""
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import write_safetensors  # noqa: E402

STEPS = 5


def lars_step(params, grads, state, lr, wd, momentum, nesterov, trust, eps, no_adapt):
    for i, (p, g) in enumerate(zip(params, grads)):
        if no_adapt[i]:
            d = g.clone()
        else:
            wn = p.norm().item()
            gn = g.norm().item()
            r = trust * wn / (gn + wd * wn + eps) if wn > 0 and gn > 0 else 1.0
            d = (g + wd * p) * r
        if momentum != 0:
            if i not in state:
                state[i] = d.clone()
            else:
                state[i].mul_(momentum).add_(d)
            d = d + momentum * state[i] if nesterov else state[i].clone()
        p.sub_(lr * d)


CASES = {
    "sgd_plain": ("sgd", dict(lr=0.1)),
    "sgd_momentum_wd": ("sgd", dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=1e-2)),
    "sgd_nesterov": ("sgd", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)),
    "adamw": ("adamw", dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05)),
    "adamw_amsgrad": ("adamw", dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1, amsgrad=True)),
    "lars": ("lars", dict(lr=0.5, weight_decay=1e-3, momentum=0.9, nesterov=False, trust=0.02, eps=1e-8)),
    "lars_nesterov": ("lars", dict(lr=0.5, weight_decay=1e-3, momentum=0.9, nesterov=True, trust=0.02, eps=1e-8)),
}


def main():
    out, meta = {}, {}
    torch.manual_seed(0)
    for name, (kind, cfg) in CASES.items():
        w = torch.randn(3, 4, dtype=torch.float64)
        b = torch.randn(4, dtype=torch.float64)
        grads = [(torch.randn(3, 4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)) for _ in range(STEPS)]
        out[f"{name}.w0"], out[f"{name}.b0"] = w.clone(), b.clone()
        for k, (gw, gb) in enumerate(grads):
            out[f"{name}.gw.{k}"], out[f"{name}.gb.{k}"] = gw, gb
        pw, pb = w.clone().requires_grad_(), b.clone().requires_grad_()
        state = {}
        if kind == "sgd":
            opt = torch.optim.SGD([pw, pb], **cfg)
        elif kind == "adamw":
            opt = torch.optim.AdamW([pw, pb], **cfg)
        for k, (gw, gb) in enumerate(grads):
            if kind == "lars":
                with torch.no_grad():
                    lars_step([pw, pb], [gw, gb], state, cfg["lr"], cfg["weight_decay"], cfg["momentum"],
                              cfg["nesterov"], cfg["trust"], cfg["eps"], no_adapt=[False, True])
            else:
                pw.grad, pb.grad = gw.clone(), gb.clone()
                opt.step()
            out[f"{name}.w.{k}"], out[f"{name}.b.{k}"] = pw.detach().clone(), pb.detach().clone()
        meta[name] = json.dumps({"kind": kind, **{k: (list(v) if isinstance(v, tuple) else v) for k, v in cfg.items()}})
    meta["torch"] = torch.__version__
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "optim.safetensors")
    write_safetensors(path, out, meta)
    print(f"wrote {path}: {len(out)} tensors")


if __name__ == "__main__":
    main()
