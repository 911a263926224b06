package job

import (
	"fmt"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/ffcv"
	"github.com/flockml/flock/ffcv/beton"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

// Data is what a job trains on: it builds each worker's Trainer
// (Spec.Build) and says how many steps an epoch takes (Spec.StepsPerEpoch).
// Images holds images in memory, Beton streams .beton files.
type Data interface {
	// Build makes the Trainer of one worker (opts.Rank of opts.World),
	// evaluating when withTest; close releases what it opened.
	Build(cfg train.Config, withTest bool, opts train.Options) (t *train.Trainer, close func(), err error)
	// StepsPerEpoch returns the steps of an epoch of each of world
	// workers.
	StepsPerEpoch(cfg train.Config, world int) int
	// Counts returns the numbers of training and test images (0: no test
	// set).
	Counts() (train, test int)
	// Name names the data for reports.
	Name() string
	// Close releases the data, once every worker's Trainer is closed.
	Close() error
}

// Images are data held in memory, trained on through train.New.
type Images struct {
	Train, Test *dataset.Images
	// Label names them (default: "images in memory").
	Label string
}

var _ Data = Images{}

// Build implements Data.
func (d Images) Build(cfg train.Config, withTest bool, opts train.Options) (*train.Trainer, func(), error) {
	test := d.Test
	if !withTest {
		test = nil
	}
	t, err := train.New(cfg, d.Train, test, opts)
	return t, func() {}, err
}

// StepsPerEpoch implements Data.
func (d Images) StepsPerEpoch(cfg train.Config, world int) int {
	return cfg.StepsPerEpoch(d.Train.N, world)
}

// Counts implements Data.
func (d Images) Counts() (trainN, testN int) {
	if d.Test != nil {
		testN = d.Test.N
	}
	return d.Train.N, testN
}

// Name implements Data.
func (d Images) Name() string {
	if d.Label == "" {
		return "images in memory"
	}
	return d.Label
}

// Close implements Data; images in memory need nothing.
func (Images) Close() error { return nil }

// BetonOptions say how .beton files are streamed through ffcv.Loader:
// FFCV's ImageNet recipe is ImageSize 160 (or 192, 224), Flip, and
// ImageNet's statistics.
type BetonOptions struct {
	// ImageSize trains on random-resized crops of ImageSize² pixels, with
	// areas a fraction Scale of the image's, and evaluates on centre crops
	// (ratio 224/256) of that size; 0 takes the images as stored.
	ImageSize int
	Scale     [2]float64
	// Flip flips training images left–right with probability 1/2.
	Flip bool
	// Mean and Std normalise pixels scaled to [0, 1], one value or one
	// per channel (nil: ImageNet's for RGB, Fashion-MNIST's for
	// grayscale).
	Mean, Std []float64
	// DecodeWorkers decode and augment, per worker (0: GOMAXPROCS).
	DecodeWorkers int
	// CacheBytes, when > 0, reads pages into a bounded process cache of
	// that many bytes per file and worker, prefetched for the batches
	// ahead; 0 maps the file (the operating system's page cache).
	CacheBytes int64
	// Order is the order of training images.
	Order ffcv.Order
}

// Beton is data streamed from .beton files: a training file with an image
// field "image" and an int field "label", and optionally a test file.
type Beton struct {
	trainPath, testPath string
	trainR, testR       *beton.Reader
	// trainN and testN count the files' samples; classes is the training
	// file's largest label plus one.
	trainN, testN, classes int
	opt                    BetonOptions
}

var _ Data = (*Beton)(nil)

// OpenBeton opens the .beton file at trainPath and the one at testPath
// (none when empty) and counts their samples and classes.
func OpenBeton(trainPath, testPath string, opt BetonOptions) (_ *Beton, err error) {
	d := &Beton{trainPath: trainPath, testPath: testPath, opt: opt}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	if d.trainR, err = d.open(trainPath); err != nil {
		return nil, err
	}
	r := d.trainR
	li, ok := r.FieldIndex("label")
	if !ok || r.Fields()[li].Type != beton.IntType {
		return nil, fmt.Errorf("ffcv: %s: no int field \"label\"", trainPath)
	}
	d.trainN = r.NumSamples()
	for i := range d.trainN {
		y := r.Int(li, i)
		if y < 0 || y >= 1<<31-1 {
			return nil, fmt.Errorf("ffcv: %s: sample %d: label %d is not a class index", trainPath, i, y)
		}
		d.classes = max(d.classes, int(y)+1)
	}
	if testPath != "" {
		if d.testR, err = d.open(testPath); err != nil {
			return nil, err
		}
		d.testN = d.testR.NumSamples()
	}
	return d, nil
}

// open opens the .beton file at path through a process cache of
// CacheBytes (shared by the Loaders of the process's workers) or the page
// cache.
func (d *Beton) open(path string) (*beton.Reader, error) {
	ro := beton.ReadOptions{}
	if d.opt.CacheBytes > 0 {
		ro.Cache, ro.CacheBytes = beton.Process, d.opt.CacheBytes
	}
	return beton.Open(path, ro)
}

// Close implements Data: it closes the files.
func (d *Beton) Close() error {
	for _, r := range []*beton.Reader{d.trainR, d.testR} {
		if r != nil {
			r.Close()
		}
	}
	return nil
}

// Name implements Data: the training file.
func (d *Beton) Name() string { return d.trainPath }

// Counts implements Data.
func (d *Beton) Counts() (trainN, testN int) { return d.trainN, d.testN }

// StepsPerEpoch implements Data. ffcv.Loader pads each epoch to a multiple
// of world (every rank visits ⌈n/world⌉ samples) and a training loader
// drops the last, smaller batch.
func (d *Beton) StepsPerEpoch(cfg train.Config, world int) int {
	n := d.trainN
	if cfg.TrainImages > 0 {
		n = min(n, cfg.TrainImages)
	}
	world = max(world, 1)
	return (n + world - 1) / world / cfg.BatchSize
}

// Build implements Data: a Loader per file over the shared Readers.
func (d *Beton) Build(cfg train.Config, withTest bool, opts train.Options) (t *train.Trainer, close func(), err error) {
	if cfg.ValImages > 0 {
		return nil, func() {}, fmt.Errorf("ffcv: %d validation images: a .beton run takes its validation set as a test file", cfg.ValImages)
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
	tr, err := d.stream(d.trainR, streamOf{batchSize: cfg.BatchSize, seed: cfg.Seed, rank: opts.Rank, world: opts.World, images: cfg.TrainImages, device: dev})
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
		te, err := d.stream(d.testR, streamOf{eval: true, batchSize: bs, device: dev})
		if err != nil {
			return nil, close, fmt.Errorf("%s: %w", d.testPath, err)
		}
		opened = append(opened, te)
		test = te
	}
	t, err = train.NewWithData(cfg, tr, test, opts)
	return t, close, err
}

// streamOf describes how one file is streamed to a worker.
type streamOf struct {
	// eval selects the evaluation pipeline: sequential order, centre
	// crops, no flip, the last smaller batch kept.
	eval        bool
	batchSize   int
	seed        uint64
	rank, world int
	// images keeps only the first images samples (0: all).
	images int
	device tensor.Device
}

// Statistics returns the normalisation of c-channel images in pixel units
// (0–255), as ffcv.Normalize takes them.
func (o BetonOptions) Statistics(c int) (mean, std []float64, err error) {
	mean, std = o.Mean, o.Std
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

func (d *Beton) stream(r *beton.Reader, b streamOf) (*ffcv.ImageStream, error) {
	s := d.opt
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
		if s.ImageSize > 0 && b.eval {
			dec = ffcv.CenterCrop{Width: s.ImageSize, Height: s.ImageSize}
		} else if s.ImageSize > 0 {
			dec = ffcv.RandomResizedCrop{Width: s.ImageSize, Height: s.ImageSize, Scale: s.Scale}
		}
	case beton.NDArrayType:
		if s.ImageSize > 0 {
			return nil, fmt.Errorf("ffcv: stream: --image-size %d: field \"image\" holds arrays, which are not cropped", s.ImageSize)
		}
		dec, c = ffcv.NDArrayDecoder{}, 1
		if len(f.Shape) == 3 {
			c = f.Shape[2]
		}
	default:
		return nil, fmt.Errorf("ffcv: stream: field \"image\" is a %v field, want images or a uint8 ndarray", f.Type)
	}
	mean, std, err := s.Statistics(c)
	if err != nil {
		return nil, err
	}
	img := ffcv.Pipeline{dec}
	if s.Flip && !b.eval {
		img = append(img, ffcv.Flip{})
	}
	img = append(img, ffcv.ToCHW{}, ffcv.Normalize{Mean: mean, Std: std})
	pipes := map[string]ffcv.Pipeline{}
	for _, f := range r.Fields() {
		pipes[f.Name] = nil
	}
	pipes["image"], pipes["label"] = img, ffcv.Pipeline{ffcv.IntDecoder{}, ffcv.Squeeze{}}

	n := r.NumSamples()
	opt := ffcv.Options{
		BatchSize: b.batchSize, Workers: s.DecodeWorkers, Seed: b.seed,
		Rank: b.rank, World: b.world, Pipelines: pipes,
	}
	if s.CacheBytes > 0 {
		opt.Cache = ffcv.ProcessCache
	}
	if !b.eval {
		opt.Order = s.Order
	}
	if b.images > 0 && b.images < n {
		opt.Indices = make([]int, b.images)
		for i := range opt.Indices {
			opt.Indices[i] = i
		}
	}
	l, err := ffcv.NewLoader(r, opt)
	if err != nil {
		if s.ImageSize == 0 && f.Type == beton.RGBImageType {
			// Images of several sizes need a crop to one.
			return nil, fmt.Errorf("%w; --image-size crops them to one size", err)
		}
		return nil, err
	}
	st, err := ffcv.NewImageStream(l, ffcv.ImageStreamOptions{Classes: d.classes, Device: b.device})
	if err != nil {
		l.Close()
		return nil, err
	}
	return st, nil
}
