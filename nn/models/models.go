package models

import (
	"fmt"
	"sort"
	"strings"

	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/tensor"
)

// Config describes the input and output of a model to build.
type Config struct {
	// InChannels, Height and Width describe one input image (C, H, W).
	InChannels, Height, Width int
	// NumClasses is the number of logits.
	NumClasses int
}

// FashionMNIST is the input and output of the Fashion-MNIST task.
var FashionMNIST = Config{InChannels: 1, Height: 28, Width: 28, NumClasses: 10}

// Builder makes a model for cfg, drawing its initial weights from g.
type Builder func(cfg Config, g *tensor.Generator) (nn.Layer, error)

type entry struct {
	build Builder
	about string
}

var registry = map[string]entry{}

// register adds a model under name; each family registers its members from
// an init function in its own file.
func register(name, about string, b Builder) {
	if _, dup := registry[name]; dup {
		panic("models: model " + name + " registered twice")
	}
	registry[name] = entry{b, about}
}

func init() {
	register("mlp", "784-256-256-10 multilayer perceptron with ReLU (input flattened)", MLP)
	register("cnn", "two 3×3 conv + ReLU + max-pool stages (16, 32 channels), then 64 hidden units", SmallCNN)
}

// Build returns the model registered as name.
func Build(name string, cfg Config, g *tensor.Generator) (nn.Layer, error) {
	r, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("models: unknown model %q (available: %s)", name, strings.Join(Names(), ", "))
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
