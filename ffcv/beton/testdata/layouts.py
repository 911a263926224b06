#!/usr/bin/python3
"""Writes layouts.json: metadata row layouts that numpy computes for FFCV's
field metadata types, to check beton's row layout.

FFCV builds a row as np.dtype([('', field.metadata_type) ...], align=True)
with these metadata types (ffcv/fields/*.py). Run with Debian's python3:
    /usr/bin/python3 layouts.py > layouts.json
"""
import json
import numpy as np

META = {
    "float": np.dtype('<f8'),
    "int": np.dtype('<i8'),
    "rgb_image": np.dtype([('mode', '<u1'), ('width', '<u2'),
                           ('height', '<u2'), ('data_ptr', '<u8')]),
    "bytes": np.dtype([('ptr', '<u8'), ('size', '<u8')]),
    "ndarray": np.dtype('<u8'),
    "json": np.dtype([('ptr', '<u8'), ('size', '<u8')]),
    "torch_tensor": np.dtype('<u8'),
}

CASES = [
    ["rgb_image", "int"],
    ["rgb_image", "bytes"],
    ["rgb_image", "rgb_image"],
    ["bytes", "rgb_image", "float"],
    ["rgb_image"],
    ["bytes"],
    ["json", "json", "rgb_image"],
    ["ndarray", "rgb_image", "json", "int"],
    ["rgb_image", "int", "float", "ndarray", "bytes", "json"],
    ["int", "rgb_image", "rgb_image", "rgb_image", "float"],
    ["float"],
    ["torch_tensor", "rgb_image"],
]

out = []
for case in CASES:
    d = np.dtype([('', META[t]) for t in case], align=True)
    out.append({"types": case,
                "offsets": [d.fields[n][1] for n in d.names],
                "size": d.itemsize})
print(json.dumps(out, indent=1))
