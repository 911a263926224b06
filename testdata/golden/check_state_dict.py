#!/usr/bin/env python3
"""Check a state dict written by flock's nn.Save against PyTorch.

    check_state_dict.py STATE.safetensors IO.safetensors

STATE is the state of the model that nn's TestSaveLoadPyTorch builds (the
Net below mirrors it); IO holds the model's input ("input") and flock's
output in evaluation mode ("output"), and its metadata lists flock's key
order ("keys", comma-separated).

The file is read with a plain safetensors reader written here from the
format's specification (8-byte little-endian header length, JSON header,
data region), which also checks that the data region is tiled exactly.
Then the keys, order, shapes and dtypes must equal those of torch's
state_dict, load_state_dict(strict=True) must accept the tensors, and
torch's output on the input must match flock's. Prints "ok" and exits 0, or
prints the problems and exits 1.
"""

import json
import struct
import sys

import numpy as np
import torch
import torch.nn as nn

NUMPY = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4",
         "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}
TORCH = {torch.float64: "F64", torch.float32: "F32", torch.int64: "I64", torch.int32: "I32"}


def read_safetensors(path):
    """Return ({name: np.ndarray}, metadata, [names in data order])."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    entries = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])
    pos, out = 0, {}
    for name, e in entries:
        begin, end = e["data_offsets"]
        if begin != pos:
            raise ValueError(f"{name}: data starts at {begin}, expected {pos}")
        a = np.frombuffer(data[begin:end], dtype=NUMPY[e["dtype"]])
        if a.size != int(np.prod(e["shape"], dtype=np.int64)):
            raise ValueError(f"{name}: {a.size} elements for shape {e['shape']}")
        out[name] = (e["dtype"], a.reshape(e["shape"]).copy())
        pos = end
    if pos != len(data):
        raise ValueError(f"{len(data) - pos} trailing bytes after the last tensor")
    return out, meta


class Net(nn.Module):
    """The model of TestSaveLoadPyTorch, attribute for attribute."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1, bias=False),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.pos = nn.Embedding(16, 8)
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        h = self.features(x)                   # [N, 8, 4, 4]
        t = h.flatten(2).transpose(1, 2)       # [N, 16, 8]
        t = t + self.pos(torch.arange(16))
        a, _ = self.attn(t, t, t, need_weights=False)
        n = self.norm(t + a)
        return self.head(n.mean(1))            # [N, 5]


def main():
    state_path, io_path = sys.argv[1], sys.argv[2]
    problems = []
    state, meta = read_safetensors(state_path)
    io, io_meta = read_safetensors(io_path)
    if meta.get("format") != "pt":
        problems.append(f"metadata {meta}: want format=pt")

    net = Net()
    ref = net.state_dict()
    if list(ref) != io_meta.get("keys", "").split(","):
        problems.append(f"key order: flock {io_meta.get('keys')}, torch {','.join(ref)}")
    if set(ref) != set(state):
        problems.append(f"keys only in flock's file: {sorted(set(state) - set(ref))}; "
                        f"only in torch's state_dict: {sorted(set(ref) - set(state))}")
    for k, v in ref.items():
        if k not in state:
            continue
        dt, a = state[k]
        if list(a.shape) != list(v.shape):
            problems.append(f"{k}: shape {list(a.shape)} in the file, {list(v.shape)} in torch")
        if dt != TORCH[v.dtype] and not (v.is_floating_point() and dt == "F32"):
            problems.append(f"{k}: dtype {dt} in the file, {v.dtype} in torch")
    if problems:
        print("\n".join(problems))
        sys.exit(1)

    net.load_state_dict({k: torch.from_numpy(a) for k, (_, a) in state.items()}, strict=True)
    net.eval()
    x = torch.from_numpy(io["input"][1]).to(torch.get_default_dtype())
    with torch.no_grad():
        y = net(x).numpy()
    want = io["output"][1]
    err = np.abs(y - want).max()
    if not np.allclose(y, want, rtol=1e-4, atol=1e-5):
        problems.append(f"output differs by up to {err}:\ntorch {y}\nflock {want}")
    if problems:
        print("\n".join(problems))
        sys.exit(1)
    print(f"ok: {len(state)} tensors, max output difference {err:.2e}")


if __name__ == "__main__":
    main()
