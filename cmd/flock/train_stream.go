package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/ffcv"
	"github.com/flockml/flock/ffcv/beton"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

// streamOptions are the flags of flock train that shape the streaming of
// .beton files through ffcv.Loader: FFCV's usual ImageNet recipe is
// --image-size 160 (or 192, 224) --flip with ImageNet's statistics.
type streamOptions struct {
	imageSize     int
	cropScale     string
	flip          bool
	mean, std     string
	decodeWorkers int
	cache         string
	cacheMiB      int
	order         string
}

func defaultStreamOptions() streamOptions {
	return streamOptions{cropScale: "0.08,1", cache: "process", cacheMiB: 256, order: "auto"}
}

// streamFlags adds the flags of s to fs.
func streamFlags(fs *flag.FlagSet, s *streamOptions) {
	fs.IntVar(&s.imageSize, "image-size", s.imageSize, ".beton data: train on random-resized crops of `SIDE`×SIDE pixels and evaluate on centre crops (ratio 224/256) of that size (0: the images as stored, all of one size)")
	fs.StringVar(&s.cropScale, "crop-scale", s.cropScale, ".beton data with --image-size: the range `MIN,MAX` of the crops' area as a fraction of the image's")
	fs.BoolVar(&s.flip, "flip", s.flip, ".beton data: flip training images left–right with probability 1/2")
	fs.StringVar(&s.mean, "mean", s.mean, ".beton data: per-channel means `M,...` (pixels scaled to [0, 1]) subtracted before dividing by --std (default: ImageNet's for RGB, Fashion-MNIST's for grayscale)")
	fs.StringVar(&s.std, "std", s.std, ".beton data: per-channel standard deviations `S,...` (default: ImageNet's for RGB, Fashion-MNIST's for grayscale)")
	fs.IntVar(&s.decodeWorkers, "decode-workers", s.decodeWorkers, ".beton data: goroutines decoding and augmenting images, per worker (0: GOMAXPROCS)")
	fs.StringVar(&s.cache, "data-cache", s.cache, ".beton data: process (pages read into a bounded cache, prefetched for the batches ahead) or page (the file mapped, cached by the operating system)")
	fs.IntVar(&s.cacheMiB, "data-cache-mib", s.cacheMiB, ".beton data: `MIB` of pages the process cache keeps, per file and worker")
	fs.StringVar(&s.order, "data-order", s.order, ".beton data: the order of training images, random (a permutation per epoch, as in memory), quasi-random (a few pages at a time, which a bounded cache holds) or auto (quasi-random with the process cache, random with the page cache)")
}

// validate checks s, naming the flags as the command line does.
func (s streamOptions) validate() error {
	if s.imageSize < 0 {
		return fmt.Errorf("image-size %d: want ≥ 0", s.imageSize)
	}
	if _, err := s.scale(); err != nil {
		return err
	}
	if s.decodeWorkers < 0 {
		return fmt.Errorf("decode-workers %d: want ≥ 0", s.decodeWorkers)
	}
	if s.cache != "process" && s.cache != "page" {
		return fmt.Errorf("data-cache %q: want process or page", s.cache)
	}
	if _, err := s.trainOrder(); err != nil {
		return err
	}
	if s.cacheMiB < 1 {
		return fmt.Errorf("data-cache-mib %d: want ≥ 1", s.cacheMiB)
	}
	if _, err := parseFloats("mean", s.mean); err != nil {
		return err
	}
	if _, err := parseFloats("std", s.std); err != nil {
		return err
	}
	return nil
}

// trainOrder returns the order of the training images.
func (s streamOptions) trainOrder() (ffcv.Order, error) {
	switch s.order {
	case "auto":
		if s.cache == "process" {
			// A random permutation reads a page for nearly every image;
			// only the pages of a window fit a bounded cache.
			return ffcv.QuasiRandom, nil
		}
		return ffcv.Random, nil
	case "random", "quasi-random":
		return ffcv.ParseOrder(s.order)
	}
	return 0, fmt.Errorf("data-order %q: want random, quasi-random or auto", s.order)
}

// scale returns the crop-scale range.
func (s streamOptions) scale() ([2]float64, error) {
	v, err := parseFloats("crop-scale", s.cropScale)
	if err != nil {
		return [2]float64{}, err
	}
	if len(v) != 2 || !(v[0] > 0 && v[0] <= v[1] && v[1] <= 1) {
		return [2]float64{}, fmt.Errorf("crop-scale %q: want MIN,MAX with 0 < MIN ≤ MAX ≤ 1", s.cropScale)
	}
	return [2]float64{v[0], v[1]}, nil
}

// parseFloats reads a comma-separated list of finite numbers (none when s is
// empty).
func parseFloats(flag, s string) ([]float64, error) {
	if s == "" {
		return nil, nil
	}
	var out []float64
	for f := range strings.SplitSeq(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v != v || v > 1e300 || v < -1e300 {
			return nil, fmt.Errorf("%s %q: want comma-separated numbers", flag, s)
		}
		out = append(out, v)
	}
	return out, nil
}

// statistics returns the normalisation of c-channel images in pixel units
// (0–255), as ffcv.Normalize takes them.
func (s streamOptions) statistics(c int) (mean, std []float64, err error) {
	mean, _ = parseFloats("mean", s.mean)
	std, _ = parseFloats("std", s.std)
	if mean == nil {
		mean = []float64{dataset.FashionMNISTMean}
		if c == 3 {
			mean = []float64{0.485, 0.456, 0.406}
		}
	}
	if std == nil {
		std = []float64{dataset.FashionMNISTStd}
		if c == 3 {
			std = []float64{0.229, 0.224, 0.225}
		}
	}
	for _, v := range [][]float64{mean, std} {
		if len(v) != 1 && len(v) != c {
			return nil, nil, fmt.Errorf("ffcv: stream: --mean and --std: %d and %d values for %d-channel images: want 1 or %d each", len(mean), len(std), c, c)
		}
	}
	pm, ps := make([]float64, c), make([]float64, c)
	for i := range c {
		pm[i] = 255 * mean[min(i, len(mean)-1)]
		ps[i] = 255 * std[min(i, len(std)-1)]
		if !(ps[i] > 0) {
			return nil, nil, fmt.Errorf("ffcv: stream: --std %v: want values > 0", std)
		}
	}
	return pm, ps, nil
}

// betonStream describes how one .beton file is streamed to a worker.
type betonStream struct {
	// eval selects the evaluation pipeline: sequential order, centre crops,
	// no flip, the last smaller batch kept.
	eval        bool
	batchSize   int
	seed        uint64
	rank, world int
	// images keeps only the first images samples (0: all).
	images int
	// classes is the number of classes.
	classes int
	// device holds the batches (nil: the default device).
	device tensor.Device
}

// openBeton opens the .beton file at path as s says: through a process
// cache of s.cacheMiB (shared by the Loaders of the process's workers) or
// the page cache.
func openBeton(path string, s streamOptions) (*beton.Reader, error) {
	ro := beton.ReadOptions{}
	if s.cache == "process" {
		ro.Cache, ro.CacheBytes = beton.Process, int64(s.cacheMiB)<<20
	}
	return beton.Open(path, ro)
}

func newBetonStream(r *beton.Reader, b betonStream, s streamOptions) (*ffcv.ImageStream, error) {
	fi, ok := r.FieldIndex("image")
	li, lok := r.FieldIndex("label")
	if !ok || !lok || r.Fields()[li].Type != beton.IntType {
		return nil, fmt.Errorf("ffcv: stream: want an image field \"image\" and an int field \"label\"")
	}
	f := r.Fields()[fi]
	var dec ffcv.Op
	c := f.Channels
	switch f.Type {
	case beton.RGBImageType:
		dec = ffcv.SimpleImageDecoder{}
		if s.imageSize > 0 && b.eval {
			dec = ffcv.CenterCrop{Width: s.imageSize, Height: s.imageSize}
		} else if s.imageSize > 0 {
			scale, _ := s.scale()
			dec = ffcv.RandomResizedCrop{Width: s.imageSize, Height: s.imageSize, Scale: scale}
		}
	case beton.NDArrayType:
		if s.imageSize > 0 {
			return nil, fmt.Errorf("ffcv: stream: --image-size %d: field \"image\" holds arrays, which are not cropped", s.imageSize)
		}
		dec, c = ffcv.NDArrayDecoder{}, 1
		if len(f.Shape) == 3 {
			c = f.Shape[2]
		}
	default:
		return nil, fmt.Errorf("ffcv: stream: field \"image\" is a %v field, want images or a uint8 ndarray", f.Type)
	}
	mean, std, err := s.statistics(c)
	if err != nil {
		return nil, err
	}
	img := ffcv.Pipeline{dec}
	if s.flip && !b.eval {
		img = append(img, ffcv.Flip{})
	}
	img = append(img, ffcv.ToCHW{}, ffcv.Normalize{Mean: mean, Std: std})
	pipes := map[string]ffcv.Pipeline{}
	for _, f := range r.Fields() {
		pipes[f.Name] = nil
	}
	pipes["image"], pipes["label"] = img, ffcv.Pipeline{ffcv.IntDecoder{}, ffcv.Squeeze{}}

	n := r.NumSamples()
	classes := b.classes
	opt := ffcv.Options{
		BatchSize: b.batchSize, Workers: s.decodeWorkers, Seed: b.seed,
		Rank: b.rank, World: b.world, Pipelines: pipes,
	}
	if s.cache == "process" {
		opt.Cache = ffcv.ProcessCache
	}
	if !b.eval {
		opt.Order, _ = s.trainOrder()
	}
	if b.images > 0 && b.images < n {
		opt.Indices = make([]int, b.images)
		for i := range opt.Indices {
			opt.Indices[i] = i
		}
	}
	l, err := ffcv.NewLoader(r, opt)
	if err != nil {
		if s.imageSize == 0 && f.Type == beton.RGBImageType {
			// Images of several sizes need a crop to one.
			return nil, fmt.Errorf("%w; --image-size crops them to one size", err)
		}
		return nil, err
	}
	st, err := ffcv.NewImageStream(l, ffcv.ImageStreamOptions{Classes: classes, Device: b.device})
	if err != nil {
		l.Close()
		return nil, err
	}
	return st, nil
}

var _ train.Data = (*ffcv.ImageStream)(nil)

// trainSets are a run's data: images in memory (Fashion-MNIST), or .beton
// files streamed through ffcv.Loader, a Loader per worker and file over
// one Reader per file.
type trainSets struct {
	train, test *dataset.Images

	trainPath, testPath string
	trainR, testR       *beton.Reader
	// trainN and testN count the files' samples; classes is the number of
	// classes, the training file's largest label plus one.
	trainN, testN, classes int
	stream                 streamOptions
	// subset is set when train and test are Fashion-MNIST's embedded subset.
	subset bool
}

// name names the data: the training file, or Fashion-MNIST.
func (s *trainSets) name() string {
	switch {
	case s.trainPath != "":
		return s.trainPath
	case s.subset:
		return "Fashion-MNIST (embedded subset)"
	}
	return "Fashion-MNIST"
}

// betonSets opens the .beton files at trainPath and testPath (which may be
// empty) and counts their samples and classes.
func betonSets(trainPath, testPath string, s streamOptions) (_ *trainSets, err error) {
	sets := &trainSets{trainPath: trainPath, testPath: testPath, stream: s}
	defer func() {
		if err != nil {
			sets.close()
		}
	}()
	if sets.trainR, err = openBeton(trainPath, s); err != nil {
		return nil, err
	}
	r := sets.trainR
	li, ok := r.FieldIndex("label")
	if !ok || r.Fields()[li].Type != beton.IntType {
		return nil, fmt.Errorf("ffcv: %s: no int field \"label\"", trainPath)
	}
	sets.trainN = r.NumSamples()
	for i := range sets.trainN {
		y := r.Int(li, i)
		if y < 0 || y >= 1<<31-1 {
			return nil, fmt.Errorf("ffcv: %s: sample %d: label %d is not a class index", trainPath, i, y)
		}
		sets.classes = max(sets.classes, int(y)+1)
	}
	if testPath != "" {
		if sets.testR, err = openBeton(testPath, s); err != nil {
			return nil, err
		}
		sets.testN = sets.testR.NumSamples()
	}
	return sets, nil
}

// close closes the .beton files, once every worker's Loaders are closed.
func (d *trainSets) close() {
	for _, r := range []*beton.Reader{d.trainR, d.testR} {
		if r != nil {
			r.Close()
		}
	}
}

// streamed reports whether the sets are .beton files.
func (d *trainSets) streamed() bool { return d.trainPath != "" }

// counts returns the numbers of training and test images (0: no test set).
func (d *trainSets) counts() (trainN, testN int) {
	if d.streamed() {
		return d.trainN, d.testN
	}
	if d.test != nil {
		testN = d.test.N
	}
	return d.train.N, testN
}

// hasTest reports whether there is a test set.
func (d *trainSets) hasTest() bool { return d.test != nil || d.testPath != "" }

// stepsPerEpoch returns the steps per epoch of each of world workers.
func (d *trainSets) stepsPerEpoch(cfg train.Config, world int) int {
	if !d.streamed() {
		return cfg.StepsPerEpoch(d.train.N, world)
	}
	// ffcv.Loader pads each epoch to a multiple of world (every rank visits
	// ⌈n/world⌉ samples) and a training loader drops the last, smaller
	// batch.
	n := d.trainN
	if cfg.TrainImages > 0 {
		n = min(n, cfg.TrainImages)
	}
	world = max(world, 1)
	return (n + world - 1) / world / cfg.BatchSize
}

// trainer builds the Trainer of one worker (opts.Rank of opts.World),
// evaluating when withTest; close releases its data.
func (d *trainSets) trainer(cfg train.Config, withTest bool, opts train.Options) (t *train.Trainer, close func(), err error) {
	if !d.streamed() {
		test := d.test
		if !withTest {
			test = nil
		}
		t, err := train.New(cfg, d.train, test, opts)
		return t, func() {}, err
	}
	var dev tensor.Device
	if cfg.Device != "" {
		if dev, err = backend.Get(cfg.Device); err != nil {
			return nil, func() {}, fmt.Errorf("device %q: %w", cfg.Device, err)
		}
	}
	var opened []*ffcv.ImageStream
	close = func() {
		for _, o := range opened {
			o.Close()
		}
	}
	tr, err := newBetonStream(d.trainR, betonStream{
		batchSize: cfg.BatchSize, seed: cfg.Seed, rank: opts.Rank, world: opts.World,
		images: cfg.TrainImages, classes: d.classes, device: dev,
	}, d.stream)
	if err != nil {
		return nil, close, fmt.Errorf("%s: %w", d.trainPath, err)
	}
	opened = append(opened, tr)
	var test train.Data
	if withTest && d.testR != nil {
		bs := cfg.EvalBatchSize
		if bs == 0 {
			bs = 1000
		}
		te, err := newBetonStream(d.testR, betonStream{eval: true, batchSize: bs, classes: d.classes, device: dev}, d.stream)
		if err != nil {
			return nil, close, fmt.Errorf("%s: %w", d.testPath, err)
		}
		opened = append(opened, te)
		test = te
	}
	t, err = train.NewWithData(cfg, tr, test, opts)
	return t, close, err
}
