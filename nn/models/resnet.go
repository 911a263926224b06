package models

import (
	"fmt"
	"slices"
	"strings"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/tensor"
)

// Residual networks (He et al., "Deep residual learning for image
// recognition", CVPR 2016), in two families:
//
//   - the ImageNet networks as torchvision defines them (resnet18 …
//     resnet152, wide_resnet50_2), with the stride of a Bottleneck on its
//     3×3 convolution ("ResNet v1.5") and state-dict keys identical to
//     torchvision's, so that weights move both ways through safetensors;
//   - the CIFAR networks of the paper's §4.2 (resnet20 … resnet110).
//
// Both are a *ResNet: a stem, stages of residual blocks, global average
// pooling and a linear classifier.

// SmallStemMaxSide is the largest image side for which the registry's
// ImageNet ResNets use the small stem: an image with
// min(Height, Width) ≤ SmallStemMaxSide (CIFAR's 32×32, Fashion-MNIST's
// 28×28, 64×64 crops) gets a 3×3 stride-1 stem without max-pooling; larger
// images get torchvision's 7×7 stride-2 stem and max-pool, which shrink the
// image 4× before the first stage.
const SmallStemMaxSide = 64

// Stem is the choice of a registered ImageNet ResNet's stem (Config.Stem).
type Stem int

const (
	// StemAuto uses the small stem for images whose smaller side is at
	// most SmallStemMaxSide and torchvision's otherwise.
	StemAuto Stem = iota
	// StemImageNet is torchvision's stem: 7×7 convolution with stride 2,
	// then 3×3 max-pool with stride 2.
	StemImageNet
	// StemCIFAR is the small stem: 3×3 convolution with stride 1, no
	// max-pool (ResNetOptions.SmallStem).
	StemCIFAR
)

var stemNames = []string{"auto", "imagenet", "cifar"}

// String returns the stem's name as ParseStem reads it.
func (s Stem) String() string {
	if s >= 0 && int(s) < len(stemNames) {
		return stemNames[s]
	}
	return fmt.Sprintf("Stem(%d)", int(s))
}

// ParseStem reads a stem's name: "auto" (or empty), "imagenet" or "cifar".
func ParseStem(name string) (Stem, error) {
	if name == "" {
		return StemAuto, nil
	}
	if i := slices.Index(stemNames, name); i >= 0 {
		return Stem(i), nil
	}
	return 0, fmt.Errorf("models: unknown stem %q (want %s)", name, strings.Join(stemNames, ", "))
}

func init() {
	about := map[int]string{
		18:  "ResNet-18 (torchvision; BasicBlocks 2-2-2-2), 11.7M parameters at 1000 classes",
		34:  "ResNet-34 (torchvision; BasicBlocks 3-4-6-3), 21.8M parameters at 1000 classes",
		50:  "ResNet-50 v1.5 (torchvision; Bottlenecks 3-4-6-3), 25.6M parameters at 1000 classes",
		101: "ResNet-101 v1.5 (torchvision; Bottlenecks 3-4-23-3), 44.5M parameters at 1000 classes",
		152: "ResNet-152 v1.5 (torchvision; Bottlenecks 3-8-36-3), 60.2M parameters at 1000 classes",
	}
	const stem = "; 3×3 stem without max-pool for images of side ≤ 64 unless the stem is chosen"
	for _, d := range []int{18, 34, 50, 101, 152} {
		takes := takesStem | takesZeroInit
		if resnetStages[d].bottleneck {
			takes |= takesWidth
		}
		registerWith(fmt.Sprintf("resnet%d", d), about[d]+stem, takes, resnetBuilder(ResNetOptions{Depth: d}))
	}
	registerWith("wide_resnet50_2", "Wide ResNet-50-2 (torchvision; Bottlenecks twice as wide), 68.9M parameters at 1000 classes"+stem,
		takesStem|takesZeroInit|takesWidth, resnetBuilder(ResNetOptions{Depth: 50, WidthPerGroup: 128}))
	for _, d := range []int{20, 32, 44, 56, 110} {
		registerWith(fmt.Sprintf("resnet%d", d),
			fmt.Sprintf("CIFAR ResNet-%d (He et al. 2016; 3 stages of %d BasicBlocks, 16-32-64 channels, zero-padding shortcuts)", d, (d-2)/6),
			takesSmallStemOnly|takesZeroInit, cifarBuilder(d))
	}
}

// resnetBuilder adapts NewResNet to the registry: the classes, input
// channels and options come from cfg, and the small stem is used as
// cfg.Stem says (by default for images whose smaller side is at most
// SmallStemMaxSide).
func resnetBuilder(base ResNetOptions) Builder {
	return func(cfg Config, g *tensor.Generator) (nn.Layer, error) {
		if err := cfg.validate(); err != nil {
			return nil, err
		}
		opt := base
		opt.NumClasses, opt.InChannels = cfg.NumClasses, cfg.InChannels
		switch cfg.Stem {
		case StemAuto:
			opt.SmallStem = min(cfg.Height, cfg.Width) <= SmallStemMaxSide
		case StemCIFAR:
			opt.SmallStem = true
		}
		opt.ZeroInitResidual = cfg.ZeroInitResidual
		opt.Groups = resnetOr(cfg.Groups, opt.Groups)
		opt.WidthPerGroup = resnetOr(cfg.WidthPerGroup, opt.WidthPerGroup)
		m, err := NewResNet(opt, g)
		if err != nil {
			return nil, err
		}
		return m, nil
	}
}

// cifarBuilder adapts NewCIFARResNet to the registry, with option A
// (zero-padding) shortcuts.
func cifarBuilder(depth int) Builder {
	return func(cfg Config, g *tensor.Generator) (nn.Layer, error) {
		if err := cfg.validate(); err != nil {
			return nil, err
		}
		m, err := NewCIFARResNet(depth, CIFARResNetOptions{NumClasses: cfg.NumClasses, InChannels: cfg.InChannels, ZeroInitResidual: cfg.ZeroInitResidual}, g)
		if err != nil {
			return nil, err
		}
		return m, nil
	}
}

// ResNetOptions describe an ImageNet-style ResNet as torchvision builds
// it. Zero values mean torchvision's defaults.
type ResNetOptions struct {
	// Depth is 18 or 34 (BasicBlocks), or 50, 101 or 152 (Bottlenecks).
	Depth int
	// NumClasses is the number of logits (default 1000).
	NumClasses int
	// InChannels is the number of input channels (default 3).
	InChannels int
	// SmallStem replaces torchvision's stem (7×7 convolution with stride 2,
	// then 3×3 max-pool with stride 2) by a 3×3 convolution with stride 1
	// and no max-pool, for small images (32×32, 28×28). conv1.weight is
	// then [64, InChannels, 3, 3]; every other key is unchanged.
	SmallStem bool
	// ZeroInitResidual sets γ of the last batch norm of every block to 0
	// (torchvision's zero_init_residual), so that each block starts as the
	// identity (Goyal et al., 2017).
	ZeroInitResidual bool
	// Groups is the number of groups of a Bottleneck's 3×3 convolution
	// (default 1; 32 for ResNeXt-50 32×4d).
	Groups int
	// WidthPerGroup is the base width of a Bottleneck's inner convolutions
	// (default 64; 128 for wide_resnet50_2, 4 for ResNeXt-50 32×4d): a stage
	// of p planes has p·WidthPerGroup/64·Groups inner channels.
	// BasicBlock networks take only the defaults.
	WidthPerGroup int
}

// resnetStages are the blocks per stage of each depth.
var resnetStages = map[int]struct {
	blocks     [4]int
	bottleneck bool
}{
	18:  {[4]int{2, 2, 2, 2}, false},
	34:  {[4]int{3, 4, 6, 3}, false},
	50:  {[4]int{3, 4, 6, 3}, true},
	101: {[4]int{3, 4, 23, 3}, true},
	152: {[4]int{3, 8, 36, 3}, true},
}

// ResNet is a residual network: a stem (conv1, bn1, ReLU and, for
// torchvision's stem, a max-pool), stages of residual blocks (layer1 …),
// global average pooling and the linear classifier fc. Its state-dict keys
// are torchvision's: conv1.weight, bn1.weight, bn1.running_mean,
// bn1.num_batches_tracked, layer1.0.conv1.weight,
// layer2.0.downsample.0.weight, layer2.0.downsample.1.running_var, …,
// fc.weight, fc.bias.
type ResNet struct {
	nn.Base
	Conv1 *nn.Conv2d
	BN1   *nn.BatchNorm2d
	// MaxPool is the stem's 3×3 stride-2 max-pool; nil for the small stem
	// and the CIFAR networks.
	MaxPool *nn.MaxPool2d
	// Stages are layer1, layer2, …: Sequentials of *BasicBlock or
	// *Bottleneck.
	Stages []*nn.Sequential
	FC     *nn.Linear
}

// NewResNet returns the ResNet that torchvision's resnet<Depth> builds
// (wide_resnet50_2 with WidthPerGroup 128, resnext50_32x4d with Groups 32 and
// WidthPerGroup 4), initialised as torchvision does: convolution weights
// from N(0, 2/fan_out) (kaiming_normal_ with mode fan_out and ReLU gain),
// batch-norm γ = 1 and β = 0, the classifier as nn.Linear's default, all
// drawn from g. opts choose the dtype and device of the parameters.
//
// Stage i (i = 1…4) has 64·2^(i−1) planes; its first block has stride 2
// (except in stage 1) and a projection shortcut (1×1 convolution with that
// stride, then batch norm, registered as "downsample") when its input and
// output differ in size. A BasicBlock outputs planes channels, a Bottleneck
// 4·planes.
func NewResNet(opt ResNetOptions, g *tensor.Generator, opts ...tensor.Option) (*ResNet, error) {
	spec, ok := resnetStages[opt.Depth]
	if !ok {
		return nil, fmt.Errorf("models: ResNet of depth %d: the depth must be 18, 34, 50, 101 or 152", opt.Depth)
	}
	classes, in := resnetOr(opt.NumClasses, 1000), resnetOr(opt.InChannels, 3)
	groups, width := resnetOr(opt.Groups, 1), resnetOr(opt.WidthPerGroup, 64)
	if classes < 0 || in < 0 || groups < 0 || width < 0 {
		return nil, fmt.Errorf("models: ResNet-%d: negative size in %+v", opt.Depth, opt)
	}
	if !spec.bottleneck && (groups != 1 || width != 64) {
		return nil, fmt.Errorf("models: ResNet-%d: BasicBlock networks support only 1 group and width 64, got %d and %d", opt.Depth, groups, width)
	}

	r := &ResNet{}
	b := resnetParts{g: g, opts: opts, groups: groups, width: width}
	if opt.SmallStem {
		r.Conv1 = b.conv(in, 64, 3, 1, 1, 1)
	} else {
		r.Conv1 = b.conv(in, 64, 7, 2, 3, 1)
	}
	r.BN1 = nn.NewBatchNorm2d(64, nn.BatchNormOptions{}, opts...)
	r.RegisterModule("conv1", r.Conv1)
	r.RegisterModule("bn1", r.BN1)
	r.RegisterModule("relu", nn.NewReLU())
	if !opt.SmallStem {
		r.MaxPool = nn.NewMaxPool2d(3, nn.PoolOptions{Stride: 2, Padding: 1})
		r.RegisterModule("maxpool", r.MaxPool)
	}
	inplanes := 64
	for i, n := range spec.blocks {
		planes, stride := 64<<i, 2
		if i == 0 {
			stride = 1
		}
		stage := nn.NewSequential()
		for j := range n {
			if spec.bottleneck {
				stage.Append(b.bottleneck(inplanes, planes, stride))
				inplanes = 4 * planes
			} else {
				stage.Append(b.basic(inplanes, planes, stride, ShortcutProjection))
				inplanes = planes
			}
			if j == 0 {
				stride = 1
			}
		}
		r.Stages = append(r.Stages, stage)
		r.RegisterModule(fmt.Sprintf("layer%d", i+1), stage)
	}
	r.RegisterModule("avgpool", nn.NewAdaptiveAvgPool2d(1, 1))
	r.FC = nn.NewLinear(inplanes, classes, true, g, opts...)
	r.RegisterModule("fc", r.FC)
	if opt.ZeroInitResidual {
		r.zeroInitResidual()
	}
	return r, nil
}

// Shortcut selects how a CIFAR ResNet's blocks that change the number of
// channels connect their input to their output (He et al., 2016, §3.3).
type Shortcut int

const (
	// ShortcutZeroPad is option A: the input subsampled with the block's
	// stride (x[:, :, ::2, ::2]) and its channels zero-padded, equally
	// before and after, to the output's. It has no parameters; the paper
	// uses it for its CIFAR-10 networks.
	ShortcutZeroPad Shortcut = iota
	// ShortcutProjection is option B: a 1×1 convolution with the block's
	// stride, then batch norm, registered as "downsample" as in torchvision.
	ShortcutProjection
)

// CIFARResNetOptions describe a CIFAR ResNet. Zero values mean the paper's
// CIFAR-10 network.
type CIFARResNetOptions struct {
	// NumClasses is the number of logits (default 10).
	NumClasses int
	// InChannels is the number of input channels (default 3).
	InChannels int
	// Shortcut is ShortcutZeroPad (default, option A) or
	// ShortcutProjection (option B).
	Shortcut Shortcut
	// ZeroInitResidual sets γ of every block's bn2 to 0.
	ZeroInitResidual bool
}

// NewCIFARResNet returns the CIFAR-10 ResNet of He et al. (2016, §4.2) of
// the given depth 6n+2 (20, 32, 44, 56, 110, …): a 3×3 convolution to 16
// channels with batch norm and ReLU, three stages (layer1 … layer3) of n
// BasicBlocks with 16, 32 and 64 channels, the first block of stages 2 and
// 3 with stride 2, global average pooling and the linear classifier fc.
// Keys follow torchvision's naming (conv1, bn1, layerI.J.conv1, fc);
// option B shortcuts add layerI.0.downsample.{0,1}. With option A shortcuts
// and 10 classes resnet20 has 269,722 parameters (the paper's "0.27M"),
// with option B 272,474.
//
// The weights are initialised as NewResNet's (kaiming_normal_ with fan_out
// for convolutions, γ = 1, β = 0, nn.Linear's default for fc), drawn from g.
func NewCIFARResNet(depth int, opt CIFARResNetOptions, g *tensor.Generator, opts ...tensor.Option) (*ResNet, error) {
	if depth < 8 || (depth-2)%6 != 0 {
		return nil, fmt.Errorf("models: CIFAR ResNet of depth %d: the depth must be 6n+2 with n ≥ 1 (20, 32, 44, 56, 110)", depth)
	}
	classes, in := resnetOr(opt.NumClasses, 10), resnetOr(opt.InChannels, 3)
	if classes < 0 || in < 0 {
		return nil, fmt.Errorf("models: CIFAR ResNet-%d: negative size in %+v", depth, opt)
	}
	if opt.Shortcut != ShortcutZeroPad && opt.Shortcut != ShortcutProjection {
		return nil, fmt.Errorf("models: CIFAR ResNet-%d: unknown shortcut %d", depth, opt.Shortcut)
	}
	n := (depth - 2) / 6
	r := &ResNet{}
	b := resnetParts{g: g, opts: opts, groups: 1, width: 64}
	r.Conv1 = b.conv(in, 16, 3, 1, 1, 1)
	r.BN1 = nn.NewBatchNorm2d(16, nn.BatchNormOptions{}, opts...)
	r.RegisterModule("conv1", r.Conv1)
	r.RegisterModule("bn1", r.BN1)
	r.RegisterModule("relu", nn.NewReLU())
	inplanes := 16
	for i, planes := range []int{16, 32, 64} {
		stride := 2
		if i == 0 {
			stride = 1
		}
		stage := nn.NewSequential()
		for range n {
			stage.Append(b.basic(inplanes, planes, stride, opt.Shortcut))
			inplanes, stride = planes, 1
		}
		r.Stages = append(r.Stages, stage)
		r.RegisterModule(fmt.Sprintf("layer%d", i+1), stage)
	}
	r.RegisterModule("avgpool", nn.NewAdaptiveAvgPool2d(1, 1))
	r.FC = nn.NewLinear(inplanes, classes, true, g, opts...)
	r.RegisterModule("fc", r.FC)
	if opt.ZeroInitResidual {
		r.zeroInitResidual()
	}
	return r, nil
}

// zeroInitResidual sets γ of the last batch norm of every block to 0.
func (r *ResNet) zeroInitResidual() {
	for _, s := range r.Stages {
		for _, l := range s.Layers {
			switch b := l.(type) {
			case *BasicBlock:
				b.BN2.Weight.Value.Fill(0)
			case *Bottleneck:
				b.BN3.Weight.Value.Fill(0)
			}
		}
	}
}

// Forward returns the logits [N, NumClasses] of images x [N, C, H, W].
func (r *ResNet) Forward(x *autograd.Var) *autograd.Var {
	if x.Value.Dim() != 4 || x.Value.Size(1) != r.Conv1.In {
		panic(fmt.Sprintf("models: ResNet: input of shape %v; want [N, %d, H, W]", x.Value.Shape(), r.Conv1.In))
	}
	h := r.Conv1.Forward(x)
	h = andRelease(h, r.BN1.ForwardReLU)
	if r.MaxPool != nil {
		h = andRelease(h, r.MaxPool.Forward)
	}
	for _, s := range r.Stages {
		h = andRelease(h, s.Forward)
	}
	h = andRelease(h, func(v *autograd.Var) *autograd.Var { return autograd.Mean(v, 2, 3) }) // [N, C]
	return andRelease(h, r.FC.Forward)
}

// andRelease returns f(h) and releases h.
func andRelease(h *autograd.Var, f func(*autograd.Var) *autograd.Var) *autograd.Var {
	y := f(h)
	h.Release()
	return y
}

// addShortcut returns ReLU(h + shortcut(x)), releasing h; shortcut nil is the
// identity.
func addShortcut(h, x *autograd.Var, shortcut nn.Layer) *autograd.Var {
	var s *autograd.Var
	if shortcut == nil {
		s = autograd.Add(h, x)
	} else {
		sc := shortcut.Forward(x)
		s = autograd.Add(h, sc)
		sc.Release()
	}
	h.Release()
	return andRelease(s, autograd.ReLU)
}

// BasicBlock is the two-convolution residual block of ResNet-18/34 and the
// CIFAR ResNets: ReLU(bn2(conv2(ReLU(bn1(conv1(x))))) + shortcut(x)), both
// convolutions 3×3, the first with the block's stride.
type BasicBlock struct {
	nn.Base
	Conv1 *nn.Conv2d
	BN1   *nn.BatchNorm2d
	Conv2 *nn.Conv2d
	BN2   *nn.BatchNorm2d
	// Downsample is the shortcut when the block changes the size of its
	// input (a Sequential of a 1×1 convolution and batch norm, or a
	// *ZeroPadShortcut); nil for the identity.
	Downsample nn.Layer
}

// Forward applies the block to x [N, In, H, W].
func (b *BasicBlock) Forward(x *autograd.Var) *autograd.Var {
	h := b.Conv1.Forward(x)
	h = andRelease(h, b.BN1.ForwardReLU)
	h = andRelease(h, b.Conv2.Forward)
	h = andRelease(h, b.BN2.Forward)
	return addShortcut(h, x, b.Downsample)
}

// Bottleneck is the three-convolution residual block of ResNet-50/101/152:
// ReLU(bn3(conv3(ReLU(bn2(conv2(ReLU(bn1(conv1(x)))))))) + shortcut(x)) with
// conv1 and conv3 1×1 and conv2 3×3 carrying the block's stride and groups
// (torchvision's "v1.5"; the original put the stride on conv1). It expands
// its planes 4×.
type Bottleneck struct {
	nn.Base
	Conv1 *nn.Conv2d
	BN1   *nn.BatchNorm2d
	Conv2 *nn.Conv2d
	BN2   *nn.BatchNorm2d
	Conv3 *nn.Conv2d
	BN3   *nn.BatchNorm2d
	// Downsample is the projection shortcut (1×1 convolution and batch
	// norm) when the block changes the size of its input; nil for the
	// identity.
	Downsample nn.Layer
}

// Forward applies the block to x [N, In, H, W].
func (b *Bottleneck) Forward(x *autograd.Var) *autograd.Var {
	h := b.Conv1.Forward(x)
	h = andRelease(h, b.BN1.ForwardReLU)
	h = andRelease(h, b.Conv2.Forward)
	h = andRelease(h, b.BN2.ForwardReLU)
	h = andRelease(h, b.Conv3.Forward)
	h = andRelease(h, b.BN3.Forward)
	return addShortcut(h, x, b.Downsample)
}

// ZeroPadShortcut is the parameter-free shortcut of He et al.'s option A:
// x[:, :, ::Stride, ::Stride] with Before zero channels prepended and After
// appended.
type ZeroPadShortcut struct {
	nn.Base
	Stride, Before, After int
}

// Forward subsamples and pads x [N, C, H, W] into
// [N, Before+C+After, ⌈H/Stride⌉, ⌈W/Stride⌉].
func (s *ZeroPadShortcut) Forward(x *autograd.Var) *autograd.Var {
	if s.Stride <= 1 {
		return autograd.Pad(x, []int{0, 0, 0, 0, s.Before, s.After}, 0)
	}
	// A 1×1 window with stride s picks every s-th row and column.
	h := autograd.AvgPool2d(x, tensor.PoolParams{
		KernelH: 1, KernelW: 1, StrideH: s.Stride, StrideW: s.Stride,
		DilationH: 1, DilationW: 1, CountIncludePad: true,
	})
	return andRelease(h, func(v *autograd.Var) *autograd.Var {
		return autograd.Pad(v, []int{0, 0, 0, 0, s.Before, s.After}, 0)
	})
}

// resnetParts makes the layers of a ResNet with its generator, tensor
// options, and Bottleneck groups and width.
type resnetParts struct {
	g             *tensor.Generator
	opts          []tensor.Option
	groups, width int
}

// conv returns a convolution without bias, its weight drawn from
// N(0, 2/fan_out) as torchvision's ResNet initialises it.
func (b resnetParts) conv(in, out, kernel, stride, padding, groups int) *nn.Conv2d {
	c := nn.NewConv2d(in, out, kernel, nn.Conv2dOptions{Stride: stride, Padding: padding, Groups: groups, NoBias: true}, b.g, b.opts...)
	nn.KaimingNormal(c.Weight.Value, 0, nn.FanOut, "relu", b.g)
	return c
}

func (b resnetParts) bn(c int) *nn.BatchNorm2d {
	return nn.NewBatchNorm2d(c, nn.BatchNormOptions{}, b.opts...)
}

// projection is the option B shortcut: 1×1 convolution with stride, then
// batch norm.
func (b resnetParts) projection(in, out, stride int) *nn.Sequential {
	return nn.NewSequential(b.conv(in, out, 1, stride, 0, 1), b.bn(out))
}

func (b resnetParts) basic(in, planes, stride int, shortcut Shortcut) *BasicBlock {
	blk := &BasicBlock{
		Conv1: b.conv(in, planes, 3, stride, 1, 1), BN1: b.bn(planes),
		Conv2: b.conv(planes, planes, 3, 1, 1, 1), BN2: b.bn(planes),
	}
	blk.RegisterModule("conv1", blk.Conv1)
	blk.RegisterModule("bn1", blk.BN1)
	blk.RegisterModule("relu", nn.NewReLU())
	blk.RegisterModule("conv2", blk.Conv2)
	blk.RegisterModule("bn2", blk.BN2)
	if stride != 1 || in != planes {
		if shortcut == ShortcutZeroPad {
			before := (planes - in) / 2
			if before < 0 {
				panic(fmt.Sprintf("models: zero-padding shortcut from %d to %d channels: it can only add channels", in, planes))
			}
			blk.Downsample = &ZeroPadShortcut{Stride: stride, Before: before, After: planes - in - before}
		} else {
			blk.Downsample = b.projection(in, planes, stride)
		}
		blk.RegisterModule("downsample", blk.Downsample)
	}
	return blk
}

func (b resnetParts) bottleneck(in, planes, stride int) *Bottleneck {
	width := planes * b.width / 64 * b.groups
	blk := &Bottleneck{
		Conv1: b.conv(in, width, 1, 1, 0, 1), BN1: b.bn(width),
		Conv2: b.conv(width, width, 3, stride, 1, b.groups), BN2: b.bn(width),
		Conv3: b.conv(width, 4*planes, 1, 1, 0, 1), BN3: b.bn(4 * planes),
	}
	blk.RegisterModule("conv1", blk.Conv1)
	blk.RegisterModule("bn1", blk.BN1)
	blk.RegisterModule("conv2", blk.Conv2)
	blk.RegisterModule("bn2", blk.BN2)
	blk.RegisterModule("conv3", blk.Conv3)
	blk.RegisterModule("bn3", blk.BN3)
	blk.RegisterModule("relu", nn.NewReLU())
	if stride != 1 || in != 4*planes {
		blk.Downsample = b.projection(in, 4*planes, stride)
		blk.RegisterModule("downsample", blk.Downsample)
	}
	return blk
}

// resnetOr returns v, or def when v is 0.
func resnetOr(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}
