package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/flockml/flock/bench"
	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/ffcv"
	"github.com/flockml/flock/ffcv/beton"
	"github.com/flockml/flock/internal/term"
)

func init() {
	extraCommands = append(extraCommands, command{"convert", "write a data set as an FFCV .beton file", runConvert, convertHelp})
}

func convertHelp(w io.Writer) {
	fmt.Fprint(w, `Usage:
  flock convert fashion-mnist OUT.beton [--split train|test] [flags]
  flock convert imagefolder DIR OUT.beton [flags]
  flock convert cifar10|cifar100 DIR OUT.beton [--split train|test] [--download]
  flock convert synthetic OUT.beton [--n N] [--size WxH] [flags]

Write a data set as an FFCV .beton file (format version 2, readable by FFCV
and by flock's loader). The file is built under a temporary name and renamed
into place when complete; the same input and settings give the same bytes.

Sources:
  fashion-mnist  Fashion-MNIST (60000 training or 10000 test images of
                 28×28×1) from --data DIR or the usual places (see flock
                 train --help); fields image and label. --format ndarray
                 (default) stores uint8 (28, 28) arrays as FFCV's own
                 Fashion-MNIST files do; --format image stores 1-channel raw
                 images (a flock extension FFCV does not read).
  imagefolder    a tree with one subdirectory per class, as torchvision's
                 ImageFolder: classes in sorted order are labels 0, 1, …;
                 JPEG, PNG and GIF files, converted to RGB. For ImageNet,
                 FFCV's settings: --max-res 256 to 512 (256 for training
                 at 160–192 pixels, larger for higher resolutions) and
                 --jpeg-quality 90, or --write-mode proportion
                 --compress-probability 0.5 to trade disk for decoding.
  cifar10, cifar100
                 CIFAR-10 or CIFAR-100 (fine labels): 50000 training or
                 10000 test images of 32×32×3 from the binary or python
                 version its authors publish: DIR holds
                 cifar-10-binary.tar.gz or cifar-10-python.tar.gz
                 (cifar-100-binary.tar.gz, cifar-100-python.tar.gz) or its
                 extracted files (the python version's pickles are read
                 as data, running no code); --download fetches the binary
                 archive into DIR from https://www.cs.toronto.edu/~kriz/
                 and checks its SHA-256.
  synthetic      generated photo-like RGB images (label i mod 10), for
                 benchmarks: flock convert synthetic /tmp/s.beton --n 2000
                 --size 256x256 --write-mode jpg --jpeg-quality 90

Flags:
  --split NAME          fashion-mnist, cifar: train or test (default train)
  --format NAME         fashion-mnist: ndarray or image (default ndarray)
  --data DIR            fashion-mnist: directory of the IDX files
  --download            fashion-mnist, cifar: download the files when not found
  --n N                 synthetic: number of images (default 1000)
  --size WxH            synthetic: image size (default 256x256)
  --seed N              synthetic: seed of the images; also of the
                        proportion mode's choices (default 0)
  --write-mode MODE     images: raw, jpg, smart or proportion (default jpg
                        for imagefolder and synthetic, raw for fashion-mnist
                        and cifar)
  --max-res N           images: shrink images whose longer side exceeds N
                        (area interpolation; default 0: keep)
  --jpeg-quality Q      images: JPEG quality 1–100 (default 90)
  --max-pixels N        imagefolder: refuse an image whose header claims
                        more than N pixels, before decoding it (default
                        89478485, PIL's limit; 0: no limit)
  --compress-probability P
                        proportion mode: probability of JPEG (default 0.5)
  --smart-threshold B   smart mode: JPEG when the raw image exceeds B bytes
  --page-size SIZE      page size, a power of two ≥ 2MiB (default 8MiB)
  --workers N           encoding goroutines (default: all cores)

A progress bar is drawn on standard error when it is a terminal.

Examples:
  flock convert fashion-mnist fmnist_train.beton
  flock convert fashion-mnist fmnist_test.beton --split test
  flock convert imagefolder ~/imagenet/train train_256.beton --max-res 256 --jpeg-quality 90
  flock convert cifar10 ~/data/cifar cifar10_train.beton --download
  flock convert cifar10 ~/data/cifar cifar10_test.beton --split test
`)
}

type convertOptions struct {
	split, format, data, writeMode, pageSize, size string
	download                                       bool
	n, maxRes, quality, smartThreshold, workers    int
	maxPixels                                      int
	compressProb                                   float64
	seed                                           uint64
	writeModeSet                                   bool
}

func convertFlags(o *convertOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("flock convert", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.split, "split", "train", "")
	fs.StringVar(&o.format, "format", "ndarray", "")
	fs.StringVar(&o.data, "data", "", "")
	fs.BoolVar(&o.download, "download", false, "")
	fs.IntVar(&o.n, "n", 1000, "")
	fs.StringVar(&o.size, "size", "256x256", "")
	fs.Uint64Var(&o.seed, "seed", 0, "")
	fs.Func("write-mode", "", func(s string) error { o.writeMode, o.writeModeSet = s, true; return nil })
	fs.IntVar(&o.maxRes, "max-res", 0, "")
	fs.IntVar(&o.quality, "jpeg-quality", 90, "")
	fs.IntVar(&o.maxPixels, "max-pixels", ffcv.DefaultMaxPixels, "")
	fs.Float64Var(&o.compressProb, "compress-probability", 0.5, "")
	fs.IntVar(&o.smartThreshold, "smart-threshold", 0, "")
	fs.StringVar(&o.pageSize, "page-size", "8MiB", "")
	fs.IntVar(&o.workers, "workers", 0, "")
	return fs
}

// parseInterleaved parses flags that may come before, between or after the
// positional arguments, and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func convertUsage(stderr io.Writer, format string, a ...any) int {
	fmt.Fprintf(stderr, "flock convert: "+format+"; run 'flock convert --help' for usage\n", a...)
	return exitUsage
}

func runConvert(args []string, stdout, stderr io.Writer) int {
	var o convertOptions
	fs := convertFlags(&o)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			convertHelp(stdout)
			return exitOK
		}
		return convertUsage(stderr, "%v", err)
	}
	if len(pos) == 0 {
		return convertUsage(stderr, "missing source (fashion-mnist, imagefolder, cifar10, cifar100 or synthetic)")
	}
	want := map[string]int{"fashion-mnist": 2, "imagefolder": 3, "cifar10": 3, "cifar100": 3, "synthetic": 2}
	n, ok := want[pos[0]]
	if !ok {
		return convertUsage(stderr, "unknown source %q (want fashion-mnist, imagefolder, cifar10, cifar100 or synthetic)", pos[0])
	}
	if len(pos) != n {
		if len(pos) < n {
			return convertUsage(stderr, "%s: want %s", pos[0], map[string]string{"fashion-mnist": "OUT.beton", "imagefolder": "DIR and OUT.beton", "cifar10": "DIR and OUT.beton", "cifar100": "DIR and OUT.beton", "synthetic": "OUT.beton"}[pos[0]])
		}
		return convertUsage(stderr, "%s: unexpected argument %q", pos[0], pos[n])
	}
	out := pos[n-1]
	if !strings.HasSuffix(out, ".beton") {
		return convertUsage(stderr, "output %q: want a path ending in .beton", out)
	}
	pageSize, err := bench.ParseSize(o.pageSize)
	if err != nil {
		return convertUsage(stderr, "page size %q: want a size such as 8MiB", o.pageSize)
	}
	if pageSize < beton.MinPageSize || pageSize > beton.MaxPageSize || pageSize&(pageSize-1) != 0 {
		return convertUsage(stderr, "page size %s: want a power of two from 2MiB to 2GiB", o.pageSize)
	}
	if o.workers < 0 {
		return convertUsage(stderr, "workers %d: want ≥ 0", o.workers)
	}
	if o.maxPixels < 0 {
		return convertUsage(stderr, "max pixels %d: want ≥ 0", o.maxPixels)
	}
	if !o.writeModeSet {
		o.writeMode = "jpg"
		if pos[0] == "fashion-mnist" || pos[0] == "cifar10" || pos[0] == "cifar100" {
			o.writeMode = "raw"
		}
	}
	image, err := imageField(o)
	if err != nil {
		return convertUsage(stderr, "%v", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var progress io.Writer
	if term.IsTerminal(stderr) {
		progress = stderr
	}
	var (
		fields []beton.NamedField
		src    beton.Source
		about  string
	)
	switch pos[0] {
	case "fashion-mnist", "cifar10", "cifar100":
		if o.split != "train" && o.split != "test" {
			return convertUsage(stderr, "split %q: want train or test", o.split)
		}
		fmnist := pos[0] == "fashion-mnist"
		if fmnist && o.format != "ndarray" && o.format != "image" {
			return convertUsage(stderr, "format %q: want ndarray or image", o.format)
		}
		var trainSet, testSet *dataset.Images
		var err error
		if fmnist {
			trainSet, testSet, err = dataset.LoadFashionMNIST(ctx, dataset.FashionMNISTOptions{Dir: o.data, Download: o.download, Progress: progress})
			about = "Fashion-MNIST"
		} else {
			classes := map[string]int{"cifar10": 10, "cifar100": 100}[pos[0]]
			trainSet, testSet, err = dataset.LoadCIFAR(ctx, dataset.CIFAROptions{Classes: classes, Dir: pos[1], Download: o.download, Progress: progress})
			about = fmt.Sprintf("CIFAR-%d", classes)
		}
		if err != nil {
			fmt.Fprintf(stderr, "flock convert: %v\n", err)
			if ctx.Err() != nil {
				return exitInterrupted
			}
			return exitFailure
		}
		set := trainSet
		if o.split == "test" {
			set = testSet
		}
		s, err := ffcv.NewImagesSource(set)
		if err != nil {
			fmt.Fprintf(stderr, "flock convert: %v\n", err)
			return exitFailure
		}
		s.AsArray, s.Image = fmnist && o.format == "ndarray", image
		fields, src = s.Fields(), s
		about += fmt.Sprintf(" %s set", o.split)
	case "imagefolder":
		s, err := ffcv.NewImageFolderSource(pos[1], image)
		if err != nil {
			fmt.Fprintf(stderr, "flock convert: %v\n", err)
			return exitFailure
		}
		s.MaxPixels = o.maxPixels
		fields, src = s.Fields(), s
		about = fmt.Sprintf("%s (%d classes)", pos[1], len(s.Classes))
	case "synthetic":
		var w, h int
		if _, err := fmt.Sscanf(o.size, "%dx%d", &w, &h); err != nil || w <= 0 || h <= 0 || w > 65535 || h > 65535 {
			return convertUsage(stderr, "size %q: want WxH such as 256x256", o.size)
		}
		if o.n < 0 {
			return convertUsage(stderr, "n %d: want ≥ 0", o.n)
		}
		s := &ffcv.SyntheticSource{N: o.n, Width: w, Height: h, Seed: o.seed, Image: image}
		fields, src = s.Fields(), s
		about = fmt.Sprintf("synthetic %dx%d images", w, h)
	}
	if dir := filepath.Dir(out); dir != "" {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			fmt.Fprintf(stderr, "flock convert: output directory %s does not exist\n", dir)
			return exitFailure
		}
	}
	start := time.Now()
	err = beton.Write(ctx, out, fields, src, beton.WriterOptions{
		PageSize: int(pageSize), Workers: o.workers, Progress: progress, Seed: o.seed,
	})
	if err != nil {
		fmt.Fprintf(stderr, "flock convert: %v\n", err)
		if ctx.Err() != nil {
			return exitInterrupted
		}
		return exitFailure
	}
	st, err := os.Stat(out)
	if err != nil {
		fmt.Fprintf(stderr, "flock convert: %v\n", err)
		return exitFailure
	}
	var names []string
	for _, f := range fields {
		names = append(names, f.Name)
	}
	fmt.Fprintf(stdout, "wrote %s: %d samples of %s, fields %s, %.1f MB in %s\n",
		out, src.Len(), about, strings.Join(names, ", "), float64(st.Size())/1e6, time.Since(start).Round(10*time.Millisecond))
	return exitOK
}

// imageField returns the image field settings of the flags.
func imageField(o convertOptions) (beton.RGBImageField, error) {
	f := beton.RGBImageField{MaxResolution: o.maxRes, JPEGQuality: o.quality, CompressProbability: o.compressProb, SmartThreshold: o.smartThreshold}
	var err error
	if f.Mode, err = beton.ParseImageMode(o.writeMode); err != nil {
		return f, err
	}
	if o.quality < 1 || o.quality > 100 {
		return f, fmt.Errorf("jpeg quality %d: want 1–100", o.quality)
	}
	if o.maxRes < 0 {
		return f, fmt.Errorf("max-res %d: want ≥ 0", o.maxRes)
	}
	if !(o.compressProb >= 0 && o.compressProb <= 1) {
		return f, fmt.Errorf("compress probability %v: want in [0, 1]", o.compressProb)
	}
	if o.smartThreshold < 0 {
		return f, fmt.Errorf("smart threshold %d: want ≥ 0", o.smartThreshold)
	}
	return f, nil
}
