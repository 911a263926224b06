package models_test

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/internal/golden"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/nn/models"
	"github.com/flockml/flock/tensor"
)

// The reference is testdata/golden/models_resnet.safetensors, written by
// testdata/golden/gen_resnet.py from torchvision 0.14 (and, for the CIFAR
// family, the PyTorch definition in that script); its docstring describes
// the contents.
const resnetGoldenFile = "models_resnet.safetensors"

// resnetArch is an "arch.<name>" entry of the golden file.
type resnetArch struct {
	Family        string `json:"family"`
	Depth         int    `json:"depth"`
	Classes       int    `json:"classes"`
	InChannels    int    `json:"in_channels"`
	SmallStem     bool   `json:"small_stem"`
	Groups        int    `json:"groups"`
	WidthPerGroup int    `json:"width_per_group"`
	Shortcut      string `json:"shortcut"`
	Params        int    `json:"params"`
	keys          []string
	shapes        []tensor.Shape
}

func (a *resnetArch) UnmarshalJSON(b []byte) error {
	type plain resnetArch
	var p struct {
		plain
		Keys [][2]json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*a = resnetArch(p.plain)
	for _, kv := range p.Keys {
		var k string
		var s []int
		if err := json.Unmarshal(kv[0], &k); err != nil {
			return err
		}
		if err := json.Unmarshal(kv[1], &s); err != nil {
			return err
		}
		a.keys = append(a.keys, k)
		a.shapes = append(a.shapes, tensor.Shape(s))
	}
	return nil
}

// build makes the network the entry describes with flock's constructors.
func (a *resnetArch) build(t testing.TB, g *tensor.Generator, opts ...tensor.Option) *models.ResNet {
	t.Helper()
	var m *models.ResNet
	var err error
	switch a.Family {
	case "torchvision":
		m, err = models.NewResNet(models.ResNetOptions{
			Depth: a.Depth, NumClasses: a.Classes, InChannels: a.InChannels, SmallStem: a.SmallStem,
			Groups: a.Groups, WidthPerGroup: a.WidthPerGroup,
		}, g, opts...)
	case "cifar":
		sc := models.ShortcutZeroPad
		if a.Shortcut == "B" {
			sc = models.ShortcutProjection
		}
		m, err = models.NewCIFARResNet(a.Depth, models.CIFARResNetOptions{NumClasses: a.Classes, InChannels: a.InChannels, Shortcut: sc}, g, opts...)
	default:
		t.Fatalf("unknown family %q", a.Family)
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// resnetArchs returns the golden file's architectures by name.
func resnetArchs(t testing.TB, f *golden.File) map[string]*resnetArch {
	t.Helper()
	out := map[string]*resnetArch{}
	for k, v := range f.F.Metadata {
		if name, ok := strings.CutPrefix(k, "arch."); ok {
			a := &resnetArch{}
			if err := json.Unmarshal([]byte(v), a); err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			out[name] = a
		}
	}
	if len(out) == 0 {
		t.Fatal("no architectures in the golden file")
	}
	return out
}

// checkResNetKeys compares m's state-dict keys, in order, and shapes with a's.
func checkResNetKeys(t *testing.T, m nn.Module, a *resnetArch) {
	t.Helper()
	sd := nn.StateDict(m)
	defer nn.ReleaseAll(sd)
	keys := nn.StateKeys(m)
	if !slices.Equal(keys, a.keys) {
		for i := range min(len(keys), len(a.keys)) {
			if keys[i] != a.keys[i] {
				t.Errorf("state-dict key %d is %q, torch has %q", i, keys[i], a.keys[i])
				break
			}
		}
		t.Errorf("%d state-dict keys, torch has %d", len(keys), len(a.keys))
		return
	}
	for i, k := range keys {
		if !sd[k].Shape().Equal(a.shapes[i]) {
			t.Errorf("%s: shape %v, torch has %v", k, sd[k].Shape(), a.shapes[i])
		}
	}
}

// resnetLargeModel is the parameter count above which building a network is left
// to the long test run (each takes a second or more).
const resnetLargeModel = 30_000_000

// The parameter counts of torchvision's networks at 1000 classes and 3
// input channels, and of the CIFAR ResNet-20 at 10 classes (option A:
// zero-padding shortcuts, option B: projections).
var torchParamCounts = map[string]int{
	"resnet18":            11_689_512,
	"resnet34":            21_797_672,
	"resnet50":            25_557_032,
	"resnet101":           44_549_160,
	"resnet152":           60_192_808,
	"wide_resnet50_2":     68_883_240,
	"resnext50_32x4d":     25_028_904,
	"resnet18_small_stem": 11_173_962,
	"resnet20":            269_722,
	"resnet20_b":          272_474,
}

func TestResNetArchitectures(t *testing.T) {
	f := golden.Open(t, resnetGoldenFile)
	archs := resnetArchs(t, f)
	for name := range torchParamCounts {
		if archs[name] == nil {
			t.Errorf("the golden file lacks %s", name)
		}
	}
	names := make([]string, 0, len(archs))
	for n := range archs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		a := archs[name]
		t.Run(name, func(t *testing.T) {
			if want, ok := torchParamCounts[name]; ok && a.Params != want {
				t.Errorf("the generator counts %d parameters, torchvision has %d", a.Params, want)
			}
			if testing.Short() && a.Params > resnetLargeModel {
				t.Skipf("%d parameters: long test only", a.Params)
			}
			m := a.build(t, tensor.NewGenerator(1))
			defer m.Release()
			if got := nn.NumParameters(m); got != a.Params {
				t.Errorf("%d parameters, torch has %d", got, a.Params)
			}
			checkResNetKeys(t, m, a)
		})
	}
}

// The registry picks the stem from the image size and the classes and
// channels from the config.
func TestResNetRegistry(t *testing.T) {
	f := golden.Open(t, resnetGoldenFile)
	archs := resnetArchs(t, f)
	imagenet := models.Config{InChannels: 3, Height: 224, Width: 224, NumClasses: 1000}
	cifar := models.Config{InChannels: 3, Height: 32, Width: 32, NumClasses: 10}
	for _, c := range []struct {
		model, arch string
		cfg         models.Config
	}{
		{"resnet18", "resnet18", imagenet},
		{"resnet18", "resnet18", models.Config{InChannels: 3, Height: 65, Width: 300, NumClasses: 1000}},
		{"resnet34", "resnet34", imagenet},
		{"resnet50", "resnet50", imagenet},
		{"resnet101", "resnet101", imagenet},
		{"resnet152", "resnet152", imagenet},
		{"wide_resnet50_2", "wide_resnet50_2", imagenet},
		{"resnet18", "resnet18_small_stem", cifar},
		{"resnet18", "resnet18_small_stem", models.Config{InChannels: 3, Height: 64, Width: 100, NumClasses: 10}},
		{"resnet18", "resnet18_small_stem_gray", models.FashionMNIST},
		{"resnet50", "resnet50_gray", models.Config{InChannels: 1, Height: 96, Width: 96, NumClasses: 7}},
		{"resnet20", "resnet20", cifar},
		{"resnet32", "resnet32", cifar},
		{"resnet44", "resnet44", cifar},
		{"resnet56", "resnet56", cifar},
		{"resnet110", "resnet110", cifar},
	} {
		t.Run(fmt.Sprintf("%s/%dx%dx%d/%d", c.model, c.cfg.InChannels, c.cfg.Height, c.cfg.Width, c.cfg.NumClasses), func(t *testing.T) {
			a := archs[c.arch]
			if a == nil {
				t.Fatalf("no arch %s in the golden file", c.arch)
			}
			if testing.Short() && a.Params > resnetLargeModel {
				t.Skipf("%d parameters: long test only", a.Params)
			}
			m, err := models.Build(c.model, c.cfg, tensor.NewGenerator(1))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Release()
			if got := nn.NumParameters(m); got != a.Params {
				t.Errorf("%d parameters, want %d", got, a.Params)
			}
			checkResNetKeys(t, m, a)
		})
	}
	for _, name := range []string{"resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "wide_resnet50_2", "resnet20", "resnet32", "resnet44", "resnet56", "resnet110"} {
		if models.Describe(name) == "" {
			t.Errorf("%s is not registered", name)
		}
	}
}

// TestRegistryResNetOptions builds registered ResNets with the options of
// Config: a chosen stem whatever the image size, ResNeXt's groups and
// width, zero-initialised residuals; models without an option refuse it.
func TestRegistryResNetOptions(t *testing.T) {
	t.Parallel()
	small := models.Config{InChannels: 3, Height: 32, Width: 32, NumClasses: 10}
	large := models.Config{InChannels: 3, Height: 224, Width: 224, NumClasses: 10}
	with := func(c models.Config, edit func(*models.Config)) models.Config {
		edit(&c)
		return c
	}
	for _, c := range []struct {
		name, model string
		cfg         models.Config
		kernel      int  // of conv1
		maxPool     bool // torchvision's stem
	}{
		{"auto small", "resnet18", small, 3, false},
		{"auto large", "resnet18", large, 7, true},
		{"imagenet small", "resnet18", with(small, func(c *models.Config) { c.Stem = models.StemImageNet }), 7, true},
		{"cifar large", "resnet18", with(large, func(c *models.Config) { c.Stem = models.StemCIFAR }), 3, false},
		{"cifar resnet20", "resnet20", with(small, func(c *models.Config) { c.Stem = models.StemCIFAR }), 3, false},
	} {
		m, err := models.Build(c.model, c.cfg, tensor.NewGenerator(1))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		r := m.(*models.ResNet)
		if k := r.Conv1.Weight.Shape()[3]; k != c.kernel || (r.MaxPool != nil) != c.maxPool {
			t.Errorf("%s: conv1 %d×%d, max-pool %v; want %d×%d, %v", c.name, k, k, r.MaxPool != nil, c.kernel, c.kernel, c.maxPool)
		}
		m.Release()
	}

	// ResNeXt-50 32×4d: torchvision's resnext50_32x4d has 25,028,904
	// parameters at 1000 classes.
	m, err := models.Build("resnet50", models.Config{InChannels: 3, Height: 224, Width: 224, NumClasses: 1000, Groups: 32, WidthPerGroup: 4}, tensor.NewGenerator(1))
	if err != nil {
		t.Fatal(err)
	}
	if n := nn.NumParameters(m); n != 25_028_904 {
		t.Errorf("resnet50 with 32 groups of width 4: %d parameters, want ResNeXt-50 32×4d's 25,028,904", n)
	}
	m.Release()

	for _, name := range []string{"resnet18", "resnet20"} {
		m, err := models.Build(name, with(small, func(c *models.Config) { c.ZeroInitResidual = true }), tensor.NewGenerator(1))
		if err != nil {
			t.Fatal(err)
		}
		sd := nn.StateDict(m)
		if w := sd["layer1.0.bn2.weight"].Float64s(); slices.ContainsFunc(w, func(v float64) bool { return v != 0 }) {
			t.Errorf("%s with ZeroInitResidual: layer1.0.bn2.weight is %v, want zeros", name, w)
		}
		if w := sd["bn1.weight"].Float64s(); slices.ContainsFunc(w, func(v float64) bool { return v != 1 }) {
			t.Errorf("%s with ZeroInitResidual: the stem's bn1.weight is %v, want ones", name, w)
		}
		nn.ReleaseAll(sd)
		m.Release()
	}

	for _, c := range []struct {
		model string
		cfg   models.Config
		want  string
	}{
		{"resnet20", with(small, func(c *models.Config) { c.Stem = models.StemImageNet }), "resnet20 does not take the option stem imagenet"},
		{"resnet18", with(small, func(c *models.Config) { c.Groups = 32 }), "resnet18 does not take the option groups 32"},
		{"resnet20", with(small, func(c *models.Config) { c.WidthPerGroup = 4 }), "width per group 4"},
		{"mlp", with(small, func(c *models.Config) { c.ZeroInitResidual = true }), "mlp does not take the option zero-init residual"},
		{"vit_tiny_p4", with(small, func(c *models.Config) { c.Stem = models.StemCIFAR }), "vit_tiny_p4 does not take the option stem cifar"},
		{"resnet18", with(small, func(c *models.Config) { c.Stem = 7 }), "unknown stem 7"},
	} {
		if _, err := models.Build(c.model, c.cfg, tensor.NewGenerator(1)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s with %+v: error %v, want one containing %q", c.model, c.cfg, err, c.want)
		}
	}

	for _, s := range []models.Stem{models.StemAuto, models.StemImageNet, models.StemCIFAR} {
		if got, err := models.ParseStem(s.String()); err != nil || got != s {
			t.Errorf("ParseStem(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := models.ParseStem("resnet"); err == nil || !strings.Contains(err.Error(), "want auto, imagenet, cifar") {
		t.Errorf("ParseStem(resnet): %v", err)
	}
}

func TestResNetOptionErrors(t *testing.T) {
	g := tensor.NewGenerator(1)
	for _, opt := range []models.ResNetOptions{
		{Depth: 20},
		{Depth: 0},
		{Depth: 18, Groups: 2},
		{Depth: 34, WidthPerGroup: 128},
		{Depth: 50, NumClasses: -1},
	} {
		if m, err := models.NewResNet(opt, g); err == nil {
			m.Release()
			t.Errorf("NewResNet(%+v) succeeded", opt)
		}
	}
	for _, depth := range []int{0, 2, 18, 21, 22} {
		if m, err := models.NewCIFARResNet(depth, models.CIFARResNetOptions{}, g); err == nil {
			m.Release()
			t.Errorf("NewCIFARResNet(%d) succeeded", depth)
		}
	}
	if m, err := models.NewCIFARResNet(20, models.CIFARResNetOptions{Shortcut: 7}, g); err == nil {
		m.Release()
		t.Error("NewCIFARResNet with shortcut 7 succeeded")
	}
	if _, err := models.Build("resnet50", models.Config{InChannels: 3, Height: 0, Width: 32, NumClasses: 10}, g); err == nil {
		t.Error("resnet50 built for 0×32 images")
	}
}

// resnetMoments returns the mean and standard deviation of t's elements.
func resnetMoments(t *tensor.Tensor) (mean, std float64) {
	v := t.Float64s()
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	for _, x := range v {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(v)))
}

// The initialisation is torchvision's: convolutions from N(0, 2/fan_out),
// batch norm γ = 1 (0 for the last of each block with ZeroInitResidual),
// β = 0, and fc from U(±1/√fan_in).
func TestResNetInit(t *testing.T) {
	for _, c := range []struct {
		name    string
		build   func(*tensor.Generator) (*models.ResNet, error)
		zeroed  string // the suffix of the batch norms zeroed by ZeroInitResidual
		fanOut  map[string]int
		fcIn    int
		zeroRes bool
	}{
		{"resnet18", func(g *tensor.Generator) (*models.ResNet, error) {
			return models.NewResNet(models.ResNetOptions{Depth: 18}, g)
		}, "", map[string]int{"layer4.1.conv2.weight": 512 * 9, "conv1.weight": 64 * 49}, 512, false},
		{"resnet50_narrow_zero", func(g *tensor.Generator) (*models.ResNet, error) {
			return models.NewResNet(models.ResNetOptions{Depth: 50, NumClasses: 10, SmallStem: true, ZeroInitResidual: true, WidthPerGroup: 16}, g)
		}, ".bn3.weight", map[string]int{"layer3.5.conv3.weight": 1024, "layer4.0.conv2.weight": 128 * 9}, 2048, true},
		{"resnet20_zero", func(g *tensor.Generator) (*models.ResNet, error) {
			return models.NewCIFARResNet(20, models.CIFARResNetOptions{ZeroInitResidual: true}, g)
		}, ".bn2.weight", map[string]int{"layer3.2.conv1.weight": 64 * 9}, 64, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := c.build(tensor.NewGenerator(3))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Release()
			sd := nn.StateDict(m)
			defer nn.ReleaseAll(sd)
			zeroed := 0
			for k, v := range sd {
				vals := v.Float64s()
				switch {
				case strings.HasSuffix(k, "bias") && k != "fc.bias", strings.HasSuffix(k, "running_mean"), strings.HasSuffix(k, "num_batches_tracked"):
					for _, x := range vals {
						if x != 0 {
							t.Fatalf("%s has %v, want 0", k, x)
						}
					}
				case strings.HasSuffix(k, "running_var"), v.Dim() == 1 && strings.HasSuffix(k, "weight") && k != "fc.weight":
					want := 1.0
					if c.zeroRes && strings.HasSuffix(k, c.zeroed) && strings.HasPrefix(k, "layer") {
						want = 0
						zeroed++
					}
					for _, x := range vals {
						if x != want {
							t.Fatalf("%s has %v, want %v", k, x, want)
						}
					}
				}
			}
			if c.zeroRes && zeroed == 0 {
				t.Errorf("no %s was zeroed", c.zeroed)
			}
			for k, fan := range c.fanOut {
				mean, std := resnetMoments(sd[k])
				n := float64(sd[k].NumElements())
				want := math.Sqrt(2 / float64(fan))
				// Sample moments of n normal draws: the mean within 5σ/√n, the
				// standard deviation within 5σ/√(2n).
				if math.Abs(mean) > 5*want/math.Sqrt(n) || math.Abs(std-want) > 5*want/math.Sqrt(2*n) {
					t.Errorf("%s: mean %.4g, std %.4g; want 0 and %.4g", k, mean, std, want)
				}
			}
			bound := 1 / math.Sqrt(float64(c.fcIn))
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, x := range sd["fc.weight"].Float64s() {
				lo, hi = min(lo, x), max(hi, x)
			}
			if lo < -bound || hi > bound || hi-lo < bound {
				t.Errorf("fc.weight spans [%.4g, %.4g]; want U(±%.4g)", lo, hi, bound)
			}
		})
	}
}

// resnetCase is a "case.<name>" entry of the golden file.
type resnetCase struct {
	Arch       string  `json:"arch"`
	Batch      int     `json:"batch"`
	Height     int     `json:"height"`
	Width      int     `json:"width"`
	WeightSeed uint64  `json:"weight_seed"`
	DotSeed    uint64  `json:"dot_seed"`
	InputSeed  uint64  `json:"input_seed"`
	Labels     []int64 `json:"labels"`
	Samples    int     `json:"samples"`
	TorchF32   struct {
		LogitsEval  float64 `json:"logits_eval"`
		LogitsTrain float64 `json:"logits_train"`
		Loss        float64 `json:"loss"`
	} `json:"torch_f32_err"`
}

// resnetHashState returns the state dict that gen_resnet.py's hash_init sets:
// the k-th entry from HashUniform(seed + k, numel), scaled by its kind.
func resnetHashState(a *resnetArch, seed uint64, dt tensor.DType) map[string]*tensor.Tensor {
	sd := make(map[string]*tensor.Tensor, len(a.keys))
	for k, key := range a.keys {
		shape := a.shapes[k]
		if strings.HasSuffix(key, "num_batches_tracked") {
			sd[key] = tensor.FromSlice([]int64{0}, shape)
			continue
		}
		u := golden.HashUniform(seed+uint64(k), shape.NumElements())
		leaf := key[strings.LastIndexByte(key, '.')+1:]
		for i, x := range u {
			switch {
			case len(shape) == 4:
				u[i] = x * math.Sqrt2 * math.Sqrt(3/float64(shape[1]*shape[2]*shape[3]))
			case len(shape) == 2:
				u[i] = x * math.Sqrt(3/float64(shape[1]))
			case leaf == "running_mean":
				u[i] = 0.1 * x
			case leaf == "running_var":
				u[i] = 1 + 0.5*math.Abs(x)
			case leaf == "weight":
				u[i] = 1 + 0.1*x
			case leaf == "bias":
				u[i] = 0.1 * x
			default:
				panic("no hash rule for " + key)
			}
		}
		t := tensor.FromSlice(u, shape)
		sd[key] = t.Cast(dt)
		t.Release()
	}
	return sd
}

// resnetWorst tracks the largest relative error of a check and where it was.
type resnetWorst struct {
	err float64
	at  string
}

func (w *resnetWorst) add(err float64, at string) {
	if err > w.err || math.IsNaN(err) {
		w.err, w.at = err, at
	}
}

// resnetRelErr is |got − want|/scale, 0 when both are 0.
func resnetRelErr(got, want, scale float64) float64 {
	d := math.Abs(got - want)
	if d == 0 {
		return 0
	}
	return d / scale
}

// resnetMaxRelErr is max|got − want| / max|want|, with a shape check.
func resnetMaxRelErr(t *testing.T, name string, got *tensor.Tensor, f *golden.File, key string) float64 {
	t.Helper()
	want, shape := f.Want(t, key)
	if !got.Shape().Equal(shape) {
		t.Fatalf("%s: shape %v, want %v", name, got.Shape(), shape)
	}
	scale := 0.0
	for _, w := range want {
		scale = max(scale, math.Abs(w))
	}
	e := 0.0
	for i, v := range got.Float64s() {
		e = max(e, resnetRelErr(v, want[i], scale))
		if math.IsNaN(v) {
			return math.NaN()
		}
	}
	return e
}

// resnetRun is one pass of a golden case: evaluation logits, then a
// training step's logits, loss and gradients.
type resnetRun struct {
	m                  *models.ResNet
	evalLogits, logits *tensor.Tensor
	loss               float64
}

func runResNetCase(t *testing.T, a *resnetArch, c *resnetCase, dt tensor.DType) *resnetRun {
	t.Helper()
	r := &resnetRun{}
	r.m = a.build(t, tensor.NewGenerator(0), tensor.Of(dt))
	t.Cleanup(r.m.Release)
	sd := resnetHashState(a, c.WeightSeed, dt)
	err := nn.LoadStateDict(r.m, sd, true)
	nn.ReleaseAll(sd)
	if err != nil {
		t.Fatal(err)
	}
	n := c.Batch * a.InChannels * c.Height * c.Width
	x64 := tensor.FromSlice(golden.HashUniform(c.InputSeed, n), tensor.Shape{c.Batch, a.InChannels, c.Height, c.Width})
	x := autograd.Const(x64.Cast(dt))
	x64.Release()
	defer x.Release()
	labels := tensor.FromSlice(c.Labels, tensor.Shape{len(c.Labels)})
	defer labels.Release()

	nn.Eval(r.m)
	autograd.NoGrad(func() {
		y := r.m.Forward(x)
		r.evalLogits = y.Value.Retain()
		y.Release()
	})
	t.Cleanup(r.evalLogits.Release)

	nn.Train(r.m)
	y := r.m.Forward(x)
	loss := nn.CrossEntropyLoss{}.Forward(y, labels)
	loss.Backward()
	r.logits = y.Value.Retain()
	t.Cleanup(r.logits.Release)
	r.loss = loss.Value.Item()
	y.Release()
	loss.Release()
	return r
}

// Bounds on the errors of flock against PyTorch. In float64 both compute
// the same sums in different orders, so they agree to about 1e-12; the
// bounds leave room for that and no more than rounding. Errors are
// relative to the largest logit, the loss, and, for a gradient's
// statistics, to the magnitude each is built from (Σ|g| for the sum,
// Σ|g·u| for the dot product, ‖g‖₂ for the norm, max|g| for sampled
// elements). In float32 the logits are compared with the float64
// reference; PyTorch's own float32 run is off by up to 7e-5 of the largest
// logit in training mode (batch norm over 8 values at ResNet-50's last
// stage amplifies rounding), so the float32 bound is 1e-3.
const (
	resnetTolLogits64  = 1e-9
	resnetTolGrad64    = 1e-8
	resnetTolRunning64 = 1e-10
	resnetTolLogits32  = 1e-3
	resnetTolLoss32    = 1e-4
)

func TestResNetGolden(t *testing.T) {
	f := golden.Open(t, resnetGoldenFile)
	archs := resnetArchs(t, f)
	for _, name := range f.Cases(t) {
		var c resnetCase
		f.Params(t, name, &c)
		a := archs[c.Arch]
		if a == nil {
			t.Fatalf("case %s: no arch %s", name, c.Arch)
		}
		t.Run(name+"/f64", func(t *testing.T) { checkResNetF64(t, f, name, a, &c) })
		t.Run(name+"/f32", func(t *testing.T) { checkResNetF32(t, f, name, a, &c) })
	}
}

func checkResNetF64(t *testing.T, f *golden.File, name string, a *resnetArch, c *resnetCase) {
	r := runResNetCase(t, a, c, tensor.Float64)
	p := name + ".f64."
	var wl, wg, wr resnetWorst
	wl.add(resnetMaxRelErr(t, "eval logits", r.evalLogits, f, p+"logits_eval"), "logits_eval")
	wl.add(resnetMaxRelErr(t, "train logits", r.logits, f, p+"logits_train"), "logits_train")
	want, _ := f.Want(t, p+"loss")
	wl.add(resnetRelErr(r.loss, want[0], math.Abs(want[0])), "loss")
	if wl.err > resnetTolLogits64 || math.IsNaN(wl.err) {
		t.Errorf("%s: relative error %.3g > %g", wl.at, wl.err, resnetTolLogits64)
	}

	index := map[string]int{}
	for k, key := range a.keys {
		index[key] = k
	}
	params := r.m.NamedParameters()
	for _, np := range params {
		want, _ := f.Want(t, p+"grad."+np.Name)
		gt := np.Param.Grad()
		if gt == nil {
			t.Errorf("%s: no gradient", np.Name)
			continue
		}
		g := gt.Float64s()
		u := golden.HashUniform(c.DotSeed+uint64(index[np.Name]), len(g))
		var sum, sq, dot, abs, absDot, maxAbs float64
		for i, v := range g {
			sum += v
			sq += v * v
			dot += v * u[i]
			abs += math.Abs(v)
			absDot += math.Abs(v * u[i])
			maxAbs = max(maxAbs, math.Abs(v))
		}
		norm := math.Sqrt(sq)
		wg.add(resnetRelErr(sum, want[0], abs), np.Name+" sum")
		wg.add(resnetRelErr(norm, want[1], norm), np.Name+" norm")
		wg.add(resnetRelErr(dot, want[2], absDot), np.Name+" dot")
		idx := golden.SampleIndices(len(g), c.Samples)
		if len(want) != 3+len(idx) {
			t.Fatalf("%s: %d statistics, want %d", np.Name, len(want), 3+len(idx))
		}
		for j, i := range idx {
			wg.add(resnetRelErr(g[i], want[3+j], maxAbs), fmt.Sprintf("%s[%d]", np.Name, i))
		}
	}
	if wg.err > resnetTolGrad64 || math.IsNaN(wg.err) {
		t.Errorf("gradient %s: relative error %.3g > %g", wg.at, wg.err, resnetTolGrad64)
	}

	sd := nn.StateDict(r.m)
	defer nn.ReleaseAll(sd)
	buffers := 0
	for _, key := range a.keys {
		switch {
		case strings.HasSuffix(key, "running_mean"), strings.HasSuffix(key, "running_var"):
			want, _ := f.Want(t, p+"state_after."+key)
			for i, v := range sd[key].Float64s() {
				wr.add(resnetRelErr(v, want[i], max(1, math.Abs(want[i]))), key)
			}
			buffers++
		case strings.HasSuffix(key, "num_batches_tracked"):
			if n := sd[key].Int64s()[0]; n != 1 {
				t.Errorf("%s = %d after one training pass, want 1", key, n)
			}
		}
	}
	if buffers == 0 {
		t.Error("no running statistics")
	}
	if wr.err > resnetTolRunning64 || math.IsNaN(wr.err) {
		t.Errorf("running statistics %s: relative error %.3g > %g", wr.at, wr.err, resnetTolRunning64)
	}
	t.Logf("resnetWorst relative errors: logits/loss %.2g (%s), gradients %.2g (%s, %d parameters), running stats %.2g (%s)",
		wl.err, wl.at, wg.err, wg.at, len(params), wr.err, wr.at)
}

func checkResNetF32(t *testing.T, f *golden.File, name string, a *resnetArch, c *resnetCase) {
	r := runResNetCase(t, a, c, tensor.Float32)
	p := name + ".f64."
	eval := resnetMaxRelErr(t, "eval logits", r.evalLogits, f, p+"logits_eval")
	train := resnetMaxRelErr(t, "train logits", r.logits, f, p+"logits_train")
	want, _ := f.Want(t, p+"loss")
	loss := resnetRelErr(r.loss, want[0], math.Abs(want[0]))
	if !(eval <= resnetTolLogits32) || !(train <= resnetTolLogits32) {
		t.Errorf("logits relative error: eval %.3g, train %.3g; want ≤ %g", eval, train, resnetTolLogits32)
	}
	if !(loss <= resnetTolLoss32) {
		t.Errorf("loss relative error %.3g > %g", loss, resnetTolLoss32)
	}
	t.Logf("resnetWorst relative errors: eval logits %.2g, train logits %.2g, loss %.2g (PyTorch float32: %.2g, %.2g, %.2g)",
		eval, train, loss, c.TorchF32.LogitsEval, c.TorchF32.LogitsTrain, c.TorchF32.Loss)
}

// A ResNet saved with nn.Save loads back, key for key, into a fresh one
// and computes the same logits.
func TestResNetSaveLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resnet20.safetensors")
	build := func(seed uint64) *models.ResNet {
		m, err := models.NewCIFARResNet(20, models.CIFARResNetOptions{Shortcut: models.ShortcutProjection}, tensor.NewGenerator(seed))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Release)
		nn.Eval(m)
		return m
	}
	a, b := build(1), build(2)
	if err := nn.Save(path, a); err != nil {
		t.Fatal(err)
	}
	if err := nn.Load(path, b, true); err != nil {
		t.Fatal(err)
	}
	x := autograd.Const(tensor.NewGenerator(9).Uniform(tensor.Shape{2, 3, 16, 16}, -1, 1))
	defer x.Release()
	var ya, yb *autograd.Var
	autograd.NoGrad(func() { ya, yb = a.Forward(x), b.Forward(x) })
	defer ya.Release()
	defer yb.Release()
	if !slices.Equal(ya.Value.Float32s(), yb.Value.Float32s()) {
		t.Error("the loaded network computes different logits")
	}
}

// The option A shortcut subsamples with the stride and pads channels with
// zeros on both sides; its gradient is the output gradient at the kept
// positions and channels.
func TestZeroPadShortcut(t *testing.T) {
	s := &models.ZeroPadShortcut{Stride: 2, Before: 1, After: 2}
	vals := make([]float64, 2*2*3*3)
	for i := range vals {
		vals[i] = float64(i + 1)
	}
	x := autograd.Param(tensor.FromSlice(vals, tensor.Shape{2, 2, 3, 3}))
	defer x.Release()
	y := s.Forward(x)
	defer y.Release()
	if !y.Shape().Equal(tensor.Shape{2, 5, 2, 2}) {
		t.Fatalf("shape %v, want [2 5 2 2]", y.Shape())
	}
	for n := range 2 {
		for c := range 5 {
			for i := range 2 {
				for j := range 2 {
					want := 0.0
					if c >= 1 && c < 3 {
						want = vals[((n*2+c-1)*3+2*i)*3+2*j]
					}
					if got := y.Value.At(n, c, i, j); got != want {
						t.Errorf("y[%d,%d,%d,%d] = %v, want %v", n, c, i, j, got, want)
					}
				}
			}
		}
	}
	err := autograd.Gradcheck(func(xs []*autograd.Var) *autograd.Var {
		return s.Forward(xs[0])
	}, []*tensor.Tensor{tensor.NewGenerator(4).Uniform(tensor.Shape{1, 2, 5, 4}, -1, 1, tensor.Of(tensor.Float64))}, autograd.GradcheckOptions{})
	if err != nil {
		t.Error(err)
	}
}

// Every block's output has the shape the architecture promises, and odd
// sides round up as PyTorch's strided convolutions do.
func TestResNetForwardShapes(t *testing.T) {
	for _, c := range []struct {
		model string
		cfg   models.Config
		batch int
	}{
		{"resnet18", models.Config{InChannels: 3, Height: 72, Width: 65, NumClasses: 5}, 1},
		{"resnet50", models.Config{InChannels: 1, Height: 28, Width: 28, NumClasses: 10}, 2},
		{"resnet20", models.Config{InChannels: 3, Height: 28, Width: 28, NumClasses: 10}, 2},
		{"resnet20", models.Config{InChannels: 1, Height: 7, Width: 9, NumClasses: 3}, 3},
	} {
		t.Run(fmt.Sprintf("%s/%dx%d", c.model, c.cfg.Height, c.cfg.Width), func(t *testing.T) {
			m, err := models.Build(c.model, c.cfg, tensor.NewGenerator(1))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Release()
			x := autograd.Const(tensor.NewGenerator(2).Uniform(tensor.Shape{c.batch, c.cfg.InChannels, c.cfg.Height, c.cfg.Width}, -1, 1))
			defer x.Release()
			var y *autograd.Var
			autograd.NoGrad(func() { y = m.Forward(x) })
			defer y.Release()
			if want := (tensor.Shape{c.batch, c.cfg.NumClasses}); !y.Shape().Equal(want) {
				t.Errorf("output shape %v, want %v", y.Shape(), want)
			}
			for _, v := range y.Value.Float64s() {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("non-finite logit %v", v)
				}
			}
		})
	}
}

func ExampleNewCIFARResNet() {
	m, err := models.NewCIFARResNet(20, models.CIFARResNetOptions{}, tensor.NewGenerator(0))
	if err != nil {
		panic(err)
	}
	defer m.Release()
	fmt.Println(nn.NumParameters(m))
	keys := nn.StateKeys(m)
	fmt.Println(keys[0], keys[1], keys[len(keys)-2], keys[len(keys)-1])
	// Output:
	// 269722
	// conv1.weight bn1.weight fc.weight fc.bias
}

// A training step frees everything it allocates: after a warm-up step the
// CPU backend's buffer pool serves every allocation of further steps, so no
// tensor of the forward or backward pass is left behind.
func TestResNetStepSteadyMemory(t *testing.T) {
	m, err := models.NewCIFARResNet(20, models.CIFARResNetOptions{}, tensor.NewGenerator(1))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()
	x := autograd.Const(tensor.NewGenerator(2).Uniform(tensor.Shape{4, 3, 16, 16}, -1, 1))
	defer x.Release()
	labels := tensor.FromSlice([]int64{0, 3, 5, 9}, tensor.Shape{4})
	defer labels.Release()
	step := func() {
		y := m.Forward(x)
		loss := nn.CrossEntropyLoss{}.Forward(y, labels)
		loss.Backward()
		for _, p := range m.NamedParameters() {
			p.Param.Value.AddScaledInPlace(-0.01, p.Param.Grad())
		}
		nn.ZeroGrad(m)
		y.Release()
		loss.Release()
	}
	step()
	step()
	_, before, _ := cpu.Default().PoolStats()
	for range 3 {
		step()
	}
	if _, after, _ := cpu.Default().PoolStats(); after != before {
		t.Errorf("the buffer pool allocated %d new buffers in 3 steady-state steps", after-before)
	}
}
