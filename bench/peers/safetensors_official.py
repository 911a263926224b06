"""The official safetensors package's side of flock's interoperability test
(safetensors/official_test.go): reads a file flock wrote and writes one for
flock to read.

    python safetensors_official.py IN OUT

Reads IN with safetensors.deserialize (the reference parser, which
validates the header and layout) and, for the dtypes numpy has, with
safe_open(framework="numpy"), checking that both give the same bytes;
prints one JSON object, {"metadata": {...}, "tensors": {name: {"dtype",
"shape", "data" (hex)}}}; and writes the same tensors and metadata to OUT
with safetensors.serialize_file, the reference writer. Needs only the
safetensors package and numpy of bench/peers/setup.sh's environment.
"""

import ctypes
import json
import sys

import numpy as np
import safetensors
from safetensors import TensorSpec, deserialize, safe_open, serialize_file

# The header's dtype codes and TensorSpec's names for them.
SPEC_NAMES = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "F8_E5M2": "float8_e5m2",
    "F8_E4M3": "float8_e4m3fn", "I16": "int16", "U16": "uint16", "F16": "float16",
    "BF16": "bfloat16", "I32": "int32", "U32": "uint32", "F32": "float32",
    "F64": "float64", "I64": "int64", "U64": "uint64",
}
NUMPY = {"BOOL", "U8", "I8", "I16", "U16", "F16", "I32", "U32", "F32", "F64", "I64", "U64"}


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, "rb") as f:
        raw = f.read()
    tensors = {}
    for name, t in deserialize(raw):
        tensors[name] = {"dtype": t["dtype"], "shape": list(t["shape"]), "data": bytes(t["data"])}
    with safe_open(src, framework="numpy") as f:
        metadata = f.metadata() or {}
        for name in f.keys():
            t = tensors[name]
            if t["dtype"] not in NUMPY:
                continue
            a = f.get_tensor(name)
            got = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
            if list(a.shape) != t["shape"] or got != t["data"]:
                raise SystemExit(f"safetensors_official: {name}: safe_open and deserialize disagree")
    buffers, specs = [], {}
    for name, t in tensors.items():
        buf = ctypes.create_string_buffer(t["data"], max(len(t["data"]), 1))
        buffers.append(buf)
        specs[name] = TensorSpec(dtype=SPEC_NAMES[t["dtype"]], shape=t["shape"],
                                 data_ptr=ctypes.addressof(buf), data_len=len(t["data"]))
    serialize_file(specs, dst, metadata=metadata or None)
    out = {name: {"dtype": t["dtype"], "shape": t["shape"], "data": t["data"].hex()} for name, t in tensors.items()}
    print(json.dumps({"version": safetensors.__version__, "metadata": metadata, "tensors": out}))


if __name__ == "__main__":
    main()
