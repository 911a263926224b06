"""Small JPEGs covering the layouts ffcv/jpeg's decoder must handle.

Run with Debian's interpreter from the repository root:

    /usr/bin/python3 testdata/ffcv/golden/gen_jpeg.py

Needs numpy, Pillow, OpenCV (python3-opencv) and libturbojpeg.so.0. Writes
testdata/ffcv/golden/jpeg/*.jpg: chroma subsampling 4:4:4, 4:2:2, 4:2:0,
4:4:0 and 4:1:1, grayscale, optimized Huffman tables, restart intervals,
progressive coding and odd sizes. The tests decode them and compare with
image/jpeg and libjpeg-turbo.
"""
import ctypes
import io
import os

import cv2
import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "jpeg")


def photo(w, h, seed):
    """Smooth colour fields with noise and hard edges (a stand-in for a photo)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.empty((h, w, 3))
    img[..., 0] = 128 + 90 * np.sin(x / 9 + y / 23)
    img[..., 1] = 128 + 90 * np.cos(x / 17 - y / 11)
    img[..., 2] = 128 + 90 * np.sin((x + y) / 13)
    img += rng.normal(0, 12, size=img.shape)
    img[h // 4:h // 2, w // 3:2 * w // 3] = [250, 20, 30]
    img[(y - h * 0.7) ** 2 + (x - w * 0.3) ** 2 < (min(w, h) / 6) ** 2] = [10, 200, 40]
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def pil(img, **kw):
    b = io.BytesIO()
    mode = "L" if img.ndim == 2 else "RGB"
    Image.fromarray(img, mode).save(b, format="JPEG", **kw)
    return b.getvalue()


def cv(img, *params):
    bgr = img if img.ndim == 2 else img[..., ::-1]
    ok, buf = cv2.imencode(".jpg", np.ascontiguousarray(bgr), list(params))
    assert ok
    return buf.tobytes()


def turbo(img, subsamp, quality):
    """tjCompress2 with a TJSAMP_* value (4 = 4:4:0, 5 = 4:1:1)."""
    tj = ctypes.CDLL("libturbojpeg.so.0")
    tj.tjInitCompress.restype = ctypes.c_void_p
    tj.tjFree.argtypes = [ctypes.c_void_p]
    h = ctypes.c_void_p(tj.tjInitCompress())
    buf = ctypes.POINTER(ctypes.c_ubyte)()
    size = ctypes.c_ulong(0)
    src = np.ascontiguousarray(img)
    height, width = src.shape[:2]
    r = tj.tjCompress2(h, src.ctypes.data_as(ctypes.c_void_p), width, 0, height, 0,  # TJPF_RGB
                       ctypes.byref(buf), ctypes.byref(size), subsamp, quality, 0)
    assert r == 0, tj.tjGetErrorStr()
    out = ctypes.string_at(buf, size.value)
    tj.tjFree(buf)
    tj.tjDestroy(h)
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    a = photo(61, 47, 1)
    b = photo(128, 96, 2)
    g = cv2.cvtColor(photo(45, 38, 3), cv2.COLOR_RGB2GRAY)
    files = {
        "pil_444_q90.jpg": pil(a, quality=90, subsampling=0),
        "pil_422_q90.jpg": pil(a, quality=90, subsampling=1),
        "pil_420_q75.jpg": pil(b, quality=75, subsampling=2),
        "pil_420_q95_optimized.jpg": pil(a, quality=95, subsampling=2, optimize=True),
        "pil_gray_q85.jpg": pil(g, quality=85),
        "pil_420_progressive.jpg": pil(a, quality=90, progressive=True),
        "pil_420_1x1.jpg": pil(a[:1, :1], quality=90),
        "pil_420_3x2.jpg": pil(a[:2, :3], quality=90),
        "pil_444_17x9.jpg": pil(a[:9, :17], quality=90, subsampling=0),
        "cv_420_restart.jpg": cv(b, cv2.IMWRITE_JPEG_QUALITY, 90, cv2.IMWRITE_JPEG_RST_INTERVAL, 3),
        "cv_gray_restart.jpg": cv(g, cv2.IMWRITE_JPEG_QUALITY, 80, cv2.IMWRITE_JPEG_RST_INTERVAL, 1),
        "tj_440_q90.jpg": turbo(a, 4, 90),
        "tj_411_q90.jpg": turbo(b, 5, 90),
        "pil_420_q100.jpg": pil(a, quality=100, subsampling=2),
    }
    for name, data in files.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
