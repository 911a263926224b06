// Package jpeg decodes and encodes the JPEG images of the ffcv data loader.
//
// # Decoding
//
// A Decoder decodes into a caller-provided transform.Image (HWC, 1 or 3
// channels; a colour JPEG decoded into 1 channel gives its luma, a
// grayscale JPEG into 3 channels is replicated), optionally scaled by 1/2,
// 1/4 or 1/8 (ScaledSize gives the size, rounded up as libjpeg does). It
// reuses its scratch memory, so a warm Decoder allocates nothing. A Decoder
// is not safe for concurrent use: use one per worker.
//
// NewDecoder uses libjpeg-turbo when libturbojpeg.so.0 can be loaded (at run
// time, with purego: no cgo, CGO_ENABLED=0 builds work), and the pure-Go
// decoder otherwise; TurboAvailable says which and why. FLOCK_JPEG=go forces
// pure Go and FLOCK_JPEG=turbo requires libjpeg-turbo.
//
// The pure-Go decoder handles baseline and extended-sequential Huffman
// JPEGs with 8-bit samples: grayscale, and YCbCr with chroma subsampled by
// 1 or 2 in each direction (4:4:4, 4:2:2, 4:2:0, 4:4:0), with or without
// restart markers. It follows libjpeg-turbo's arithmetic throughout — the
// accurate integer IDCT (jidctint.c), or the fast one with SetFastDCT
// (jidctfst.c, as FFCV decodes); the reduced IDCTs of jidctred.c for scaled
// decoding, with chroma enlarged by the IDCT rather than upsampled where
// the scale allows; its "fancy" triangle-filter chroma upsampling (or
// replication, with SetFancyUpsampling(false)); its fixed-point YCbCr → RGB
// — so that its output equals libjpeg-turbo's (the tests check this on
// every layout and scale). Huffman codes are decoded with 10-bit lookahead
// tables that also decode most AC coefficients' value bits at once. In Go
// assembly, with the same integer arithmetic and so the same bytes, the fast
// IDCT transforms a block's eight columns and then its eight rows at once
// on CPUs with AVX2, and the 4:2:0 upsampling and colour conversion take 32
// pixels at a time on CPUs with AVX-512 (F and BW).
//
// Progressive, arithmetic-coded, lossless, 12-bit, CMYK, RGB (Adobe
// transform 0) and other unusual JPEGs, and those with non-interleaved
// scans or other subsampling ratios, are decoded by image/jpeg instead and
// converted into the destination (block-averaged when scaled); that path
// allocates.
//
// Every length, marker and table is validated: corrupt or truncated data
// gives an error, never a panic (FuzzDecode). Decoding stops after the last
// MCU of the first scan; data missing from it is an error, trailing data
// is ignored.
//
// # Encoding
//
// Encode writes a baseline JPEG with image/jpeg's encoder (4:2:0 for
// colour, one component for grayscale); the output depends only on the
// pixels and the quality.
package jpeg
