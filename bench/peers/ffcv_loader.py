"""FFCV peer of `flock bench loader`: FFCV's own Loader on the same .beton.

Loads the "image" and "label" fields of the file with ffcv.loader.Loader
(random order, drop_last, --workers threads, as FFCV's workers are) through
the pipeline of the same name in flock, built as FFCV's ImageNet example
builds it, on the CPU:

  rrc     RandomResizedCropRGBImageDecoder((size, size)) + RandomHorizontalFlip
          + NormalizeImage(ImageNet mean, std, float32) + ToTensor + ToTorchImage
  center  CenterCropRGBImageDecoder((size, size), 224/256) + NormalizeImage
          + ToTensor + ToTorchImage
  raw     SimpleRGBImageDecoder + RandomHorizontalFlip + NormalizeImage
          + ToTensor + ToTorchImage

NormalizeImage runs before ToTensor because its CPU kernel works on FFCV's
uint8 NHWC batches (on a GPU the example puts it last); ToTorchImage gives
the NCHW view in channels-last memory that FFCV's models take.

After --warmup batches it times --batches batches and prints one JSON object
(the fields of flock's bench.LoaderResult) on stdout. CPU time is the
process's, which holds FFCV's worker threads. Run it with the python of
bench/peers/setup.sh's environment.
"""

import json
import os
import sys
import time
from importlib.metadata import version

import numpy as np
import torch
from ffcv.fields.decoders import (CenterCropRGBImageDecoder, IntDecoder, RandomResizedCropRGBImageDecoder,
                                  SimpleRGBImageDecoder)
from ffcv.loader import Loader, OrderOption
from ffcv.transforms import NormalizeImage, RandomHorizontalFlip, Squeeze, ToTensor, ToTorchImage

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loader_timing import Batches, arguments, pct, timed  # noqa: E402

MEAN = np.array([0.485, 0.456, 0.406]) * 255
STD = np.array([0.229, 0.224, 0.225]) * 255


def cpu_seconds():
    # CLOCK_PROCESS_CPUTIME_ID: every thread of the process, in ns steps
    # (os.times counts in 10 ms ticks, too coarse for short runs).
    return time.process_time()


def peak_rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e6
    return 0.0


def main():
    a = arguments(__doc__.splitlines()[0])
    torch.set_num_threads(1)

    start = time.perf_counter()
    if a.decoder == "rrc":
        image = [RandomResizedCropRGBImageDecoder((a.size, a.size)), RandomHorizontalFlip()]
    elif a.decoder == "center":
        image = [CenterCropRGBImageDecoder((a.size, a.size), ratio=224 / 256)]
    else:
        image = [SimpleRGBImageDecoder(), RandomHorizontalFlip()]
    image += [NormalizeImage(MEAN, STD, np.float32), ToTensor(), ToTorchImage()]
    try:
        loader = Loader(a.file, batch_size=a.batch_size, num_workers=a.workers, order=OrderOption.RANDOM,
                        drop_last=True, seed=a.seed, os_cache=True,
                        pipelines={"image": image, "label": [IntDecoder(), ToTensor(), Squeeze()]})
    except Exception as e:  # FFCV's reader rejects the file: say which and why.
        sys.exit(f"ffcv_loader: {a.file}: {type(e).__name__}: {e}")
    if len(loader) == 0:
        sys.exit(f"ffcv_loader: {a.file}: fewer samples than a batch of {a.batch_size}")

    batches = Batches(loader)
    x = batches.next()[0]
    if tuple(x.shape[1:]) != (3, a.size, a.size) and a.decoder != "raw":
        sys.exit(f"ffcv_loader: batch of shape {tuple(x.shape)}, want (N, 3, {a.size}, {a.size})")
    first = time.perf_counter() - start
    for _ in range(a.warmup):
        batches.next()
    cpu0 = cpu_seconds()
    images, seconds, lat = timed(batches, a.batches)
    cpu = cpu_seconds() - cpu0

    ips = images / seconds
    print(json.dumps({
        "record": "run", "impl": "ffcv",
        "version": f"ffcv {version('ffcv')}, torch {torch.__version__}, numba {version('numba')}",
        "backend": f"libffcv (libjpeg-turbo), OpenCV {version('opencv-python')}", "decoder": a.decoder,
        "workers": a.workers, "batch_size": a.batch_size, "batches": a.batches, "images": images,
        "seconds": seconds, "cpu_s": cpu, "img_per_s": ips, "img_per_s_per_worker": ips / max(a.workers, 1),
        "img_per_cpu_s": images / cpu if cpu > 0 else 0.0, "first_batch_s": first,
        "p50_s": pct(lat, 0.5), "p99_s": pct(lat, 0.99), "allocs_per_batch": 0, "bytes_per_batch": 0,
        "peak_rss_mb": peak_rss_mb(), "peak_rss_child_mb": 0.0,
    }), flush=True)
    # FFCV's epoch thread may still be filling batches ahead in a numba
    # parallel region; tearing the interpreter down under it aborts the
    # process ("terminate called without an active exception"), so stop
    # it and leave without the teardown.
    batches.it.close()
    os._exit(0)


if __name__ == "__main__":
    main()
