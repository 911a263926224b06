package ffcv

import (
	"fmt"
	"math"
	"strings"

	"github.com/flockml/flock/ffcv/beton"
	"github.com/flockml/flock/ffcv/jpeg"
	"github.com/flockml/flock/ffcv/transform"
	"github.com/flockml/flock/tensor"
)

// Pipeline is the processing of one field: a decoder followed by
// transforms, applied in order, as FFCV's pipelines. For example
//
//	ffcv.Pipeline{ffcv.RandomResizedCrop{Width: 224, Height: 224}, ffcv.Flip{},
//		ffcv.ToCHW{}, ffcv.Normalize{Mean: ffcv.ImageNetMean, Std: ffcv.ImageNetStd}}
//	ffcv.Pipeline{ffcv.IntDecoder{}, ffcv.Squeeze{}}
type Pipeline []Op

// Op is a stage of a Pipeline: one of this package's decoders (first) or
// transforms.
type Op interface {
	opName() string
}

// Decoders.
type (
	// IntDecoder reads an int field as Int64 [B, 1].
	IntDecoder struct{}
	// FloatDecoder reads a float field as Float64 [B, 1].
	FloatDecoder struct{}
	// NDArrayDecoder reads an ndarray (or torch tensor) field as an array
	// [B, shape…] of its dtype (uint8, int32, int64, float32 or float64;
	// bool as uint8). A uint8 array of shape (H, W) or (H, W, C) is an
	// image for the image transforms.
	NDArrayDecoder struct{}
	// BytesDecoder reads a bytes or JSON field into Column.Bytes, aliasing
	// the file's memory.
	BytesDecoder struct{}
	// SimpleImageDecoder decodes images that all have the same size
	// (FFCV's SimpleRGBImageDecoder): Uint8 [B, H, W, C].
	SimpleImageDecoder struct{}
	// RandomResizedCrop decodes a random window of each image resized to
	// Width×Height (FFCV's RandomResizedCropRGBImageDecoder): the window of
	// torchvision's RandomResizedCrop (area fraction in Scale, aspect ratio
	// log-uniform in Ratio, 10 tries, then a centre crop; zero values mean
	// (0.08, 1) and (3/4, 4/3)), resampled with Filter (Area, as FFCV, when
	// zero). A JPEG is decoded at the smallest scale 1/d (d ∈ {1, 2, 4, 8})
	// whose window is still at least Width×Height pixels.
	RandomResizedCrop struct {
		Width, Height int
		Scale, Ratio  [2]float64
		Filter        transform.Filter
	}
	// CenterCrop decodes the centred square of side Ratio·min(w, h) of each
	// image resized to Width×Height (FFCV's CenterCropRGBImageDecoder;
	// Ratio 224/256 when zero), with Filter (Area when zero), scaled JPEG
	// decoding as RandomResizedCrop.
	CenterCrop struct {
		Width, Height int
		Ratio         float64
		Filter        transform.Filter
	}
)

// Transforms.
type (
	// Flip mirrors an image left–right with probability P (0.5 when zero):
	// FFCV's RandomHorizontalFlip.
	Flip struct{ P float64 }
	// Translate pads an image by Padding pixels of Fill on every side and
	// takes the window of the original size at a uniformly random offset
	// in [0, 2·Padding]²: FFCV's RandomTranslate.
	Translate struct {
		Padding int
		Fill    [3]uint8
	}
	// Cutout fills a Size×Size square at a uniformly random position inside
	// the image (clamped to the image) with Fill: FFCV's Cutout.
	Cutout struct {
		Size int
		Fill [3]uint8
	}
	// ToCHW stores images channel-first, [B, C, H, W] (FFCV's
	// ToTorchImage).
	ToCHW struct{}
	// Normalize converts image pixels p to (p − Mean[c]) / Std[c] through a
	// lookup table (FFCV's NormalizeImage). Mean and Std are in pixel units
	// (0–255), one value per channel or one for all. DType is Float32 (when
	// zero) or BFloat16 (rounded to nearest even; after ToCHW, and not with
	// Mixup).
	Normalize struct {
		Mean, Std []float64
		DType     tensor.DType
	}
	// Mixup mixes each image of a batch with the one before it (the first
	// with the last): λ·x[b] + (1 − λ)·x[b−1] with λ ~ Beta(Alpha, Alpha),
	// one λ per batch when SameLambda, else one per sample (FFCV's
	// ImageMixup). The column's Pair and Lambda record the mix. A
	// LabelMixup with the same settings in the label's pipeline records the
	// same pairs and weights.
	Mixup struct {
		Alpha      float64
		SameLambda bool
	}
	// LabelMixup records in the column's Pair and Lambda the mix that a
	// Mixup with the same settings applies to the images (FFCV's
	// LabelMixup); the labels themselves are unchanged.
	LabelMixup struct {
		Alpha      float64
		SameLambda bool
	}
	// Squeeze drops the axes of length 1 after the batch axis, turning
	// [B, 1] labels into [B] (FFCV's Squeeze).
	Squeeze struct{}
)

// ImageNetMean and ImageNetStd are the usual ImageNet normalisation in
// pixel units, for Normalize.
var (
	ImageNetMean = []float64{0.485 * 255, 0.456 * 255, 0.406 * 255}
	ImageNetStd  = []float64{0.229 * 255, 0.224 * 255, 0.225 * 255}
)

func (IntDecoder) opName() string         { return "IntDecoder" }
func (FloatDecoder) opName() string       { return "FloatDecoder" }
func (NDArrayDecoder) opName() string     { return "NDArrayDecoder" }
func (BytesDecoder) opName() string       { return "BytesDecoder" }
func (SimpleImageDecoder) opName() string { return "SimpleImageDecoder" }
func (RandomResizedCrop) opName() string  { return "RandomResizedCrop" }
func (CenterCrop) opName() string         { return "CenterCrop" }
func (Flip) opName() string               { return "Flip" }
func (Translate) opName() string          { return "Translate" }
func (Cutout) opName() string             { return "Cutout" }
func (ToCHW) opName() string              { return "ToCHW" }
func (Normalize) opName() string          { return "Normalize" }
func (Mixup) opName() string              { return "Mixup" }
func (LabelMixup) opName() string         { return "LabelMixup" }
func (Squeeze) opName() string            { return "Squeeze" }

// DefaultPipeline returns the pipeline of a field not named in
// Options.Pipelines: images decoded whole (SimpleImageDecoder), ints and
// floats squeezed to [B], arrays as stored, bytes and JSON as bytes.
func DefaultPipeline(f beton.FieldInfo) Pipeline {
	switch f.Type {
	case beton.IntType:
		return Pipeline{IntDecoder{}, Squeeze{}}
	case beton.FloatType:
		return Pipeline{FloatDecoder{}, Squeeze{}}
	case beton.RGBImageType:
		return Pipeline{SimpleImageDecoder{}}
	case beton.NDArrayType, beton.TorchTensorType:
		return Pipeline{NDArrayDecoder{}}
	case beton.BytesType, beton.JSONType:
		return Pipeline{BytesDecoder{}}
	}
	return nil
}

// Random-stream ids of the transforms (transform.NewRand's op): the field
// index and the stage index make each stage's stream its own. Mixup's id is
// shared by all fields so that image and label agree.
const opMixup = 0xffff_0000

func opID(field, stage int) uint32 { return uint32(field)<<8 | uint32(stage) }

type decoderKind int

const (
	decInt decoderKind = iota
	decFloat
	decArray
	decBytes
	decSimple
	decRRC
	decCenter
)

// augment is a per-sample geometric transform on uint8 HWC images.
type augment struct {
	op      uint32
	flipP   float64
	pad     int
	cutout  int
	fill    [3]uint8
	isFlip  bool
	isTrans bool
}

// fieldPipe is a compiled Pipeline.
type fieldPipe struct {
	name  string
	index int // field index in the file
	info  beton.FieldInfo
	kind  decoderKind
	r     *beton.Reader

	// images
	isImage    bool
	w, h, c    int // output image size
	rrc        RandomResizedCrop
	center     CenterCrop
	filter     transform.Filter
	augs       []augment
	chw        bool
	norm       *transform.Normalizer
	normDT     tensor.DType
	mixup      *Mixup
	labelMixup *LabelMixup
	squeeze    bool
	arrayDT    tensor.DType
	arrayShape []int
	decodeOp   uint32
	matchFFCV  bool // full-size JPEG decoding with the fast IDCT
}

func compilePipelines(r *beton.Reader, opt Options) ([]*fieldPipe, error) {
	var pipes []*fieldPipe
	known := map[string]bool{}
	for fi, f := range r.Fields() {
		known[f.Name] = true
		p, given := opt.Pipelines[f.Name]
		if given && p == nil {
			continue
		}
		if !given {
			p = DefaultPipeline(f)
			if p == nil {
				continue // custom fields cannot be read
			}
		}
		fp, err := compilePipeline(r, fi, f, p, opt.Indices, opt.Decode)
		if err != nil {
			return nil, fmt.Errorf("ffcv: loader: field %q: %w", f.Name, err)
		}
		pipes = append(pipes, fp)
	}
	for name := range opt.Pipelines {
		if !known[name] {
			var names []string
			for _, f := range r.Fields() {
				names = append(names, f.Name)
			}
			return nil, fmt.Errorf("ffcv: loader: pipeline for %q: no such field (fields: %s)", name, strings.Join(names, ", "))
		}
	}
	if len(pipes) == 0 {
		return nil, fmt.Errorf("ffcv: loader: no field to load")
	}
	return pipes, nil
}

func wantType(f beton.FieldInfo, op Op, types ...beton.FieldType) error {
	for _, t := range types {
		if f.Type == t {
			return nil
		}
	}
	return fmt.Errorf("%s cannot read a %v field", op.opName(), f.Type)
}

func compilePipeline(r *beton.Reader, fi int, f beton.FieldInfo, p Pipeline, indices []int, dec Decoding) (*fieldPipe, error) {
	if len(p) == 0 {
		return nil, fmt.Errorf("empty pipeline")
	}
	fp := &fieldPipe{name: f.Name, index: fi, info: f, r: r, decodeOp: opID(fi, 0), matchFFCV: dec == MatchFFCV}
	switch d := p[0].(type) {
	case IntDecoder:
		fp.kind = decInt
		if err := wantType(f, d, beton.IntType); err != nil {
			return nil, err
		}
	case FloatDecoder:
		fp.kind = decFloat
		if err := wantType(f, d, beton.FloatType); err != nil {
			return nil, err
		}
	case BytesDecoder:
		fp.kind = decBytes
		if err := wantType(f, d, beton.BytesType, beton.JSONType); err != nil {
			return nil, err
		}
	case NDArrayDecoder:
		fp.kind = decArray
		if err := wantType(f, d, beton.NDArrayType, beton.TorchTensorType); err != nil {
			return nil, err
		}
		dt, err := arrayDType(f.DType)
		if err != nil {
			return nil, err
		}
		fp.arrayDT, fp.arrayShape = dt, f.Shape
		if dt == tensor.Uint8 && (len(f.Shape) == 2 || len(f.Shape) == 3 && (f.Shape[2] == 1 || f.Shape[2] == 3)) {
			fp.isImage = true
			fp.h, fp.w, fp.c = f.Shape[0], f.Shape[1], 1
			if len(f.Shape) == 3 {
				fp.c = f.Shape[2]
			}
		}
	case SimpleImageDecoder:
		fp.kind, fp.isImage = decSimple, true
		if err := wantType(f, d, beton.RGBImageType); err != nil {
			return nil, err
		}
		w, h, c, err := commonImageSize(r, fi, indices)
		if err != nil {
			return nil, err
		}
		fp.w, fp.h, fp.c = w, h, c
	case RandomResizedCrop:
		fp.kind, fp.isImage = decRRC, true
		if err := wantType(f, d, beton.RGBImageType); err != nil {
			return nil, err
		}
		if d.Width <= 0 || d.Height <= 0 {
			return nil, fmt.Errorf("RandomResizedCrop: output size %d×%d: want > 0", d.Width, d.Height)
		}
		if d.Scale == ([2]float64{}) {
			d.Scale = transform.DefaultScale
		}
		if d.Ratio == ([2]float64{}) {
			d.Ratio = transform.DefaultRatio
		}
		if !(d.Scale[0] > 0 && d.Scale[0] <= d.Scale[1] && d.Ratio[0] > 0 && d.Ratio[0] <= d.Ratio[1]) {
			return nil, fmt.Errorf("RandomResizedCrop: scale %v, ratio %v: want 0 < lo ≤ hi", d.Scale, d.Ratio)
		}
		fp.rrc, fp.filter = d, d.Filter
		fp.w, fp.h, fp.c = d.Width, d.Height, f.Channels
	case CenterCrop:
		fp.kind, fp.isImage = decCenter, true
		if err := wantType(f, d, beton.RGBImageType); err != nil {
			return nil, err
		}
		if d.Width <= 0 || d.Height <= 0 {
			return nil, fmt.Errorf("CenterCrop: output size %d×%d: want > 0", d.Width, d.Height)
		}
		if d.Ratio == 0 {
			d.Ratio = 224.0 / 256
		}
		if !(d.Ratio > 0 && d.Ratio <= 1) {
			return nil, fmt.Errorf("CenterCrop: ratio %v: want in (0, 1]", d.Ratio)
		}
		fp.center, fp.filter = d, d.Filter
		fp.w, fp.h, fp.c = d.Width, d.Height, f.Channels
	default:
		return nil, fmt.Errorf("pipeline starts with %s: want a decoder (IntDecoder, FloatDecoder, NDArrayDecoder, BytesDecoder, SimpleImageDecoder, RandomResizedCrop, CenterCrop)", p[0].opName())
	}
	if fp.c == 0 {
		fp.c = 3
	}
	if fp.matchFFCV && fp.filter != transform.Area {
		return nil, fmt.Errorf("%s: filter %v with MatchFFCV decoding: FFCV resizes with Area", p[0].opName(), fp.filter)
	}
	converted := false // after ToCHW or Normalize
	for stage, op := range p[1:] {
		stage++
		needImage := func() error {
			if !fp.isImage {
				return fmt.Errorf("%s needs images (after an image decoder, or a uint8 array of shape (H, W) or (H, W, C))", op.opName())
			}
			return nil
		}
		switch t := op.(type) {
		case Flip, Translate, Cutout:
			if err := needImage(); err != nil {
				return nil, err
			}
			if converted {
				return nil, fmt.Errorf("%s after ToCHW or Normalize: put the image transforms first", op.opName())
			}
			a := augment{op: opID(fi, stage)}
			switch t := t.(type) {
			case Flip:
				a.isFlip, a.flipP = true, t.P
				if a.flipP == 0 {
					a.flipP = 0.5
				}
				if !(a.flipP > 0 && a.flipP <= 1) {
					return nil, fmt.Errorf("Flip: probability %v: want in (0, 1]", t.P)
				}
			case Translate:
				if t.Padding < 0 {
					return nil, fmt.Errorf("Translate: padding %d: want ≥ 0", t.Padding)
				}
				a.isTrans, a.pad, a.fill = true, t.Padding, t.Fill
			case Cutout:
				if t.Size <= 0 {
					return nil, fmt.Errorf("Cutout: size %d: want > 0", t.Size)
				}
				a.cutout, a.fill = t.Size, t.Fill
			}
			fp.augs = append(fp.augs, a)
		case ToCHW:
			if err := needImage(); err != nil {
				return nil, err
			}
			if fp.chw {
				return nil, fmt.Errorf("ToCHW twice")
			}
			fp.chw, converted = true, true
		case Normalize:
			if err := needImage(); err != nil {
				return nil, err
			}
			if fp.norm != nil {
				return nil, fmt.Errorf("Normalize twice")
			}
			norm, err := newNormalizer(t.Mean, t.Std, fp.c)
			if err != nil {
				return nil, err
			}
			fp.norm, fp.normDT, converted = norm, t.DType, true
			if fp.normDT == 0 {
				fp.normDT = tensor.Float32
			}
			if fp.normDT != tensor.Float32 && fp.normDT != tensor.BFloat16 {
				return nil, fmt.Errorf("Normalize: dtype %v: want float32 or bfloat16", t.DType)
			}
		case Mixup:
			if err := needImage(); err != nil {
				return nil, err
			}
			if !(t.Alpha > 0) || math.IsInf(t.Alpha, 0) {
				return nil, fmt.Errorf("Mixup: alpha %v: want a finite value > 0", t.Alpha)
			}
			fp.mixup = &t
		case LabelMixup:
			if fp.kind != decInt && fp.kind != decFloat {
				return nil, fmt.Errorf("LabelMixup needs an int or float field")
			}
			if !(t.Alpha > 0) || math.IsInf(t.Alpha, 0) {
				return nil, fmt.Errorf("LabelMixup: alpha %v: want a finite value > 0", t.Alpha)
			}
			fp.labelMixup = &t
		case Squeeze:
			fp.squeeze = true
		default:
			return nil, fmt.Errorf("%s at stage %d: a decoder must come first and only once", op.opName(), stage)
		}
	}
	if fp.normDT == tensor.BFloat16 && (!fp.chw || fp.mixup != nil) {
		return nil, fmt.Errorf("Normalize to bfloat16 needs ToCHW and no Mixup")
	}
	return fp, nil
}

// arrayDType maps a numpy type string to the column's dtype.
func arrayDType(s string) (tensor.DType, error) {
	switch s {
	case "|u1", "|b1", "<u1", "=u1":
		return tensor.Uint8, nil
	case "<i4", "=i4":
		return tensor.Int32, nil
	case "<i8", "=i8":
		return tensor.Int64, nil
	case "<f4", "=f4":
		return tensor.Float32, nil
	case "<f8", "=f8":
		return tensor.Float64, nil
	}
	return 0, fmt.Errorf("NDArrayDecoder: dtype %q not supported (uint8, bool, int32, int64, float32, float64)", s)
}

// commonImageSize returns the size shared by the images of indices.
func commonImageSize(r *beton.Reader, f int, indices []int) (w, h, c int, err error) {
	for k, i := range indices {
		ref := r.ImageInfo(f, i)
		if k == 0 {
			w, h, c = ref.Width, ref.Height, ref.Channels
			continue
		}
		if ref.Width != w || ref.Height != h || ref.Channels != c {
			return 0, 0, 0, fmt.Errorf("SimpleImageDecoder needs images of one size: sample %d is %d×%d×%d, sample %d is %d×%d×%d (use RandomResizedCrop or CenterCrop)",
				indices[0], w, h, c, i, ref.Width, ref.Height, ref.Channels)
		}
	}
	if len(indices) == 0 {
		return 1, 1, 3, nil
	}
	return w, h, c, nil
}

// newNormalizer returns the lookup tables of (p − mean[c]) / std[c] for c
// channels, mean and std given per channel or once for all.
func newNormalizer(mean, std []float64, c int) (*transform.Normalizer, error) {
	if (len(mean) != 1 && len(mean) != c) || (len(std) != 1 && len(std) != c) {
		return nil, fmt.Errorf("Normalize: %d means and %d stds for %d channels: want 1 or %d each", len(mean), len(std), c, c)
	}
	m, s := make([]float64, c), make([]float64, c)
	for ch := range c {
		m[ch], s[ch] = mean[min(ch, len(mean)-1)], std[min(ch, len(std)-1)]
		if !(s[ch] > 0) || math.IsInf(s[ch], 0) || math.IsNaN(m[ch]) || math.IsInf(m[ch], 0) {
			return nil, fmt.Errorf("Normalize: channel %d: mean %v, std %v: want finite values, std > 0", ch, m[ch], s[ch])
		}
	}
	return transform.NewNormalizer(m, s), nil
}

// newColumn allocates the field's column for b samples.
func (fp *fieldPipe) newColumn(b int) *Column {
	var c *Column
	switch {
	case fp.kind == decInt:
		c = newColumn(fp.name, tensor.Int64, fp.scalarRow(), b)
	case fp.kind == decFloat:
		c = newColumn(fp.name, tensor.Float64, fp.scalarRow(), b)
	case fp.kind == decBytes:
		c = newColumn(fp.name, 0, nil, b)
	case fp.isImage:
		dt := tensor.Uint8
		if fp.norm != nil {
			dt = fp.normDT
		}
		var row []int
		switch {
		case fp.chw:
			row = []int{fp.c, fp.h, fp.w}
		case fp.kind == decArray:
			row = fp.arrayShape
		default:
			row = []int{fp.h, fp.w, fp.c}
		}
		c = newColumn(fp.name, dt, row, b)
	default:
		c = newColumn(fp.name, fp.arrayDT, fp.arrayShape, b)
	}
	if fp.mixup != nil || fp.labelMixup != nil {
		c.Pair = make([]int, b)
		c.Lambda = make([]float32, b)
	}
	return c
}

// random reports whether the pipeline draws at random: a random crop, a
// random augmentation or a mix.
func (fp *fieldPipe) random() bool {
	return fp.kind == decRRC || len(fp.augs) > 0 || fp.mixup != nil || fp.labelMixup != nil
}

func (fp *fieldPipe) scalarRow() []int {
	if fp.squeeze {
		return nil
	}
	return []int{1}
}

// needsScratch reports whether images are built in worker scratch before
// being written to the column (converted or transposed).
func (fp *fieldPipe) needsScratch() bool { return fp.norm != nil || fp.chw }

// decode writes sample id into row row of col.
func (fp *fieldPipe) decode(w *worker, fi int, col *Column, row, id int, seed uint64, epoch int) error {
	r := fp.r
	switch fp.kind {
	case decInt:
		col.Int64s()[row] = r.Int(fp.index, id)
		return nil
	case decFloat:
		col.Float64s()[row] = r.Float(fp.index, id)
		return nil
	case decBytes:
		var b []byte
		var err error
		if fp.info.Type == beton.JSONType {
			b, err = r.JSON(fp.index, id)
		} else {
			b, err = r.Bytes(fp.index, id)
		}
		col.Bytes[row] = b
		return err
	}
	if !fp.isImage {
		b, err := r.NDArray(fp.index, id)
		if err != nil {
			return err
		}
		rb := col.rowBytes()
		copy(col.raw[row*rb:(row+1)*rb], b)
		return nil
	}
	sc := w.scratch(fi)
	dst := fp.imageTarget(sc, col, row)
	if err := fp.decodeImage(w, sc, dst, id, seed, epoch); err != nil {
		return err
	}
	for i := range fp.augs {
		a := &fp.augs[i]
		rnd := transform.NewRand(seed, uint64(epoch), uint64(id), a.op)
		switch {
		case a.isFlip:
			transform.RandomFlipHorizontal(dst, a.flipP, &rnd)
		case a.isTrans:
			transform.Translate(dst, a.pad, a.fill[:fp.c], &rnd)
		default:
			transform.Cutout(dst, a.cutout, a.fill[:fp.c], &rnd)
		}
	}
	if fp.needsScratch() {
		fp.store(col, row, dst)
	}
	return nil
}

// imageTarget returns where the decoded image goes: the column's row, or
// worker scratch when it is converted afterwards.
func (fp *fieldPipe) imageTarget(sc *fieldScratch, col *Column, row int) transform.Image {
	n := fp.w * fp.h * fp.c
	if fp.needsScratch() {
		sc.out = grow(sc.out, n)
		return transform.ImageOf(sc.out, fp.w, fp.h, fp.c)
	}
	return transform.ImageOf(col.raw[row*n:(row+1)*n], fp.w, fp.h, fp.c)
}

// decodeImage decodes sample id into dst (fp.w×fp.h×fp.c).
func (fp *fieldPipe) decodeImage(w *worker, sc *fieldScratch, dst transform.Image, id int, seed uint64, epoch int) error {
	if fp.kind == decArray {
		b, err := fp.r.NDArray(fp.index, id)
		if err != nil {
			return err
		}
		copy(dst.Pix, b)
		return nil
	}
	ref, err := fp.r.Image(fp.index, id)
	if err != nil {
		return err
	}
	if ref.Channels != fp.c {
		return fmt.Errorf("%d-channel image in a %d-channel pipeline", ref.Channels, fp.c)
	}
	var win transform.Rect
	switch fp.kind {
	case decSimple:
		if ref.Width != fp.w || ref.Height != fp.h {
			return fmt.Errorf("image %d×%d: SimpleImageDecoder expects %d×%d", ref.Width, ref.Height, fp.w, fp.h)
		}
		if ref.JPEG {
			return fp.jpegDecoder(w).Decode(dst, ref.Data, 1)
		}
		return copyRaw(dst, ref)
	case decRRC:
		rnd := transform.NewRand(seed, uint64(epoch), uint64(id), fp.decodeOp)
		win = transform.RandomResizedCropRect(ref.Width, ref.Height, fp.rrc.Scale, fp.rrc.Ratio, &rnd)
	case decCenter:
		win = transform.CenterCropRect(ref.Width, ref.Height, fp.center.Ratio)
	}
	var src transform.Image
	if ref.JPEG {
		d := 1
		if !fp.matchFFCV {
			d = ScaleDenom(win.W, win.H, fp.w, fp.h)
		}
		sw, sh := jpeg.ScaledSize(ref.Width, ref.Height, d)
		sc.decoded = grow(sc.decoded, sw*sh*fp.c)
		src = transform.ImageOf(sc.decoded, sw, sh, fp.c)
		if err := fp.jpegDecoder(w).Decode(src, ref.Data, d); err != nil {
			return err
		}
		win = scaleRect(win, ref.Width, ref.Height, sw, sh)
	} else {
		if len(ref.Data) < ref.Width*ref.Height*ref.Channels {
			return fmt.Errorf("raw image %d×%d×%d in %d bytes", ref.Width, ref.Height, ref.Channels, len(ref.Data))
		}
		src = transform.ImageOf(ref.Data, ref.Width, ref.Height, ref.Channels)
	}
	transform.Resize(dst, src, win, fp.filter)
	return nil
}

// jpegDecoder returns the worker's JPEG decoder set for this field: the
// fast IDCT when it matches FFCV, the accurate one otherwise.
func (fp *fieldPipe) jpegDecoder(w *worker) *jpeg.Decoder {
	d := w.decoder()
	d.SetFastDCT(fp.matchFFCV)
	return d
}

func copyRaw(dst transform.Image, ref beton.ImageRef) error {
	if len(ref.Data) < len(dst.Pix) {
		return fmt.Errorf("raw image %d×%d×%d in %d bytes", ref.Width, ref.Height, ref.Channels, len(ref.Data))
	}
	copy(dst.Pix, ref.Data)
	return nil
}

// ScaleDenom returns the JPEG scale 1/d (d ∈ {1, 2, 4, 8}) at which a
// window of cw×ch source pixels is decoded for an output of w×h: the
// largest d with ⌊cw/d⌋ ≥ w and ⌊ch/d⌋ ≥ h, so the window is never
// enlarged by the scaling.
func ScaleDenom(cw, ch, w, h int) int {
	for _, d := range []int{8, 4, 2} {
		if cw/d >= w && ch/d >= h {
			return d
		}
	}
	return 1
}

// scaleRect maps r in a w×h image to the sw×sh scaled image, covering at
// least the same area.
func scaleRect(r transform.Rect, w, h, sw, sh int) transform.Rect {
	if sw == w && sh == h {
		return r
	}
	x0, y0 := r.X*sw/w, r.Y*sh/h
	x1 := min(sw, ((r.X+r.W)*sw+w-1)/w)
	y1 := min(sh, ((r.Y+r.H)*sh+h-1)/h)
	return transform.Rect{X: x0, Y: y0, W: max(1, x1-x0), H: max(1, y1-y0)}
}

// store writes the scratch image img into row row of col, transposed to
// CHW and/or normalised.
func (fp *fieldPipe) store(col *Column, row int, img transform.Image) {
	n := fp.w * fp.h * fp.c
	if fp.normDT == tensor.BFloat16 {
		fp.norm.ToCHWBF16(col.BFloat16s()[row*n:(row+1)*n], img)
		return
	}
	if fp.norm != nil {
		out := col.Float32s()[row*n : (row+1)*n]
		if fp.chw {
			fp.norm.ToCHW(out, img)
		} else {
			fp.norm.ToHWC(out, img)
		}
		return
	}
	toCHW(col.raw[row*n:(row+1)*n], img)
}

// finishBatch applies the batch-level transforms to the n rows of col.
// scratch is worker scratch for one row.
func (fp *fieldPipe) finishBatch(col *Column, ids []int, seed uint64, epoch int, scratch *fieldScratch) {
	var alpha float64
	var same bool
	switch {
	case fp.mixup != nil:
		alpha, same = fp.mixup.Alpha, fp.mixup.SameLambda
	case fp.labelMixup != nil:
		alpha, same = fp.labelMixup.Alpha, fp.labelMixup.SameLambda
	default:
		return
	}
	n := len(ids)
	if n == 0 {
		return
	}
	for b := range n {
		key := ids[b]
		if same {
			key = ids[0]
		}
		rnd := transform.NewRand(seed, uint64(epoch), uint64(key), opMixup)
		col.Lambda[b] = float32(rnd.Beta(alpha, alpha))
		col.Pair[b] = (b + n - 1) % n
	}
	if fp.mixup != nil {
		mixRows(col, n, scratch)
	}
}

// worker is one decoding goroutine's state, kept across epochs.
type worker struct {
	dec    *jpeg.Decoder
	fields []fieldScratch
}

// fieldScratch is a worker's scratch for one field, grown to the largest
// image seen.
type fieldScratch struct {
	decoded []uint8 // a whole decoded JPEG
	out     []uint8 // the output image before conversion
	row     []byte  // Mixup's copy of one row
}

func newWorker(fields int) *worker { return &worker{fields: make([]fieldScratch, fields)} }

func (w *worker) scratch(i int) *fieldScratch { return &w.fields[i] }

func (w *worker) decoder() *jpeg.Decoder {
	if w.dec == nil {
		w.dec = jpeg.NewDecoder()
	}
	return w.dec
}

func (w *worker) close() {
	if w.dec != nil {
		w.dec.Close()
		w.dec = nil
	}
}

// grow returns b with length n, reallocating only when its capacity is
// smaller.
func grow(b []uint8, n int) []uint8 {
	if cap(b) < n {
		return make([]uint8, n)
	}
	return b[:n]
}
