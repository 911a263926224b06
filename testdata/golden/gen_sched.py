#!/usr/bin/env python3
"""Golden values for flock's learning-rate schedules: the rates that
torch.optim.lr_scheduler gives step by step for the schedules that
optim.Schedule expresses in closed form.

Run with Debian's PyTorch:  /usr/bin/python3 testdata/golden/gen_sched.py
Writes testdata/golden/sched.safetensors with, for each case C, C.lr: the
rate of steps 0, 1, ..., float64 (the group's lr before the K-th optimizer
step), and in the metadata the case's optim.Schedule settings as JSON
(base, decay, warmup_steps, warmup_start, total_steps, final, milestones,
gamma).
"""
import json
import os
import sys
import warnings

import torch
from torch.optim import lr_scheduler as S

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import write_safetensors  # noqa: E402


def warmup_then(opt, cfg, make_after):
    w = cfg["warmup_steps"]
    warm = S.LinearLR(opt, start_factor=cfg["warmup_start"], end_factor=1.0, total_iters=w)
    if make_after is None:
        return warm
    return S.SequentialLR(opt, [warm, make_after(opt)], milestones=[w])


CASES = {
    # Linear warm-up from 0.1·η over 5 steps, then cosine to η_min at step 25.
    "cosine": (dict(base=0.1, decay="cosine", warmup_steps=5, warmup_start=0.1, total_steps=25, final=1e-3),
               lambda opt, c: warmup_then(opt, c, lambda o: S.CosineAnnealingLR(
                   o, T_max=c["total_steps"] - c["warmup_steps"], eta_min=c["final"]))),
    # Cosine to zero without warm-up.
    "cosine_nowarm": (dict(base=0.4, decay="cosine", warmup_steps=0, warmup_start=1.0, total_steps=16, final=0.0),
                      lambda opt, c: S.CosineAnnealingLR(opt, T_max=c["total_steps"], eta_min=c["final"])),
    # Linear warm-up from 0.25·η over 3 steps, then linear decay to η_min at step 20.
    "linear": (dict(base=0.2, decay="linear", warmup_steps=3, warmup_start=0.25, total_steps=20, final=2e-3),
               lambda opt, c: warmup_then(opt, c, lambda o: S.LinearLR(
                   o, start_factor=1.0, end_factor=c["final"] / c["base"],
                   total_iters=c["total_steps"] - c["warmup_steps"]))),
    # Linear warm-up from 0.2·η over 4 steps, then constant.
    "constant": (dict(base=0.05, decay="constant", warmup_steps=4, warmup_start=0.2, total_steps=12),
                 lambda opt, c: warmup_then(opt, c, None)),
    # Step decay at absolute milestones; a repeated milestone applies γ twice.
    "step": (dict(base=0.3, decay="step", warmup_steps=0, warmup_start=1.0, total_steps=20,
                  milestones=[4, 9, 9, 15], gamma=0.3),
             lambda opt, c: S.MultiStepLR(opt, milestones=c["milestones"], gamma=c["gamma"])),
}


def main():
    warnings.simplefilter("ignore")
    out, meta = {}, {}
    for name, (cfg, make) in CASES.items():
        p = torch.zeros(1, requires_grad=True)
        opt = torch.optim.SGD([p], lr=cfg["base"])
        sched = make(opt, cfg)
        lrs = []
        for _ in range(cfg["total_steps"] + 1):
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
        out[f"{name}.lr"] = torch.tensor(lrs, dtype=torch.float64)
        meta[name] = json.dumps(cfg)
    meta["torch"] = torch.__version__
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sched.safetensors")
    write_safetensors(path, out, meta)
    print(f"wrote {path}: {len(out)} tensors")


if __name__ == "__main__":
    main()
