// Package transform is the image geometry and augmentation of the ffcv data
// loader, on 8-bit images in HWC order (Image). It imports only the
// standard library.
//
// # Geometry
//
// Resize resamples a window of one image into another, in one pass (the
// window is read in place, so a crop and its resize cost one resize):
//
//   - Area is OpenCV's INTER_AREA, FFCV's choice, value for value. When
//     both axes shrink by integer factors it averages blocks (OpenCV's
//     resizeAreaFast_); when either factor is fractional it weights each
//     source pixel by the fraction of the output cell it covers, in
//     OpenCV's float32 arithmetic and summation order (resizeArea_), rounding
//     half to even; enlarging either axis uses OpenCV's area-mode bilinear
//     coefficients and its fixed-point arithmetic. The tests require every
//     value equal to cv2.resize's, on integer and fractional factors along
//     one or both axes, 1 to 4 channels, and FFCV's centre crops of
//     non-square images (testdata/ffcv/golden/transform_resize.safetensors
//     and transform_area.safetensors).
//   - Bilinear is torchvision's resize of a uint8 tensor with
//     antialias=False (F.interpolate, align_corners=False, rounded half to
//     even); BilinearAntialias is antialias=True (PIL's triangle filter).
//     Both are within one level of torchvision (mean ≤ 0.05).
//
// Bilinear and BilinearAntialias compute in fixed point (weights in units
// of 2⁻¹⁴, the horizontal pass kept to 2⁻⁷); Area computes as OpenCV does
// (float32 when shrinking, weights in units of 2⁻¹¹ when enlarging). Resize
// takes its scratch tables from a pool.
//
// RandomResizedCropRect chooses torchvision's RandomResizedCrop window
// (scale (0.08, 1), ratio (3/4, 4/3) in log space, 10 tries, then a centre
// crop clamped to the ratio range); CenterCropRect is FFCV's centre crop (a
// square of side ⌊ratio·min(w, h)⌋).
//
// # Augmentation and conversion
//
//   - FlipHorizontal / RandomFlipHorizontal mirror an image in place.
//   - Translate shifts an image in place by a random offset in [−pad, pad]
//     with a fill colour (FFCV's RandomTranslate); TranslateBy is the
//     deterministic form.
//   - Cutout fills a random square lying inside the image (FFCV's Cutout).
//   - Normalizer maps uint8 samples to (v − mean)/std through a 256-entry
//     table per channel, writing float32 CHW (ToCHW, an NCHW batch slot),
//     float32 HWC (ToHWC) or bfloat16 CHW (ToCHWBF16) into a caller's slice.
//   - Mixup draws λ ~ Beta(α, α) and mixes two float32 images, returning λ
//     for the labels.
//
// # Randomness
//
// Every random decision is drawn from a Rand passed in by the caller. Rand
// is Philox4x32-10 keyed by (seed, epoch) with (sample, op) in its counter
// (see Rand), so a sample's augmentation is the same whichever worker
// produces it, in whatever order. Give each random transform of a pipeline
// its own op id, or draw them in a fixed order from one stream.
//
// # Allocation
//
// Transforms write into caller-provided buffers and allocate nothing at
// steady state; the tests check this with testing.AllocsPerRun. Images may
// be views (Image.Sub) with a stride larger than their rows.
package transform
