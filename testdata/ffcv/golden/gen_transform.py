"""Reference resizes for ffcv/transform's tests.

Run with Debian's interpreter from the repository root:

    /usr/bin/python3 testdata/ffcv/golden/gen_transform.py

Needs Debian's python3-numpy, python3-torch, python3-torchvision and
python3-opencv (FFCV resizes with the same cv2.resize code). Writes two
files.

testdata/ffcv/golden/transform_resize.safetensors: for each shape, the source
image "src.<shape>" (uint8, H×W×C), and for each case "<filter>.<shape>" the
expected output "want.<case>", with the case's parameters as JSON in the
metadata under "case.<case>":
filter ("area": cv2.resize INTER_AREA; "bilinear": torchvision resize of a
uint8 tensor with antialias=False; "bilinear-antialias": the same with
antialias=True), the crop window [x, y, w, h] of the source (resized in one
pass) and the output size [w, h].

testdata/ffcv/golden/transform_area.safetensors: cv2.resize INTER_AREA
references that Resize with Area must match exactly, covering both of
OpenCV's shrinking paths (integer factors on both axes, and fractional
factors on either or both axes) with 1 to 4 channels, and FFCV's centre crop
of non-square images at ratio 224/256. Sources are not stored: "source"
[w, h, c] names the image pattern(w, h, c), which the Go test computes too.
For each case "want.<case>" is the output, and "case.<case>" holds the
source, the window [x, y, w, h], the output size [w, h] and, for centre
crops, the ratio the window was computed with (as FFCV's get_center_crop).
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


def pattern(w, h, c):
    """A deterministic H×W×C uint8 image from integer arithmetic alone (a
    sawtooth gradient plus hashed noise in 0..63), cheap to recompute in Go:
    v = (3x + 2y + 85ch + (hash(x, y, ch) >> 26)) mod 256, with hash in
    uint32 as in the code below."""
    y, x, ch = np.meshgrid(np.arange(h, dtype=np.uint32), np.arange(w, dtype=np.uint32),
                           np.arange(c, dtype=np.uint32), indexing="ij")
    v = x * np.uint32(0x9E3779B1) ^ y * np.uint32(0x85EBCA77) ^ ch * np.uint32(0xC2B2AE3D)
    v ^= v >> np.uint32(15)
    v *= np.uint32(0x2C1B3C6D)
    v ^= v >> np.uint32(12)
    return ((x * 3 + y * 2 + ch * 85 + (v >> np.uint32(26))) & np.uint32(255)).astype(np.uint8)


def center_crop(w, h, ratio):
    """FFCV's get_center_crop (ffcv/transforms/utils/fast_crop.py) as a window [x, y, w, h]."""
    s = min(h, w)
    c = int(ratio * s)
    return [(w - c) // 2, (h - c) // 2, c, c]


# (name, source w, h, c, window [x, y, w, h], "center" (ratio 224/256) or None, output w, h)
AREA = [
    # FFCV's centre crops of non-square images: fractional factors on both axes.
    ("ffcv_400x300", 400, 300, 3, "center", 160, 160),
    ("ffcv_300x225", 300, 225, 3, "center", 128, 128),
    ("ffcv_300x400_gray", 300, 400, 1, "center", 160, 160),
    ("ffcv_225x300_gray", 225, 300, 1, "center", 128, 128),
    ("ffcv_400x300_small", 400, 300, 3, "center", 37, 29),
    # A fractional factor on one axis only.
    ("frac_x_int_y", 200, 150, 3, [7, 5, 131, 120], 80, 60),
    ("int_x_frac_y", 150, 140, 1, [0, 3, 120, 131], 40, 80),
    ("int_x_frac_y_rgb", 150, 140, 3, [11, 2, 90, 131], 30, 80),
    ("one_x_frac_y", 64, 50, 3, None, 64, 37),
    ("frac_x_one_y", 50, 64, 1, None, 37, 64),
    # Integer factors on both axes: OpenCV's fast path, and a factor (49)
    # whose scale 1/(1/49) misses 49 by more than DBL_EPSILON, which sends
    # OpenCV down the fractional path.
    ("int3x2", 120, 80, 3, None, 40, 40),
    ("int5", 65, 45, 1, None, 13, 9),
    ("int1x2", 64, 48, 3, None, 64, 24),
    ("int2_gray", 40, 30, 1, None, 20, 15),
    ("int2_2ch", 40, 30, 2, None, 20, 15),
    ("int2_4ch", 40, 30, 4, None, 20, 15),
    ("int49", 147, 98, 3, None, 3, 2),
    # Odd sizes, 2 and 4 channels, and factors near 1 (OpenCV drops partial
    # pieces shorter than 1e-3 of a pixel).
    ("odd_rgb", 97, 61, 3, None, 23, 17),
    ("odd_gray", 61, 97, 1, None, 17, 23),
    ("odd_2ch", 45, 38, 2, None, 31, 27),
    ("odd_4ch", 53, 41, 4, None, 29, 31),
    ("near1", 41, 40, 3, None, 40, 39),
    ("near1_long", 1001, 3, 1, None, 1000, 2),
]


def area_cases():
    tensors, meta = {}, {}
    for name, w, h, c, win, ow, oh in AREA:
        src = pattern(w, h, c)
        case = {"source": [w, h, c], "size": [ow, oh]}
        if win == "center":
            case["ratio"] = 224 / 256
            win = center_crop(w, h, case["ratio"])
        x, y, ww, wh = win if win else (0, 0, w, h)
        case["window"] = [x, y, ww, wh]
        crop = np.ascontiguousarray(src[y:y + wh, x:x + ww])
        out = cv2.resize(crop, (ow, oh), interpolation=cv2.INTER_AREA)
        tensors["want." + name] = out.reshape(oh, ow, c)
        meta["case." + name] = json.dumps(case)
    meta["versions"] = json.dumps({"opencv": cv2.__version__, "numpy": np.__version__})
    write_safetensors(os.path.join(HERE, "transform_area.safetensors"), tensors, meta)


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
    area_cases()


if __name__ == "__main__":
    main()
