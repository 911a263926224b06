"""A plain safetensors writer and reader for the golden-value scripts,
following the format's specification (8-byte little-endian header length,
JSON header with dtype/shape/data_offsets and optional __metadata__, then the
raw little-endian data), so that the scripts need only torch. The writer
orders tensors as the reference implementation does (decreasing alignment,
then name) and pads the header with spaces to a multiple of 8."""
import json
import os
import struct

import numpy as np
import torch

# dtype names in the reference implementation's order (increasing alignment)
ORDER = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16",
         "I32", "U32", "F32", "F64", "I64", "U64"]
NAMES = {
    torch.bool: "BOOL", torch.uint8: "U8", torch.int8: "I8", torch.int16: "I16",
    torch.float16: "F16", torch.bfloat16: "BF16", torch.int32: "I32",
    torch.float32: "F32", torch.float64: "F64", torch.int64: "I64",
}
_TORCH = {v: k for k, v in NAMES.items()}


def _as_torch(t):
    if isinstance(t, torch.Tensor):
        return t.detach().contiguous().cpu()
    return torch.from_numpy(np.array(t, order="C"))


def _bytes(t):
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    a = t.numpy()
    return a.astype(a.dtype.newbyteorder("<")).tobytes()


def write_safetensors(path, tensors, metadata=None):
    """Write a name → tensor (torch or numpy) dict, with optional string
    metadata; the file appears atomically (temp file, then rename)."""
    ts = {k: _as_torch(v) for k, v in tensors.items()}
    items = sorted(ts.items(), key=lambda kv: (-ORDER.index(NAMES[kv[1].dtype]), kv[0].encode()))
    header = {}
    if metadata:
        header["__metadata__"] = {k: str(metadata[k]) for k in sorted(metadata, key=str.encode)}
    blobs, off = [], 0
    for key, t in items:
        b = _bytes(t)
        header[key] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    h += b" " * (-len(h) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(path + ".tmp", path)
    print(f"{os.path.relpath(path)}: {len(ts)} tensors, {os.path.getsize(path)} bytes")


def read_safetensors(path):
    """Return (name → torch tensor dict, metadata dict)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, info in header.items():
        a, b = info["data_offsets"]
        dt = _TORCH[info["dtype"]]
        buf = bytearray(data[base + a:base + b])
        t = torch.frombuffer(buf, dtype=torch.uint8) if buf else torch.empty(0, dtype=torch.uint8)
        out[name] = t.view(dt).reshape(info["shape"]) if buf else torch.empty(info["shape"], dtype=dt)
    return out, meta
