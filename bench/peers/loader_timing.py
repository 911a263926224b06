"""What the loader peers (torch_loader.py, ffcv_loader.py) share: the
flags flock bench loader passes, endless batches from a loader that ends
each epoch, the timed loop, percentiles."""

import argparse
import time


def arguments(description):
    """Parses the flags that flock bench loader gives its peer."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--file", required=True)
    ap.add_argument("--decoder", default="rrc", choices=["rrc", "center", "raw"])
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batches", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()


class Batches:
    """Batches of loader without end: a new epoch starts when one ends.
    it is the current epoch's iterator."""

    def __init__(self, loader):
        self.loader = loader
        self.it = iter(loader)

    def next(self):
        try:
            return next(self.it)
        except StopIteration:
            self.it = iter(self.loader)
            return next(self.it)


def timed(batches, n):
    """Takes n batches (images first in each); returns the images, the
    seconds and the sorted latencies between consecutive batches."""
    lat, images = [], 0
    t0 = prev = time.perf_counter()
    for _ in range(n):
        x = batches.next()[0]
        now = time.perf_counter()
        lat.append(now - prev)
        prev = now
        images += x.shape[0]
    return images, time.perf_counter() - t0, sorted(lat)


def pct(lat, p):
    """The p-quantile of sorted lat, interpolated linearly."""
    x = p * (len(lat) - 1)
    i = int(x)
    return lat[-1] if i + 1 >= len(lat) else lat[i] + (x - i) * (lat[i + 1] - lat[i])
