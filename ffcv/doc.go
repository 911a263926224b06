// Package ffcv reads and writes FFCV's .beton data set files (format
// version 2, byte-compatible with FFCV) and loads them in batches for
// training: the data loader of flock.
//
// FFCV's insight is that image data loads fast when it is pre-processed
// once into one page-structured file, read through the page cache (or a
// cache of prefetched pages), decoded by many workers into preallocated
// batch buffers, and augmented by pipelines compiled per field. This
// package keeps that design; the file format itself is package beton, JPEG
// decoding package jpeg, image geometry and augmentation package
// transform.
//
// # Loading
//
// A Loader (Open or NewLoader) hands out Batches: one Column per loaded
// field, views into a ring of BatchesAhead+2 preallocated slots, released
// explicitly (Batch.Release) or by the Epoch iterator when the loop moves
// on. Options follow FFCV's: batch size, workers (goroutines, GOMAXPROCS
// by default), order (Sequential, Random, QuasiRandom), the page cache or
// a process cache with prefetching, distributed rank and world size, seed,
// an indices subset, drop-last (KeepLast or DropLast; by default an
// evaluation loader — Sequential order, nothing drawn at random — keeps the
// last, smaller batch and a training loader drops it) and batches ahead.
// Unlike FFCV, the order of every epoch is a pure function of (seed, epoch,
// rank, world size), so Seek resumes mid-epoch exactly; QUASI_RANDOM works in distributed mode, with a configurable page
// window; augmentations draw from a counter-based generator keyed by
// (seed, epoch, sample, transform), so batches do not depend on the number
// of workers; Close or the end of a context stops every goroutine. The
// Loader's documentation states the algorithms.
//
// # Pipelines
//
// Options.Pipelines maps field names to a Pipeline: a decoder, then
// transforms, as FFCV's pipelines dictionary. Decoders: IntDecoder,
// FloatDecoder, NDArrayDecoder, BytesDecoder, and for images
// SimpleImageDecoder (fixed size), RandomResizedCrop and CenterCrop (JPEGs
// decoded as Options.Decode says, below). Transforms: Flip, Translate, Cutout
// (uint8 HWC images), ToCHW, Normalize (to float32 or bfloat16 through a
// lookup table), Mixup and LabelMixup (per batch), Squeeze. A uint8 array field
// of shape (H, W) or (H, W, C), as FFCV's Fashion-MNIST files hold, is an
// image for the transforms, so Fashion-MNIST and CIFAR pipelines need no
// JPEG. Columns become tensors with Column.Tensor; ImageStream hands out the
// image and label columns of each batch as tensors, the batches package
// train's Trainer takes (train.Data), so that flock train streams .beton
// files.
//
// # Decoding JPEGs: speed or FFCV's exact bytes
//
// Options.Decode chooses between two ways of decoding JPEGs. The default,
// Scaled, decodes each image at the smallest scale 1/2, 1/4 or 1/8 that
// keeps the crop at least as large as the output, with libjpeg's accurate
// IDCT: a crop that shrinks 2× or more costs a quarter or less of a full
// decode, and the images are as faithful as PIL's, but they are not FFCV's
// bytes (on the committed FFCV test file, 1.0 levels of 255 apart from
// FFCV's on average at 224×224, 1.4 apart from MatchFFCV's at 64×64). MatchFFCV decodes at full size with
// the fast IDCT and resizes with Area (OpenCV's INTER_AREA, value for value,
// fractional factors included), as FFCV does, and reproduces FFCV's
// output exactly for the same crop window: use it to compare with FFCV or
// to evaluate a model trained on FFCV's images. The low-level pieces
// (beton.Reader, jpeg.Decoder with SetFastDCT, transform.Resize) give the
// same choices image by image.
//
// # Writing
//
// beton.Write writes any beton.Source. This package provides sources for
// images in memory (ArraySource, NewImagesSource for dataset.Images such as
// Fashion-MNIST), for a directory tree of images with one subdirectory per
// class (ImageFolderSource, as torchvision's ImageFolder) and for
// generated photo-like images (SyntheticSource, for benchmarks). The
// command flock convert wraps them.
package ffcv
