"""Writes small archives of CIFAR's python version for dataset's tests.

    /usr/bin/python3 dataset/testdata/gen_cifar_python.py
        rewrites the committed fixtures under dataset/testdata/cifar-python:
        py2/cifar-10-python.tar.gz, pickled as Python 2's cPickle wrote the
        published archives (protocol 2, str as BINSTRING), and
        p5-str/cifar-100-python.tar.gz (protocol 5, str keys).
    /usr/bin/python3 dataset/testdata/gen_cifar_python.py OUT
        writes every style (py2, and protocols 2 to 5 with bytes or str
        keys) of both data sets to OUT/STYLE/.

The images follow cifar_python_test.go's cifarPixel and cifarLabel: image g
(the test set's from 1000) has pixel value pixel(g, c, p) in channel c at
position p, and its label (fine label for CIFAR-100) is label(g, classes).
Needs numpy.
"""

import io
import os
import pickle
import struct
import sys
import tarfile
import gzip

import numpy as np

# Images per training batch and in the test set.
SIZES = {10: ([1, 1, 1, 1, 1], 2), 100: ([3], 2)}
TRAIN = {10: ["data_batch_%d" % i for i in range(1, 6)], 100: ["train"]}
TEST = {10: "test_batch", 100: "test"}
TOP = {10: "cifar-10-batches-py", 100: "cifar-100-python"}
ARCHIVE = {10: "cifar-10-python.tar.gz", 100: "cifar-100-python.tar.gz"}
STYLES = ["py2"] + ["p%d-%s" % (p, k) for p in (2, 3, 4, 5) for k in ("bytes", "str")]


def pixel(g, c, p):
    return (((g * 3072 + c * 1024 + p) * 2654435761) & 0xFFFFFFFF) >> 13 & 255


def label(g, classes):
    return (g * 7 + 3) % classes


def class_name(c):
    # As cifar_test.go's cifarFiles names the classes.
    return "class" + chr(ord("A") + c % 26) + chr(ord("a") + c // 26)


class Py2Pickler(pickle._Pickler):
    """Writes str and bytes as Python 2's cPickle wrote its str."""

    dispatch = pickle._Pickler.dispatch.copy()

    def save_str2(self, obj):
        b = obj.encode("utf-8") if isinstance(obj, str) else obj
        if len(b) < 256:
            self.write(b"U" + bytes([len(b)]) + b)
        else:
            self.write(b"T" + struct.pack("<i", len(b)) + b)
        self.memoize(obj)

    dispatch[str] = save_str2
    dispatch[bytes] = save_str2


def dumps(d, style):
    if style == "py2":
        f = io.BytesIO()
        Py2Pickler(f, protocol=2).dump(d)
        return f.getvalue()
    protocol, keys = style[1], style.split("-")[1]
    if keys == "bytes":
        d = {k.encode(): v for k, v in d.items()}
    return pickle.dumps(d, protocol=int(protocol))


def batch(classes, first, n, name):
    data = np.zeros((n, 3072), dtype=np.uint8)
    for i in range(n):
        for c in range(3):
            for p in range(1024):
                data[i, c * 1024 + p] = pixel(first + i, c, p)
    labels = [label(first + i, classes) for i in range(n)]
    d = {"batch_label": name, "filenames": ["img_%d.png" % (first + i) for i in range(n)], "data": data}
    if classes == 10:
        d["labels"] = labels
    else:
        d["fine_labels"] = labels
        d["coarse_labels"] = [y // 5 for y in labels]
    return d


def files(classes, style):
    out = {}
    g = 0
    for name, n in zip(TRAIN[classes], SIZES[classes][0]):
        out[name] = dumps(batch(classes, g, n, "training batch " + name), style)
        g += n
    out[TEST[classes]] = dumps(batch(classes, 1000, SIZES[classes][1], "testing batch 1 of 1"), style)
    names = [class_name(c) for c in range(classes)]
    if classes == 10:
        meta = {"num_cases_per_batch": 10000, "label_names": names, "num_vis": 3072}
    else:
        meta = {"fine_label_names": names, "coarse_label_names": ["super%d" % c for c in range(20)]}
    out["batches.meta" if classes == 10 else "meta"] = dumps(meta, style)
    return out


def write(path, classes, style):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        info = tarfile.TarInfo(TOP[classes])
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)
        for name, b in sorted(files(classes, style).items()):
            info = tarfile.TarInfo(TOP[classes] + "/" + name)
            info.size, info.mode = len(b), 0o644
            tar.addfile(info, io.BytesIO(b))
    with open(path, "wb") as f:
        f.write(gzip.compress(raw.getvalue(), mtime=0))


def main():
    if len(sys.argv) > 1:
        for style in STYLES:
            for classes in (10, 100):
                write(os.path.join(sys.argv[1], style, ARCHIVE[classes]), classes, style)
        return
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cifar-python")
    write(os.path.join(here, "py2", ARCHIVE[10]), 10, "py2")
    write(os.path.join(here, "p5-str", ARCHIVE[100]), 100, "p5-str")


if __name__ == "__main__":
    main()
