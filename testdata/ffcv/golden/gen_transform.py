"""Reference resizes for ffcv/transform's tests.

Run with Debian's interpreter from the repository root:

    /usr/bin/python3 testdata/ffcv/golden/gen_transform.py

Needs numpy, torch, torchvision and OpenCV (Debian's python3-opencv). Writes
testdata/ffcv/golden/transform_resize.safetensors: for each shape, the source
image "src.<shape>" (uint8, H×W×C), and for each case "<filter>.<shape>" the
expected output "want.<case>", with the case's parameters as JSON in the
metadata under "case.<case>":
filter ("area": cv2.resize INTER_AREA; "bilinear": torchvision resize of a
uint8 tensor with antialias=False; "bilinear-antialias": the same with
antialias=True), the crop window [x, y, w, h] of the source (resized in one
pass) and the output size [w, h].
"""
import json
import os
import sys

import cv2
import numpy as np
import torch
import torchvision
import torchvision.transforms.functional as TF

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "golden"))
from safetensors_io import write_safetensors  # noqa: E402


def source(w, h, c, seed):
    """A smooth colour gradient with noise and a few hard edges."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.empty((h, w, c))
    for ch in range(c):
        img[..., ch] = 128 + 100 * np.sin(x / (3 + 2 * ch) + y / (5 + ch))
    img += rng.normal(0, 25, size=img.shape)
    img[h // 3:h // 2, :, :] = 255 - img[h // 3:h // 2, :, :]
    img[:, w // 4:w // 4 + 2, :] = 0
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def resize(src, filt, out_w, out_h):
    if filt == "area":
        out = cv2.resize(src, (out_w, out_h), interpolation=cv2.INTER_AREA)
        return out.reshape(out_h, out_w, src.shape[2])
    t = torch.from_numpy(np.ascontiguousarray(src.transpose(2, 0, 1)))
    out = TF.resize(t, [out_h, out_w], interpolation=TF.InterpolationMode.BILINEAR,
                    antialias=(filt == "bilinear-antialias"))
    return out.numpy().transpose(1, 2, 0).copy()


# (name, source w, h, c, window [x, y, w, h] or None, output w, h)
SHAPES = [
    ("down2", 64, 48, 3, None, 32, 24),
    ("down3", 60, 45, 3, None, 20, 15),
    ("down4x2", 64, 48, 3, None, 16, 24),
    ("down_frac", 64, 48, 3, None, 27, 20),
    ("down_frac_small", 50, 40, 3, None, 37, 33),
    ("down_big", 120, 90, 3, None, 13, 10),
    ("up", 20, 15, 3, None, 45, 31),
    ("up_int", 16, 12, 3, None, 32, 36),
    ("mixed", 40, 30, 3, None, 25, 50),
    ("window", 64, 48, 3, [10, 5, 40, 30], 23, 17),
    ("window_up", 64, 48, 3, [3, 7, 12, 9], 30, 20),
    ("gray_frac", 61, 47, 1, None, 29, 22),
    ("gray_up", 13, 11, 1, None, 30, 17),
    ("crop_square", 96, 72, 3, [20, 8, 70, 60], 64, 64),
]
FILTERS = ["area", "bilinear", "bilinear-antialias"]


def main():
    torch.manual_seed(0)
    tensors, meta = {}, {}
    for i, (name, w, h, c, win, ow, oh) in enumerate(SHAPES):
        src = source(w, h, c, seed=i)
        x, y, ww, wh = win if win else (0, 0, w, h)
        crop = src[y:y + wh, x:x + ww]
        tensors["src." + name] = src
        for filt in FILTERS:
            case = f"{filt}.{name}"
            tensors["want." + case] = resize(crop, filt, ow, oh)
            meta["case." + case] = json.dumps({"filter": filt, "shape": name, "window": [x, y, ww, wh],
                                               "size": [ow, oh]})
    meta["versions"] = json.dumps({"torch": torch.__version__, "torchvision": torchvision.__version__,
                                   "opencv": cv2.__version__, "numpy": np.__version__})
    write_safetensors(os.path.join(HERE, "transform_resize.safetensors"), tensors, meta)


if __name__ == "__main__":
    main()
