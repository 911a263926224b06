// Command evaluate uses flock as a library from a module of its own: it
// loads a torchvision ResNet-50 exported as safetensors (the state dict of
// torchvision.models.resnet50, saved with safetensors.torch.save_file; the
// integer num_batches_tracked tensors may be left out) and measures its
// top-1 accuracy on the images of a .beton file, decoded and centre-cropped
// exactly as FFCV's CenterCropRGBImageDecoder does (ffcv.MatchFFCV) and
// normalised with ImageNet's mean and standard deviation:
//
//	go run . -weights resnet50.safetensors -data val.beton
//
// It prints one line, and with -logits writes the logits as a .npy file
// ([N, classes] float32, in the file's sample order) for comparing with
// PyTorch's.
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/ffcv"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/nn/models"
	"github.com/flockml/flock/npy"
	"github.com/flockml/flock/safetensors"
	"github.com/flockml/flock/tensor"
)

func main() {
	weights := flag.String("weights", "", "`PATH` of the torchvision ResNet-50 state dict (safetensors)")
	data := flag.String("data", "", "`PATH` of the .beton file (fields image and label)")
	size := flag.Int("size", 224, "side of the centre crop fed to the network, in pixels")
	stem := flag.String("stem", "imagenet", "ResNet stem: imagenet (torchvision's), cifar or auto")
	batch := flag.Int("batch-size", 32, "images per batch")
	limit := flag.Int("limit", 0, "evaluate the first `N` images only (0: all)")
	logits := flag.String("logits", "", "write the logits to `PATH` as a .npy file")
	flag.Parse()
	if *weights == "" || *data == "" {
		fmt.Fprintln(os.Stderr, "usage: evaluate -weights RESNET50.safetensors -data IMAGES.beton [flags]")
		flag.PrintDefaults()
		os.Exit(2)
	}
	r, err := evaluate(context.Background(), *weights, *data, *size, *stem, *batch, *limit)
	if err != nil {
		fmt.Fprintf(os.Stderr, "evaluate: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("%d images, top-1 accuracy %.2f%%\n", r.images, 100*float64(r.correct)/float64(r.images))
	if *logits != "" {
		if err := npy.WriteFile(*logits, r.logitsArray()); err != nil {
			fmt.Fprintf(os.Stderr, "evaluate: %v\n", err)
			os.Exit(1)
		}
	}
}

type result struct {
	images, correct, classes int
	logits                   []float32 // [images, classes]
}

func evaluate(ctx context.Context, weights, data string, size int, stemName string, batch, limit int) (*result, error) {
	sd, err := safetensors.LoadTensors(weights)
	if err != nil {
		return nil, err
	}
	defer nn.ReleaseAll(sd)
	fc, ok := sd["fc.weight"]
	if !ok || len(fc.Shape()) != 2 {
		return nil, fmt.Errorf("%s: no fc.weight [classes, features]: not a torchvision ResNet", weights)
	}
	stem, err := models.ParseStem(stemName)
	if err != nil {
		return nil, err
	}
	classes := fc.Shape()[0]
	m, err := models.Build("resnet50", models.Config{InChannels: 3, Height: size, Width: size, NumClasses: classes, Stem: stem}, tensor.NewGenerator(0))
	if err != nil {
		return nil, err
	}
	defer m.Release()
	// Strict: every tensor of the network must be in the file, except the
	// batch norms' num_batches_tracked, which PyTorch too fills with 0.
	if err := nn.LoadStateDict(m, sd, true); err != nil {
		return nil, fmt.Errorf("%s: %w", weights, err)
	}
	nn.Eval(m)

	opt := ffcv.Options{
		BatchSize: batch,
		Decode:    ffcv.MatchFFCV,
		Pipelines: map[string]ffcv.Pipeline{
			"image": {ffcv.CenterCrop{Width: size, Height: size}, ffcv.ToCHW{}, ffcv.Normalize{Mean: ffcv.ImageNetMean, Std: ffcv.ImageNetStd}},
			"label": {ffcv.IntDecoder{}, ffcv.Squeeze{}},
		},
	}
	if limit > 0 {
		opt.Indices = make([]int, limit)
		for i := range opt.Indices {
			opt.Indices[i] = i
		}
	}
	l, err := ffcv.Open(data, opt)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	// The order is sequential and nothing is drawn at random, so the loader
	// keeps the last, smaller batch: every image is evaluated.
	res := &result{classes: classes}
	for b, err := range l.Epoch(ctx) {
		if err != nil {
			return nil, err
		}
		x := autograd.Const(b.Column("image").Tensor())
		var y *autograd.Var
		autograd.NoGrad(func() { y = m.Forward(x) })
		out := y.Value.Float32s()
		x.Release()
		y.Release()
		for i, label := range b.Column("label").Int64s() {
			row := out[i*classes : (i+1)*classes]
			best := 0
			for k, v := range row {
				if v > row[best] {
					best = k
				}
			}
			if int64(best) == label {
				res.correct++
			}
		}
		res.logits = append(res.logits, out...)
		res.images += b.Len()
	}
	return res, nil
}

// logitsArray returns the logits as a float32 array [images, classes].
func (r *result) logitsArray() *npy.Array {
	b := make([]byte, 0, 4*len(r.logits))
	for _, v := range r.logits {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return &npy.Array{DType: "<f4", Shape: []int{r.images, r.classes}, Data: b}
}
