#!/usr/bin/python3
"""PyTorch DataLoader peer of `flock bench loader`.

Reads the "image" and "label" fields of an FFCV .beton file (format version
2) itself, with numpy, following the format: the 24-byte header, the
1041-byte field descriptors, the metadata table (one numpy aligned struct
per sample), and the allocation table at the end, which gives the size of
each JPEG. Images are served by a torch.utils.data.Dataset and loaded by a
DataLoader with --workers worker processes (shuffled, drop_last), each
decoding with PIL (libjpeg-turbo) and transforming with torchvision, the
pipeline of the same name in flock:

  rrc     RandomResizedCrop(size) + RandomHorizontalFlip + ToTensor + Normalize
  center  Resize(size·256/224) + CenterCrop(size) + ToTensor + Normalize
  raw     raw pixels (RGB image field or uint8 ndarray) as a tensor
          + RandomHorizontalFlip + Normalize

After --warmup batches it times --batches batches and prints one JSON object
(the fields of flock's bench.LoaderResult) on stdout. CPU time is read from
/proc for the main process and every worker process.
"""

import io
import json
import os
import resource
import sys
import time

import numpy as np
import PIL
import torch
import torchvision
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loader_timing import Batches, arguments, pct, timed  # noqa: E402

HEADER = np.dtype([("version", "<u2"), ("num_fields", "<u2"), ("page_size", "<u4"),
                   ("num_samples", "<u8"), ("alloc_table_ptr", "<u8")])
DESCRIPTOR = np.dtype([("type_id", "<u1"), ("name", ("<u1", 16)), ("arguments", ("<u1", 1024))], align=True)
ALLOC = np.dtype([("sample_id", "<u8"), ("ptr", "<u8"), ("size", "<u8")])
IMAGE_META = np.dtype([("mode", "<u1"), ("width", "<u2"), ("height", "<u2"), ("data_ptr", "<u8")])
BYTES_META = np.dtype([("ptr", "<u8"), ("size", "<u8")])
FLOAT, INT, RGB, BYTES, NDARRAY, JSON_, TORCH = 0, 1, 2, 3, 4, 5, 6


def ndarray_args(args):
    shape = [int(d) for d in np.frombuffer(args[:256].tobytes(), "<u8") if d != 0]
    n = int(np.frombuffer(args[256:264].tobytes(), "<u8")[0])
    descr = json.loads(args[264:264 + n].tobytes().decode("ascii"))
    if len(descr) != 1 or descr[0][0]:
        raise ValueError(f"ndarray dtype {descr}: want one unnamed plain type")
    return np.dtype(descr[0][1]), shape


class Beton:
    """The image and label fields of a .beton file, memory-mapped."""

    def __init__(self, path):
        self.path = path
        raw = np.memmap(path, dtype="<u1", mode="r")
        h = raw[:HEADER.itemsize].view(HEADER)[0]
        if int(h["version"]) != 2:
            raise ValueError(f"{path}: format version {h['version']}, want 2")
        nf, n = int(h["num_fields"]), int(h["num_samples"])
        desc = raw[HEADER.itemsize:HEADER.itemsize + nf * DESCRIPTOR.itemsize].view(DESCRIPTOR)
        types, names, args = [], [], []
        for d in desc:
            types.append(int(d["type_id"]))
            names.append(bytes(d["name"]).rstrip(b"\0").decode("ascii"))
            args.append(d["arguments"])
        meta_types = []
        for t, a in zip(types, args):
            meta_types.append({FLOAT: np.dtype("<f8"), INT: np.dtype("<i8"), RGB: IMAGE_META,
                               BYTES: BYTES_META, JSON_: BYTES_META, NDARRAY: np.dtype("<u8"),
                               TORCH: np.dtype("<u8")}[t])
        row = np.dtype([(f"f{i}", mt) for i, mt in enumerate(meta_types)], align=True)
        start = HEADER.itemsize + nf * DESCRIPTOR.itemsize
        meta = raw[start:start + n * row.itemsize].view(row)
        self.image_field = names.index("image")
        self.image_type = types[self.image_field]
        self.images = np.array(meta[f"f{self.image_field}"])
        self.labels = np.array(meta[f"f{names.index('label')}"]).astype(np.int64) if "label" in names else np.zeros(n, np.int64)
        if self.image_type == NDARRAY:
            self.dtype, self.shape = ndarray_args(args[self.image_field])
        alloc = raw[int(h["alloc_table_ptr"]):].view(ALLOC)
        self.sizes = dict(zip(alloc["ptr"].tolist(), alloc["size"].tolist()))
        self.n = n
        self.raw = None

    def __len__(self):
        return self.n

    def image(self, i, pil):
        """Image i as a PIL image when pil is set, else as an HWC uint8
        array for raw pixels and a PIL image for JPEGs."""
        if self.raw is None:
            self.raw = np.memmap(self.path, dtype="<u1", mode="r")
        if self.image_type == NDARRAY:
            ptr = int(self.images[i])
            size = int(np.prod(self.shape)) * self.dtype.itemsize
            a = np.frombuffer(bytearray(self.raw[ptr:ptr + size]), self.dtype).reshape(self.shape)
            if pil:
                return Image.fromarray(a if a.ndim == 2 or a.shape[2] != 1 else a[:, :, 0])
            return a if a.ndim == 3 else a[:, :, None]
        m = self.images[i]
        ptr, w, h = int(m["data_ptr"]), int(m["width"]), int(m["height"])
        if m["mode"] == 0:
            return Image.open(io.BytesIO(self.raw[ptr:ptr + self.sizes[ptr]].tobytes())).convert("RGB")
        a = np.frombuffer(bytearray(self.raw[ptr:ptr + w * h * 3]), np.uint8).reshape(h, w, 3)
        return Image.fromarray(a) if pil else a


class BetonDataset(Dataset):
    def __init__(self, beton, transform, pil):
        self.beton, self.transform, self.pil = beton, transform, pil

    def __len__(self):
        return len(self.beton)

    def __getitem__(self, i):
        return self.transform(self.beton.image(i, self.pil)), self.beton.labels[i]


def cpu_seconds(pids):
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except OSError:
            pass
    return total


def peak_rss_mb(pid="self"):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    return 0.0


def worker_init(_):
    torch.set_num_threads(1)


def main():
    a = arguments(__doc__.splitlines()[0])
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)

    start = time.perf_counter()
    beton = Beton(a.file)
    gray = beton.image_type == NDARRAY and (len(beton.shape) == 2 or beton.shape[-1] == 1)
    mean, std = ([0.2860], [0.3530]) if gray else ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    tail = [transforms.ToTensor(), transforms.Normalize(mean, std)]
    if a.decoder == "rrc":
        tf = transforms.Compose([transforms.RandomResizedCrop(a.size), transforms.RandomHorizontalFlip()] + tail)
    elif a.decoder == "center":
        tf = transforms.Compose([transforms.Resize(a.size * 256 // 224), transforms.CenterCrop(a.size)] + tail)
    else:
        tf = transforms.Compose([transforms.ToTensor(), transforms.RandomHorizontalFlip(), transforms.Normalize(mean, std)])
    loader = DataLoader(BetonDataset(beton, tf, a.decoder != "raw"), batch_size=a.batch_size, shuffle=True, drop_last=True,
                        num_workers=a.workers, worker_init_fn=worker_init, persistent_workers=a.workers > 0)
    if len(loader) == 0:
        sys.exit(f"torch_loader: {a.file}: fewer samples than a batch of {a.batch_size}")

    batches = Batches(loader)
    batches.next()
    first = time.perf_counter() - start
    for _ in range(a.warmup):
        batches.next()
    pids = ["self"] + [w.pid for w in getattr(batches.it, "_workers", [])]
    cpu0 = cpu_seconds(pids)
    images, seconds, lat = timed(batches, a.batches)
    pids = ["self"] + [w.pid for w in getattr(batches.it, "_workers", [])]
    cpu = cpu_seconds(pids) - cpu0
    child_rss = max([peak_rss_mb(p) for p in pids[1:]] or [0.0])

    ips = images / seconds
    print(json.dumps({
        "record": "run", "impl": "torch",
        "version": f"torch {torch.__version__}, torchvision {torchvision.__version__}",
        "backend": f"PIL {PIL.__version__}", "decoder": a.decoder, "workers": a.workers,
        "batch_size": a.batch_size, "batches": a.batches, "images": images, "seconds": seconds,
        "cpu_s": cpu, "img_per_s": ips, "img_per_s_per_worker": ips / max(a.workers, 1),
        "img_per_cpu_s": images / cpu if cpu > 0 else 0.0, "first_batch_s": first,
        "p50_s": pct(lat, 0.5), "p99_s": pct(lat, 0.99), "allocs_per_batch": 0, "bytes_per_batch": 0,
        "peak_rss_mb": peak_rss_mb(), "peak_rss_child_mb": child_rss,
    }), flush=True)


if __name__ == "__main__":
    main()
