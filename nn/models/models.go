package models

import (
	"fmt"
	"sort"
	"strings"

	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/tensor"
)

// Config describes the input and output of a model to build and, for the
// ResNets, the options of ResNetOptions that the registry does not fix. The
// zero value of an option keeps the registered model as it is; a model that
// does not have an option refuses it.
type Config struct {
	// InChannels, Height and Width describe one input image (C, H, W).
	InChannels, Height, Width int
	// NumClasses is the number of logits.
	NumClasses int

	// Stem selects the stem of the ImageNet ResNets (resnet18 … resnet152,
	// wide_resnet50_2): StemAuto, the zero value, picks the small stem for
	// images whose smaller side is at most SmallStemMaxSide; StemImageNet
	// and StemCIFAR choose one whatever the size. The CIFAR ResNets have
	// only the small stem (StemCIFAR or StemAuto).
	Stem Stem
	// ZeroInitResidual starts every residual block of a ResNet (ImageNet
	// or CIFAR) as the identity (ResNetOptions.ZeroInitResidual).
	ZeroInitResidual bool
	// Groups and WidthPerGroup, when non-zero, replace those of a
	// Bottleneck ImageNet ResNet (ResNetOptions): resnet50 with 32 groups
	// of width 4 is ResNeXt-50 32×4d.
	Groups, WidthPerGroup int
}

// FashionMNIST is the input and output of the Fashion-MNIST task.
var FashionMNIST = Config{InChannels: 1, Height: 28, Width: 28, NumClasses: 10}

// Builder makes a model for cfg, drawing its initial weights from g.
type Builder func(cfg Config, g *tensor.Generator) (nn.Layer, error)

type entry struct {
	build Builder
	about string
	takes options // the Config options the model has
}

// options is a set of Config's model options.
type options uint8

const (
	takesStem options = 1 << iota
	takesSmallStemOnly
	takesZeroInit
	takesWidth
)

// check returns an error naming the options of c that a model taking only
// these does not have.
func (o options) check(name string, c Config) error {
	var extra []string
	switch {
	case c.Stem < StemAuto || c.Stem > StemCIFAR:
		return fmt.Errorf("models: %s: unknown stem %d", name, c.Stem)
	case c.Stem == StemImageNet && o&takesStem == 0, c.Stem == StemCIFAR && o&(takesStem|takesSmallStemOnly) == 0:
		extra = append(extra, "stem "+c.Stem.String())
	}
	if c.ZeroInitResidual && o&takesZeroInit == 0 {
		extra = append(extra, "zero-init residual")
	}
	if (c.Groups != 0 || c.WidthPerGroup != 0) && o&takesWidth == 0 {
		extra = append(extra, fmt.Sprintf("groups %d, width per group %d", c.Groups, c.WidthPerGroup))
	}
	if len(extra) > 0 {
		return fmt.Errorf("models: %s does not take the option %s", name, strings.Join(extra, "; "))
	}
	return nil
}

var registry = map[string]entry{}

// register adds a model under name; each family registers its members from
// an init function in its own file.
func register(name, about string, b Builder) { registerWith(name, about, 0, b) }

// registerWith adds a model that takes the given Config options.
func registerWith(name, about string, takes options, b Builder) {
	if _, dup := registry[name]; dup {
		panic("models: model " + name + " registered twice")
	}
	registry[name] = entry{b, about, takes}
}

func init() {
	register("mlp", "784-256-256-10 multilayer perceptron with ReLU (input flattened)", MLP)
	register("cnn", "two 3×3 conv + ReLU + max-pool stages (16, 32 channels), then 64 hidden units", SmallCNN)
}

// Build returns the model registered as name. An option of cfg that the
// model does not have (a stem for a ViT, groups for a BasicBlock ResNet) is
// an error.
func Build(name string, cfg Config, g *tensor.Generator) (nn.Layer, error) {
	r, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("models: unknown model %q (available: %s)", name, strings.Join(Names(), ", "))
	}
	if err := r.takes.check(name, cfg); err != nil {
		return nil, err
	}
	return r.build(cfg, g)
}

// Names lists the registered models.
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Describe returns a one-line description of the model registered as name.
func Describe(name string) string { return registry[name].about }

// MLP is a multilayer perceptron on the flattened image:
// Flatten → Linear(C·H·W, 256) → ReLU → Linear(256, 256) → ReLU →
// Linear(256, classes). On Fashion-MNIST it has 269,322 parameters.
func MLP(cfg Config, g *tensor.Generator) (nn.Layer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	in := cfg.InChannels * cfg.Height * cfg.Width
	return nn.NewSequential(
		nn.NewFlatten(1, -1),
		nn.NewLinear(in, 256, true, g),
		nn.NewReLU(),
		nn.NewLinear(256, 256, true, g),
		nn.NewReLU(),
		nn.NewLinear(256, cfg.NumClasses, true, g),
	), nil
}

// SmallCNN is a small convolutional network:
// Conv(C→16, 3×3, pad 1) → ReLU → MaxPool(2) → Conv(16→32, 3×3, pad 1) →
// ReLU → MaxPool(2) → Flatten → Linear(32·H/4·W/4, 64) → ReLU →
// Linear(64, classes). On Fashion-MNIST it has 105,866 parameters.
func SmallCNN(cfg Config, g *tensor.Generator) (nn.Layer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Height%4 != 0 || cfg.Width%4 != 0 {
		return nil, fmt.Errorf("models: cnn needs image sides divisible by 4, got %d×%d", cfg.Height, cfg.Width)
	}
	conv := nn.Conv2dOptions{Padding: 1}
	return nn.NewSequential(
		nn.NewConv2d(cfg.InChannels, 16, 3, conv, g),
		nn.NewReLU(),
		nn.NewMaxPool2d(2, nn.PoolOptions{}),
		nn.NewConv2d(16, 32, 3, conv, g),
		nn.NewReLU(),
		nn.NewMaxPool2d(2, nn.PoolOptions{}),
		nn.NewFlatten(1, -1),
		nn.NewLinear(32*(cfg.Height/4)*(cfg.Width/4), 64, true, g),
		nn.NewReLU(),
		nn.NewLinear(64, cfg.NumClasses, true, g),
	), nil
}

func (c Config) validate() error {
	if c.InChannels <= 0 || c.Height <= 0 || c.Width <= 0 || c.NumClasses <= 0 {
		return fmt.Errorf("models: invalid input/output config %+v", c)
	}
	return nil
}
