package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/ffcv"
	"github.com/flockml/flock/job"
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

// betonOptions returns the streaming s describes, once validated.
func (s streamOptions) betonOptions() job.BetonOptions {
	o := job.BetonOptions{ImageSize: s.imageSize, Flip: s.flip, DecodeWorkers: s.decodeWorkers}
	o.Scale, _ = s.scale()
	o.Mean, _ = parseFloats("mean", s.mean)
	o.Std, _ = parseFloats("std", s.std)
	o.Order, _ = s.trainOrder()
	if s.cache == "process" {
		o.CacheBytes = int64(s.cacheMiB) << 20
	}
	return o
}

// fashionData is Fashion-MNIST's data, named for reports.
func fashionData(train, test *dataset.Images, subset bool) job.Images {
	d := job.Images{Train: train, Test: test, Label: "Fashion-MNIST"}
	if subset {
		d.Label = "Fashion-MNIST (embedded subset)"
	}
	return d
}

// hasTest reports whether d has a test set.
func hasTest(d job.Data) bool {
	_, n := d.Counts()
	return n > 0
}

// streamed reports whether d streams .beton files.
func streamed(d job.Data) bool {
	_, ok := d.(*job.Beton)
	return ok
}
