"""Non-square JPEGs written and decoded by FFCV itself.

Run from the repository root with the peers' interpreter (bench/peers/setup.sh
prints its path; it holds ffcv 1.0.2):

    "$(bench/peers/setup.sh)" testdata/ffcv/gen_nonsquare.py

Writes testdata/ffcv/jpeg_nonsquare.beton: four synthetic photos of 400×300,
300×400, 300×225 and 225×300 pixels (RGBImageField, write_mode="jpg",
jpeg_quality=90, not resized; label i; 2 MiB pages), and what FFCV's loader returns for
them, in order, with CenterCropRGBImageDecoder((S, S), ratio=224/256) for
S = 160 and 128: jpeg_nonsquare.centercrop{160,128}.npy (uint8, 4×S×S×3).
Their centre crops are area-resized by factors that are not whole numbers.
"""
import os

import numpy as np
from ffcv.fields import IntField, RGBImageField
from ffcv.fields.decoders import CenterCropRGBImageDecoder, IntDecoder
from ffcv.loader import Loader, OrderOption
from ffcv.writer import DatasetWriter

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = [(400, 300), (300, 400), (300, 225), (225, 300)]  # width, height


def photo(w, h, seed):
    """A smooth colour gradient with noise and a few hard edges."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.empty((h, w, 3))
    for c in range(3):
        img[..., c] = 128 + 90 * np.sin(x / (7 + 3 * c) + y / (11 + 2 * c))
    img += rng.normal(0, 12, size=img.shape)
    img[h // 4:h // 3, w // 5:w // 2, :] = 255 - img[h // 4:h // 3, w // 5:w // 2, :]
    return np.clip(img, 0, 255).astype(np.uint8)


class Photos:
    def __len__(self):
        return len(SIZES)

    def __getitem__(self, i):
        w, h = SIZES[i]
        return photo(w, h, 100 + i), i


def main():
    path = os.path.join(HERE, "jpeg_nonsquare.beton")
    writer = DatasetWriter(path, {
        "image": RGBImageField(write_mode="jpg", jpeg_quality=90),
        "label": IntField(),
    }, num_workers=1, page_size=1 << 21)
    writer.from_indexed_dataset(Photos())
    for size in (160, 128):
        loader = Loader(path, batch_size=len(SIZES), num_workers=1, order=OrderOption.SEQUENTIAL,
                        pipelines={"image": [CenterCropRGBImageDecoder((size, size), ratio=224 / 256)],
                                   "label": [IntDecoder()]})
        images, labels = next(iter(loader))
        images = np.ascontiguousarray(np.asarray(images), dtype=np.uint8)
        assert images.shape == (len(SIZES), size, size, 3), images.shape
        assert list(np.asarray(labels).ravel()) == list(range(len(SIZES)))
        np.save(os.path.join(HERE, f"jpeg_nonsquare.centercrop{size}.npy"), images)


if __name__ == "__main__":
    main()
