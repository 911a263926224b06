package models_test

import (
	"encoding/json"
	"fmt"
	"math"
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

// vitGoldenCase is the configuration of a case of
// testdata/golden/models_vit.safetensors (gen_vit.py).
type vitGoldenCase struct {
	ImageSize     int     `json:"image_size"`
	PatchSize     int     `json:"patch_size"`
	NumLayers     int     `json:"num_layers"`
	NumHeads      int     `json:"num_heads"`
	HiddenDim     int     `json:"hidden_dim"`
	MLPDim        int     `json:"mlp_dim"`
	NumClasses    int     `json:"num_classes"`
	InChannels    int     `json:"in_channels"`
	Batch         int     `json:"batch"`
	WeightSeed    uint64  `json:"weight_seed"`
	InputSeed     uint64  `json:"input_seed"`
	Labels        []int64 `json:"labels"`
	NumParameters int     `json:"num_parameters"`
	GlobalPool    string  `json:"global_pool"`
}

func (c vitGoldenCase) config() models.ViTConfig {
	return models.ViTConfig{
		ImageSize: c.ImageSize, PatchSize: c.PatchSize, InChannels: c.InChannels, NumClasses: c.NumClasses,
		Dim: c.HiddenDim, Depth: c.NumLayers, Heads: c.NumHeads,
		MLPDim: c.MLPDim, GlobalPool: c.GlobalPool,
	}
}

type tvEntry struct {
	name  string
	shape tensor.Shape
}

// torchvisionViTKeys lists the state dict of torchvision's
// VisionTransformer for c in state_dict order: the module's own parameter
// (class_token), then conv_proj, encoder (pos_embedding, layers, ln) and
// heads.
func torchvisionViTKeys(c vitGoldenCase) []tvEntry {
	d, m, n := c.HiddenDim, c.MLPDim, (c.ImageSize/c.PatchSize)*(c.ImageSize/c.PatchSize)
	es := []tvEntry{
		{"class_token", tensor.Shape{1, 1, d}},
		{"conv_proj.weight", tensor.Shape{d, c.InChannels, c.PatchSize, c.PatchSize}},
		{"conv_proj.bias", tensor.Shape{d}},
		{"encoder.pos_embedding", tensor.Shape{1, 1 + n, d}},
	}
	for i := range c.NumLayers {
		p := fmt.Sprintf("encoder.layers.encoder_layer_%d.", i)
		es = append(es,
			tvEntry{p + "ln_1.weight", tensor.Shape{d}},
			tvEntry{p + "ln_1.bias", tensor.Shape{d}},
			tvEntry{p + "self_attention.in_proj_weight", tensor.Shape{3 * d, d}},
			tvEntry{p + "self_attention.in_proj_bias", tensor.Shape{3 * d}},
			tvEntry{p + "self_attention.out_proj.weight", tensor.Shape{d, d}},
			tvEntry{p + "self_attention.out_proj.bias", tensor.Shape{d}},
			tvEntry{p + "ln_2.weight", tensor.Shape{d}},
			tvEntry{p + "ln_2.bias", tensor.Shape{d}},
			tvEntry{p + "mlp.0.weight", tensor.Shape{m, d}},
			tvEntry{p + "mlp.0.bias", tensor.Shape{m}},
			tvEntry{p + "mlp.3.weight", tensor.Shape{d, m}},
			tvEntry{p + "mlp.3.bias", tensor.Shape{d}},
		)
	}
	return append(es,
		tvEntry{"encoder.ln.weight", tensor.Shape{d}},
		tvEntry{"encoder.ln.bias", tensor.Shape{d}},
		tvEntry{"heads.head.weight", tensor.Shape{c.NumClasses, d}},
		tvEntry{"heads.head.bias", tensor.Shape{c.NumClasses}},
	)
}

// hashInitRule is gen_vit.py's init_rule: a weight is shift + scale·u for
// u = HashUniform.
func hashInitRule(name string, shape tensor.Shape) (shift, scale float64) {
	switch {
	case name == "class_token" || name == "encoder.pos_embedding":
		return 0, 0.5
	case strings.HasSuffix(name, "weight") && len(shape) >= 2:
		return 0, 1 / math.Sqrt(float64(shape[1:].NumElements()))
	case strings.HasSuffix(name, "weight"):
		return 1, 0.5
	}
	return 0, 0.2
}

// torchvisionWeights rebuilds the case's torchvision state dict (float64)
// and checks it against the key list the generator recorded.
func torchvisionWeights(t *testing.T, g *golden.File, name string, c vitGoldenCase) map[string]*tensor.Tensor {
	t.Helper()
	var recorded []struct {
		Name         string
		Shape        []int
		Shift, Scale float64
	}
	var raw [][]json.RawMessage
	if err := json.Unmarshal([]byte(g.F.Metadata["keys."+name]), &raw); err != nil {
		t.Fatal(err)
	}
	for _, r := range raw {
		var e struct {
			Name         string
			Shape        []int
			Shift, Scale float64
		}
		for i, dst := range []any{&e.Name, &e.Shape, &e.Shift, &e.Scale} {
			if err := json.Unmarshal(r[i], dst); err != nil {
				t.Fatal(err)
			}
		}
		recorded = append(recorded, e)
	}
	entries := torchvisionViTKeys(c)
	if len(entries) != len(recorded) {
		t.Fatalf("%d torchvision keys, the generator recorded %d", len(entries), len(recorded))
	}
	sd := map[string]*tensor.Tensor{}
	t.Cleanup(func() { nn.ReleaseAll(sd) })
	for k, e := range entries {
		r := recorded[k]
		shift, scale := hashInitRule(e.name, e.shape)
		if r.Name != e.name || !e.shape.Equal(tensor.Shape(r.Shape)) || r.Shift != shift || math.Abs(r.Scale-scale) > 1e-15 {
			t.Fatalf("key %d: %s %v (%v, %v); the generator recorded %s %v (%v, %v)", k, e.name, e.shape, shift, scale, r.Name, r.Shape, r.Shift, r.Scale)
		}
		u := golden.HashUniform(c.WeightSeed+uint64(k), e.shape.NumElements())
		for i := range u {
			u[i] = shift + scale*u[i]
		}
		sd[e.name] = tensor.FromSlice(u, e.shape)
	}
	return sd
}

// errStats returns the largest |got − want| divided by max|want| (the
// tensor's scale), and the largest relative error |got − want|/|want| over
// the elements with |want| ≥ 1% of the scale.
func errStats(got *tensor.Tensor, want []float64) (scaled, rel float64) {
	scale := 0.0
	for _, w := range want {
		scale = max(scale, math.Abs(w))
	}
	for i, v := range got.Float64s() {
		d := math.Abs(v - want[i])
		scaled = max(scaled, d/scale)
		if math.Abs(want[i]) >= 0.01*scale {
			rel = max(rel, d/math.Abs(want[i]))
		}
	}
	return scaled, rel
}

// The torchvision model of gen_vit.py, converted with ConvertTorchvisionViT,
// must give the same logits, loss and parameter gradients. Tolerances are on
// |got − want|/max|want| per tensor: float64 within 1e-9 (the two
// implementations sum in different orders; the errors seen are about
// 1e-15), float32 within 1e-5 (the float32 runs of the two differ by up to
// about 7e-7 of the scale).
func TestViTTorchvisionParity(t *testing.T) {
	g := golden.Open(t, "models_vit.safetensors")
	tol := map[string]float64{"f64": 1e-9, "f32": 1e-5}
	for _, name := range g.Cases(t) {
		var c vitGoldenCase
		g.Params(t, name, &c)
		tv := torchvisionWeights(t, g, name, c)
		sd, err := models.ConvertTorchvisionViT(tv)
		if err != nil {
			t.Fatal(err)
		}
		defer nn.ReleaseAll(sd)
		if c.GlobalPool == "avg" {
			// timm's avg pooling normalises after pooling, as fc_norm.
			for _, p := range []string{"weight", "bias"} {
				sd["fc_norm."+p] = sd["norm."+p]
				delete(sd, "norm."+p)
			}
		}
		for _, d := range golden.DTypes {
			t.Run(name+"/"+d.Tag, func(t *testing.T) {
				m, err := models.NewViT(c.config(), tensor.NewGenerator(1), tensor.Of(d.DT))
				if err != nil {
					t.Fatal(err)
				}
				defer m.Release()
				if got := nn.NumParameters(m); got != c.NumParameters {
					t.Errorf("%d parameters, torchvision has %d", got, c.NumParameters)
				}
				if err := nn.LoadStateDict(m, sd, true); err != nil {
					t.Fatal(err)
				}
				nn.Eval(m)
				n := c.Batch * c.InChannels * c.ImageSize * c.ImageSize
				x := autograd.Const(tensor.FromSlice(golden.HashUniform(c.InputSeed, n),
					tensor.Shape{c.Batch, c.InChannels, c.ImageSize, c.ImageSize}, tensor.Of(d.DT)))
				defer x.Release()
				labels := tensor.FromSlice(c.Labels, nil)
				defer labels.Release()
				logits := m.Forward(x)
				defer logits.Release()
				loss := autograd.CrossEntropy(logits, labels, autograd.CrossEntropyOptions{})
				defer loss.Release()
				loss.Backward()

				var worstScaled, worstRel float64
				check := func(what string, got *tensor.Tensor, key string) {
					t.Helper()
					want, shape := g.Want(t, golden.Key(name, d, key))
					if !got.Shape().Equal(shape) {
						t.Errorf("%s: shape %v, want %v", what, got.Shape(), shape)
						return
					}
					scaled, rel := errStats(got, want)
					worstScaled, worstRel = max(worstScaled, scaled), max(worstRel, rel)
					if !(scaled <= tol[d.Tag]) {
						t.Errorf("%s: error %.3g of the scale (relative %.3g), tolerance %g", what, scaled, rel, tol[d.Tag])
					}
				}
				check("logits", logits.Value, "logits")
				check("loss", loss.Value, "loss")
				params := map[string]*autograd.Var{}
				for _, p := range m.NamedParameters() {
					params[p.Name] = p.Param
				}
				for _, e := range torchvisionViTKeys(c) {
					key := golden.Key(name, d, "grad."+e.name)
					if !g.Has(key) {
						continue
					}
					// The converter names the parameter that stands for e.
					one, err := models.ConvertTorchvisionViT(map[string]*tensor.Tensor{e.name: tv[e.name]})
					if err != nil || len(one) != 1 {
						t.Fatalf("%s: %v", e.name, err)
					}
					var timmName string
					for k := range one {
						timmName = k
					}
					nn.ReleaseAll(one)
					p := params[timmName]
					if p == nil || p.Grad() == nil {
						t.Errorf("%s (%s): no gradient", e.name, timmName)
						continue
					}
					check(e.name+" gradient", p.Grad(), "grad."+e.name)
				}
				t.Logf("worst error %.3g of the scale, worst relative error %.3g (elements ≥ 1%% of the scale)", worstScaled, worstRel)
			})
		}
	}
}

// The published parameter counts of timm's and torchvision's models
// (vit_base_patch16_224 has 86,567,656) follow from the configuration;
// models that are cheap to build have exactly as many as the formula says.
func TestViTParameterCounts(t *testing.T) {
	imagenet := models.Config{InChannels: 3, Height: 224, Width: 224, NumClasses: 1000}
	for name, want := range map[string]int{
		"vit_tiny_p16":  5_717_416,
		"vit_small_p16": 22_050_664,
		"vit_base_p16":  86_567_656,
		"vit_base_p32":  88_224_232,
		"vit_large_p16": 304_326_632,
	} {
		c, err := models.NamedViT(name, imagenet)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.NumParameters(); got != want {
			t.Errorf("%s: %d parameters, want %d", name, got, want)
		}
	}

	small := []models.ViTConfig{
		{ImageSize: 8, PatchSize: 4, InChannels: 1, NumClasses: 3, Dim: 8, Depth: 2, Heads: 2},
		{ImageSize: 12, PatchSize: 3, InChannels: 3, NumClasses: 5, Dim: 12, Depth: 1, Heads: 3, MLPRatio: 2.5, GlobalPool: "avg"},
		{ImageSize: 8, PatchSize: 2, InChannels: 2, NumClasses: 4, Dim: 6, Depth: 3, Heads: 1, GlobalPool: "avg", NoClassToken: true},
	}
	for _, c := range small {
		m, err := models.NewViT(c, tensor.NewGenerator(3))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := nn.NumParameters(m), c.NumParameters(); got != want {
			t.Errorf("%+v: built %d parameters, formula %d", c, got, want)
		}
		m.Release()
	}
	if testing.Short() {
		return
	}
	m, err := models.Build("vit_tiny_p16", imagenet, tensor.NewGenerator(0))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()
	if got := nn.NumParameters(m); got != 5_717_416 {
		t.Errorf("vit_tiny_p16 built with %d parameters, want 5717416", got)
	}
}

// vitStateKeys is the state dict of timm's VisionTransformer for c in
// timm's order: own parameters (cls_token, pos_embed), then patch_embed,
// blocks, norm or fc_norm, head.
func vitStateKeys(c models.ViTConfig) []tvEntry {
	d, m, n := c.Dim, c.MLPHidden(), c.NumPatches()
	var es []tvEntry
	prefix := 1
	if c.NoClassToken {
		prefix = 0
	} else {
		es = append(es, tvEntry{"cls_token", tensor.Shape{1, 1, d}})
	}
	es = append(es,
		tvEntry{"pos_embed", tensor.Shape{1, prefix + n, d}},
		tvEntry{"patch_embed.proj.weight", tensor.Shape{d, c.InChannels, c.PatchSize, c.PatchSize}},
		tvEntry{"patch_embed.proj.bias", tensor.Shape{d}},
	)
	for i := range c.Depth {
		p := fmt.Sprintf("blocks.%d.", i)
		es = append(es,
			tvEntry{p + "norm1.weight", tensor.Shape{d}},
			tvEntry{p + "norm1.bias", tensor.Shape{d}},
			tvEntry{p + "attn.qkv.weight", tensor.Shape{3 * d, d}},
			tvEntry{p + "attn.qkv.bias", tensor.Shape{3 * d}},
			tvEntry{p + "attn.proj.weight", tensor.Shape{d, d}},
			tvEntry{p + "attn.proj.bias", tensor.Shape{d}},
			tvEntry{p + "norm2.weight", tensor.Shape{d}},
			tvEntry{p + "norm2.bias", tensor.Shape{d}},
			tvEntry{p + "mlp.fc1.weight", tensor.Shape{m, d}},
			tvEntry{p + "mlp.fc1.bias", tensor.Shape{m}},
			tvEntry{p + "mlp.fc2.weight", tensor.Shape{d, m}},
			tvEntry{p + "mlp.fc2.bias", tensor.Shape{d}},
		)
	}
	norm := "norm."
	if c.GlobalPool == "avg" {
		norm = "fc_norm."
	}
	return append(es,
		tvEntry{norm + "weight", tensor.Shape{d}},
		tvEntry{norm + "bias", tensor.Shape{d}},
		tvEntry{"head.weight", tensor.Shape{c.NumClasses, d}},
		tvEntry{"head.bias", tensor.Shape{c.NumClasses}},
	)
}

func TestViTStateKeys(t *testing.T) {
	for _, c := range []models.ViTConfig{
		{ImageSize: 8, PatchSize: 4, InChannels: 3, NumClasses: 5, Dim: 8, Depth: 2, Heads: 2},
		{ImageSize: 8, PatchSize: 4, InChannels: 1, NumClasses: 2, Dim: 8, Depth: 1, Heads: 4, GlobalPool: "avg"},
		{ImageSize: 6, PatchSize: 3, InChannels: 1, NumClasses: 2, Dim: 4, Depth: 3, Heads: 1, MLPRatio: 1.5, GlobalPool: "avg", NoClassToken: true},
	} {
		m, err := models.NewViT(c, tensor.NewGenerator(0))
		if err != nil {
			t.Fatal(err)
		}
		want := vitStateKeys(c)
		sd := nn.StateDict(m)
		keys := nn.StateKeys(m)
		if len(keys) != len(want) {
			t.Errorf("%+v: %d keys %v, want %d", c, len(keys), keys, len(want))
		}
		for i := range min(len(keys), len(want)) {
			if keys[i] != want[i].name || !sd[keys[i]].Shape().Equal(want[i].shape) {
				t.Errorf("%+v: key %d is %s %v, want %s %v", c, i, keys[i], sd[keys[i]].Shape(), want[i].name, want[i].shape)
			}
		}
		nn.ReleaseAll(sd)
		m.Release()
	}
}

// The initial values follow timm: truncated normal (σ = 0.02) for the
// position embedding and Linear weights, zero biases, a class token of
// σ = 10⁻⁶, unit LayerNorm gains, and the patch projection as PyTorch's
// Conv2d (U(±1/√fanIn)). Draws come from the generator alone.
func TestViTInit(t *testing.T) {
	c := models.ViTConfig{ImageSize: 32, PatchSize: 4, InChannels: 3, NumClasses: 10, Dim: 64, Depth: 2, Heads: 4}
	build := func(seed uint64) map[string][]float64 {
		m, err := models.NewViT(c, tensor.NewGenerator(seed))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Release()
		out := map[string][]float64{}
		for _, p := range m.NamedParameters() {
			out[p.Name] = p.Param.Value.Float64s()
		}
		return out
	}
	a, b, other := build(5), build(5), build(6)
	for k := range a {
		if !slices.Equal(a[k], b[k]) {
			t.Errorf("%s differs between two builds with the same seed", k)
		}
	}
	if slices.Equal(a["blocks.0.attn.qkv.weight"], other["blocks.0.attn.qkv.weight"]) {
		t.Error("different seeds give the same weights")
	}
	moments := func(v []float64) (mean, std, lo, hi float64) {
		lo, hi = math.Inf(1), math.Inf(-1)
		for _, x := range v {
			mean += x
			lo, hi = min(lo, x), max(hi, x)
		}
		mean /= float64(len(v))
		for _, x := range v {
			std += (x - mean) * (x - mean)
		}
		return mean, math.Sqrt(std / float64(len(v))), lo, hi
	}
	for _, k := range []string{"pos_embed", "blocks.0.attn.qkv.weight", "blocks.1.mlp.fc1.weight", "head.weight"} {
		mean, std, _, _ := moments(a[k])
		if math.Abs(mean) > 0.003 || math.Abs(std-0.02) > 0.002 {
			t.Errorf("%s: mean %.4g, std %.4g; want 0 and 0.02", k, mean, std)
		}
	}
	if _, std, _, _ := moments(a["cls_token"]); std > 1e-5 || std == 0 {
		t.Errorf("cls_token: std %g, want about 1e-6", std)
	}
	bound := 1 / math.Sqrt(3*4*4)
	if _, std, lo, hi := moments(a["patch_embed.proj.weight"]); lo < -bound || hi > bound || math.Abs(std-bound/math.Sqrt(3)) > 0.1*bound {
		t.Errorf("patch_embed.proj.weight: std %.4g in [%.4g, %.4g]; want U(±%.4g)", std, lo, hi, bound)
	}
	for _, k := range []string{"blocks.0.attn.qkv.bias", "blocks.1.mlp.fc2.bias", "head.bias", "norm.bias"} {
		if slices.ContainsFunc(a[k], func(x float64) bool { return x != 0 }) {
			t.Errorf("%s is not zero", k)
		}
	}
	if slices.ContainsFunc(a["blocks.1.norm2.weight"], func(x float64) bool { return x != 1 }) {
		t.Error("blocks.1.norm2.weight is not one")
	}
}

func TestDropPath(t *testing.T) {
	x := func() *autograd.Var {
		return autograd.Param(tensor.FromSlice(golden.HashUniform(1, 64*3*2), tensor.Shape{64, 3, 2}, tensor.Of(tensor.Float64)))
	}
	run := func(seed uint64, training bool) (out, grad []float64) {
		d := models.NewDropPath(0.25, tensor.NewGenerator(seed))
		d.SetTraining(training)
		in := x()
		defer in.Release()
		y := d.Forward(in)
		defer y.Release()
		s := autograd.Sum(y)
		defer s.Release()
		s.Backward()
		return y.Value.Float64s(), in.Grad().Float64s()
	}
	in := x()
	xv := in.Value.Float64s()
	in.Release()

	y1, g1 := run(7, true)
	y2, _ := run(7, true)
	y3, _ := run(8, true)
	if !slices.Equal(y1, y2) {
		t.Error("the same seed gives different masks")
	}
	if slices.Equal(y1, y3) {
		t.Error("different seeds give the same mask")
	}
	dropped := 0
	for s := range 64 {
		// Each sample is dropped whole or kept scaled by 1/(1−p), and the
		// gradient is the same factor.
		k := y1[6*s] / xv[6*s]
		if k != 0 && math.Abs(k-1/0.75) > 1e-12 {
			t.Fatalf("sample %d scaled by %v, want 0 or %v", s, k, 1/0.75)
		}
		if k == 0 {
			dropped++
		}
		for i := 6 * s; i < 6*s+6; i++ {
			if math.Abs(y1[i]-k*xv[i]) > 1e-12 || math.Abs(g1[i]-k) > 1e-12 {
				t.Fatalf("sample %d: element %d is %v with gradient %v, want %v and %v", s, i, y1[i], g1[i], k*xv[i], k)
			}
		}
	}
	if dropped == 0 || dropped == 64 {
		t.Errorf("%d of 64 samples dropped with p = 0.25", dropped)
	}
	if y, g := run(7, false); !slices.Equal(y, xv) || slices.ContainsFunc(g, func(v float64) bool { return v != 1 }) {
		t.Error("in evaluation DropPath is not the identity")
	}

	// The expectation is preserved: the mean of many masks is 1, within
	// five standard errors (the factor has variance p/(1−p)).
	const n, p = 40000, 0.3
	d := models.NewDropPath(p, tensor.NewGenerator(11))
	ones := autograd.Const(tensor.Ones(tensor.Shape{n, 1}, tensor.Of(tensor.Float64)))
	defer ones.Release()
	y := d.Forward(ones)
	defer y.Release()
	var sum float64
	zeros := 0
	for _, v := range y.Value.Float64s() {
		sum += v
		if v == 0 {
			zeros++
		}
	}
	se := math.Sqrt(p / (1 - p) / n)
	if mean := sum / n; math.Abs(mean-1) > 5*se {
		t.Errorf("mean factor %v, want 1 ± %.3g", mean, 5*se)
	}
	if frac := float64(zeros) / n; math.Abs(frac-p) > 5*math.Sqrt(p*(1-p)/n) {
		t.Errorf("dropped fraction %v, want %v", frac, p)
	}
}

// The drop-path rate grows linearly over the blocks, from 0 to DropPath.
func TestViTDropPathRates(t *testing.T) {
	c := models.ViTConfig{ImageSize: 4, PatchSize: 2, InChannels: 1, NumClasses: 2, Dim: 4, Depth: 5, Heads: 1, DropPath: 0.2}
	m, err := models.NewViT(c, tensor.NewGenerator(0))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()
	for i, b := range m.Blocks {
		want := 0.2 * float64(i) / 4
		if math.Abs(b.DropPath1.P-want) > 1e-15 || b.DropPath2.P != b.DropPath1.P {
			t.Errorf("block %d: drop path %v and %v, want %v", i, b.DropPath1.P, b.DropPath2.P, want)
		}
	}
}

// With avg pooling the classifier sees LN(mean of the patch tokens), the
// class token excluded; the reference is computed here from the blocks'
// output with plain arithmetic.
func TestViTMeanPooling(t *testing.T) {
	c := models.ViTConfig{ImageSize: 8, PatchSize: 4, InChannels: 2, NumClasses: 3, Dim: 8, Depth: 2, Heads: 2, GlobalPool: "avg"}
	m, err := models.NewViT(c, tensor.NewGenerator(4), tensor.Of(tensor.Float64))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()
	// Non-trivial norm and head parameters.
	for i, p := range []*autograd.Var{m.FCNorm.Weight, m.FCNorm.Bias, m.Head.Bias, m.ClsToken} {
		n := p.Value.NumElements()
		u := tensor.FromSlice(golden.HashUniform(uint64(20+i), n), p.Shape().Clone(), tensor.Of(tensor.Float64))
		p.Value.CopyFrom(u)
		u.Release()
	}
	x := autograd.Const(tensor.FromSlice(golden.HashUniform(3, 2*2*8*8), tensor.Shape{2, 2, 8, 8}, tensor.Of(tensor.Float64)))
	defer x.Release()
	logits := m.Forward(x)
	defer logits.Release()

	// The tokens after the blocks, from the model's parts.
	tokens := func() []float64 {
		h := m.PatchEmbed.Forward(x)
		cls := autograd.Expand(m.ClsToken, 2, -1, -1)
		cat := autograd.Concat(1, cls, h)
		pos := autograd.Add(cat, m.PosEmbed)
		var out *autograd.Var = pos
		for _, b := range m.Blocks {
			next := b.Forward(out)
			if out != pos {
				out.Release()
			}
			out = next
		}
		v := out.Value.Float64s()
		for _, r := range []*autograd.Var{h, cls, cat, pos, out} {
			r.Release()
		}
		return v
	}()
	t1, d := 1+c.NumPatches(), c.Dim
	gamma, beta := m.FCNorm.Weight.Value.Float64s(), m.FCNorm.Bias.Value.Float64s()
	w, bias := m.Head.Weight.Value.Float64s(), m.Head.Bias.Value.Float64s()
	got := logits.Value.Float64s()
	pool := func(b, from int) []float64 {
		avg := make([]float64, d)
		for i := from; i < t1; i++ {
			for j := range d {
				avg[j] += tokens[(b*t1+i)*d+j] / float64(t1-from)
			}
		}
		var mu, v float64
		for _, a := range avg {
			mu += a / float64(d)
		}
		for _, a := range avg {
			v += (a - mu) * (a - mu) / float64(d)
		}
		out := make([]float64, c.NumClasses)
		for k := range out {
			out[k] = bias[k]
			for j := range d {
				out[k] += w[k*d+j] * ((avg[j]-mu)/math.Sqrt(v+1e-6)*gamma[j] + beta[j])
			}
		}
		return out
	}
	for b := range 2 {
		want, withCls := pool(b, 1), pool(b, 0)
		for k := range want {
			if math.Abs(got[b*3+k]-want[k]) > 1e-12 {
				t.Errorf("logit [%d, %d] = %v, want %v", b, k, got[b*3+k], want[k])
			}
		}
		if math.Abs(withCls[0]-want[0]) < 1e-9 {
			t.Errorf("pooling with or without the class token gives %v: the test cannot tell them apart", want[0])
		}
	}
}

// A tiny ViT in training mode, with dropout, attention dropout and drop
// path drawing their masks from a generator reset for every evaluation,
// has the gradients of finite differences end to end: with respect to the
// image and, by standing in for the model's own parameters, the class
// token, the position embedding, a qkv weight and an MLP weight.
func TestViTGradcheck(t *testing.T) {
	c := models.ViTConfig{ImageSize: 4, PatchSize: 2, InChannels: 1, NumClasses: 3, Dim: 4, Depth: 2, Heads: 2,
		Dropout: 0.1, AttnDropout: 0.1, DropPath: 0.5}
	g := tensor.NewGenerator(9)
	m, err := models.NewViT(c, g, tensor.Of(tensor.Float64))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()
	nn.Train(m)
	slots := []**autograd.Var{&m.ClsToken, &m.PosEmbed, &m.Blocks[0].Attn.QKV.Weight, &m.Blocks[1].MLP.FC1.Weight}
	inputs := []*tensor.Tensor{tensor.FromSlice(golden.HashUniform(5, 2*1*4*4), tensor.Shape{2, 1, 4, 4})}
	for i, s := range slots {
		// Larger values than the initialisation so that every part matters.
		v := golden.HashUniform(uint64(30+i), (*s).Value.NumElements())
		inputs = append(inputs, tensor.FromSlice(v, (*s).Shape().Clone()))
	}
	defer func() {
		for _, in := range inputs {
			in.Release()
		}
	}()
	f := func(xs []*autograd.Var) *autograd.Var {
		saved := make([]*autograd.Var, len(slots))
		for i, s := range slots {
			saved[i], *s = *s, xs[i+1]
		}
		defer func() {
			for i, s := range slots {
				*s = saved[i]
			}
		}()
		g.SetState(42, 0)
		return m.Forward(xs[0])
	}
	// Every input reaches the output, so the check below cannot pass by
	// comparing zeros with zeros.
	xs := make([]*autograd.Var, len(inputs))
	for i, in := range inputs {
		xs[i] = autograd.Param(in.Retain())
	}
	y := f(xs)
	s := autograd.Sum(y)
	s.Backward()
	for i, x := range xs {
		if x.Grad() == nil || !slices.ContainsFunc(x.Grad().Float64s(), func(v float64) bool { return v != 0 }) {
			t.Errorf("input %d gets no gradient", i)
		}
		x.Release()
	}
	s.Release()
	y.Release()
	if err := autograd.Gradcheck(f, inputs, autograd.GradcheckOptions{Seed: 1}); err != nil {
		t.Error(err)
	}
}

// Training steps of a ViT with every kind of dropout release all they
// allocate: after warm-up the CPU buffer pool serves every allocation.
func TestViTTrainingStepMemory(t *testing.T) {
	c := models.ViTConfig{ImageSize: 8, PatchSize: 4, InChannels: 3, NumClasses: 4, Dim: 16, Depth: 2, Heads: 2,
		Dropout: 0.1, AttnDropout: 0.1, DropPath: 0.2, GlobalPool: "avg"}
	m, err := models.NewViT(c, tensor.NewGenerator(2))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()
	x := autograd.Const(tensor.FromSlice(golden.HashUniform(8, 4*3*8*8), tensor.Shape{4, 3, 8, 8}, tensor.Of(tensor.Float32)))
	defer x.Release()
	labels := tensor.FromSlice([]int64{0, 1, 2, 3}, nil)
	defer labels.Release()
	step := func() {
		y := m.Forward(x)
		loss := autograd.CrossEntropy(y, labels, autograd.CrossEntropyOptions{})
		loss.Backward()
		for _, p := range m.NamedParameters() {
			p.Param.Value.AddScaledInPlace(-0.01, p.Param.Grad())
			p.Param.ZeroGrad()
		}
		loss.Release()
		y.Release()
	}
	for range 5 {
		step()
	}
	_, before, _ := cpu.Default().PoolStats()
	for range 20 {
		step()
	}
	if _, after, _ := cpu.Default().PoolStats(); after != before {
		t.Errorf("the buffer pool missed %d times in 20 steady-state steps", after-before)
	}
}

func TestViTErrors(t *testing.T) {
	gen := tensor.NewGenerator(0)
	for _, c := range []struct {
		model string
		cfg   models.Config
		want  string
	}{
		{"vit_tiny_p16", models.Config{InChannels: 1, Height: 28, Width: 28, NumClasses: 10}, "multiple of the patch size 16"},
		{"vit_small_p32", models.Config{InChannels: 3, Height: 224, Width: 192, NumClasses: 10}, "square"},
		{"vit_base_p4", models.Config{InChannels: 3, Height: 30, Width: 30, NumClasses: 10}, "multiple of the patch size 4"},
		{"vit_tiny_p4", models.Config{InChannels: 0, Height: 32, Width: 32, NumClasses: 10}, "invalid"},
	} {
		if _, err := models.Build(c.model, c.cfg, gen); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s on %+v: error %v, want one mentioning %q", c.model, c.cfg, err, c.want)
		}
	}
	base := models.ViTConfig{ImageSize: 8, PatchSize: 4, InChannels: 1, NumClasses: 2, Dim: 8, Depth: 1, Heads: 2}
	for _, c := range []struct {
		edit func(*models.ViTConfig)
		want string
	}{
		{func(c *models.ViTConfig) { c.PatchSize = 3 }, "multiple of the patch size"},
		{func(c *models.ViTConfig) { c.Heads = 3 }, "do not divide"},
		{func(c *models.ViTConfig) { c.GlobalPool = "max" }, "global pool"},
		{func(c *models.ViTConfig) { c.NoClassToken = true }, "class token"},
		{func(c *models.ViTConfig) { c.DropPath = 1 }, "[0, 1)"},
		{func(c *models.ViTConfig) { c.MLPRatio = 0.01 }, "hidden units"},
		{func(c *models.ViTConfig) { c.Depth = 0 }, "positive"},
	} {
		cfg := base
		c.edit(&cfg)
		if _, err := models.NewViT(cfg, gen); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one mentioning %q", cfg, err, c.want)
		}
	}
	for _, name := range []string{"vit_huge_p14", "vit_base_p8", "vit_base", "resnet18"} {
		if _, err := models.NamedViT(name, models.FashionMNIST); err == nil {
			t.Errorf("NamedViT accepted %s", name)
		}
	}
}

func TestViTRegistry(t *testing.T) {
	names := models.Names()
	for _, s := range []string{"tiny", "small", "base", "large"} {
		for _, p := range []int{4, 16, 32} {
			name := fmt.Sprintf("vit_%s_p%d", s, p)
			if !slices.Contains(names, name) || models.Describe(name) == "" {
				t.Errorf("%s is not registered with a description", name)
			}
		}
	}
	if testing.Short() {
		return
	}
	// A registered model runs on CIFAR-sized images.
	cifar := models.Config{InChannels: 3, Height: 32, Width: 32, NumClasses: 10}
	m, err := models.Build("vit_tiny_p4", cifar, tensor.NewGenerator(0))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()
	c, _ := models.NamedViT("vit_tiny_p4", cifar)
	if got := nn.NumParameters(m); got != c.NumParameters() {
		t.Errorf("vit_tiny_p4: %d parameters, formula %d", got, c.NumParameters())
	}
	x := autograd.Const(tensor.Zeros(tensor.Shape{2, 3, 32, 32}))
	defer x.Release()
	y := m.Forward(x)
	defer y.Release()
	if !y.Shape().Equal(tensor.Shape{2, 10}) {
		t.Errorf("output shape %v, want [2 10]", y.Shape())
	}
}

func TestConvertTorchvisionViT(t *testing.T) {
	c := vitGoldenCase{ImageSize: 4, PatchSize: 2, NumLayers: 2, NumHeads: 1, HiddenDim: 4, MLPDim: 8, NumClasses: 3, InChannels: 3}
	sd := map[string]*tensor.Tensor{}
	for _, e := range torchvisionViTKeys(c) {
		sd[e.name] = tensor.Zeros(e.shape)
	}
	defer nn.ReleaseAll(sd)
	out, err := models.ConvertTorchvisionViT(sd)
	if err != nil {
		t.Fatal(err)
	}
	got := slices.Sorted(func(yield func(string) bool) {
		for k := range out {
			if !yield(k) {
				return
			}
		}
	})
	var want []string
	for _, e := range vitStateKeys(c.config()) {
		want = append(want, e.name)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("converted keys %v, want %v", got, want)
	}
	nn.ReleaseAll(out)

	// torchvision before 0.14 named the MLP's layers linear_1 and linear_2.
	legacy := map[string]*tensor.Tensor{}
	for k, v := range sd {
		k = strings.Replace(k, "mlp.0.", "mlp.linear_1.", 1)
		k = strings.Replace(k, "mlp.3.", "mlp.linear_2.", 1)
		legacy[k] = v
	}
	out, err = models.ConvertTorchvisionViT(legacy)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(want) || out["blocks.1.mlp.fc2.weight"] == nil {
		t.Errorf("legacy names: %d keys, want %d with blocks.1.mlp.fc2.weight", len(out), len(want))
	}
	nn.ReleaseAll(out)

	for _, extra := range []string{"heads.pre_logits.weight", "encoder.layers.encoder_layer_0.mlp.linear_1.bias", "encoder.layers.encoder_layer_01.ln_1.bias"} {
		bad := maps(sd)
		bad[extra] = sd["conv_proj.bias"]
		if _, err := models.ConvertTorchvisionViT(bad); err == nil || !strings.Contains(err.Error(), extra) {
			t.Errorf("with %s: error %v, want one naming it", extra, err)
		}
	}
}

// TestConvertToTorchvisionViT renames a ViT's state dict to torchvision's
// names: the inverse of ConvertTorchvisionViT, sharing the tensors, and an
// error for what torchvision's VisionTransformer cannot hold.
func TestConvertToTorchvisionViT(t *testing.T) {
	c := vitGoldenCase{ImageSize: 4, PatchSize: 2, NumLayers: 2, NumHeads: 1, HiddenDim: 4, MLPDim: 8, NumClasses: 3, InChannels: 3}
	m, err := models.NewViT(c.config(), tensor.NewGenerator(3))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()
	sd := nn.StateDict(m)
	defer nn.ReleaseAll(sd)
	tv, err := models.ConvertToTorchvisionViT(sd)
	if err != nil {
		t.Fatal(err)
	}
	defer nn.ReleaseAll(tv)
	var want []string
	for _, e := range torchvisionViTKeys(c) {
		want = append(want, e.name)
		if got := tv[e.name]; got == nil || !got.Shape().Equal(e.shape) {
			t.Errorf("%s: %v, want shape %v", e.name, got, e.shape)
		}
	}
	if len(tv) != len(want) {
		t.Errorf("%d keys, want torchvision's %d: %v", len(tv), len(want), slices.Sorted(func(yield func(string) bool) {
			for k := range tv {
				if !yield(k) {
					return
				}
			}
		}))
	}
	back, err := models.ConvertTorchvisionViT(tv)
	if err != nil {
		t.Fatal(err)
	}
	defer nn.ReleaseAll(back)
	if len(back) != len(sd) {
		t.Errorf("round trip: %d keys, want %d", len(back), len(sd))
	}
	for k, v := range sd {
		if back[k] == nil || !back[k].SharesStorage(v) {
			t.Errorf("round trip: %s is not the model's tensor", k)
		}
	}

	avg := c.config()
	avg.GlobalPool = "avg"
	ma, err := models.NewViT(avg, tensor.NewGenerator(3))
	if err != nil {
		t.Fatal(err)
	}
	defer ma.Release()
	sda := nn.StateDict(ma)
	defer nn.ReleaseAll(sda)
	if _, err := models.ConvertToTorchvisionViT(sda); err == nil || !strings.Contains(err.Error(), `"fc_norm.weight"`) {
		t.Errorf("mean-pooled ViT: error %v, want one naming fc_norm.weight", err)
	}
	noCls := maps(sd)
	delete(noCls, "cls_token")
	if _, err := models.ConvertToTorchvisionViT(noCls); err == nil || !strings.Contains(err.Error(), "class token") {
		t.Errorf("ViT without class token: error %v", err)
	}
}

// TestViTMLPDim builds a ViT with an MLP width that no ratio truncated by
// int() gives (torchvision's hidden_dim 15, mlp_dim 123).
func TestViTMLPDim(t *testing.T) {
	c := models.ViTConfig{ImageSize: 4, PatchSize: 2, InChannels: 3, NumClasses: 2, Dim: 15, Depth: 1, Heads: 3}
	byRatio := c
	byRatio.MLPRatio = 123.0 / 15
	if got := byRatio.MLPHidden(); got == 123 {
		t.Fatalf("MLPRatio 123/15 gives %d hidden units; the test needs a ratio that cannot express 123", got)
	}
	c.MLPDim = 123
	if got := c.MLPHidden(); got != 123 {
		t.Errorf("MLPDim 123: %d hidden units", got)
	}
	m, err := models.NewViT(c, tensor.NewGenerator(1))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()
	if s := m.Blocks[0].MLP.FC1.Weight.Shape(); !s.Equal(tensor.Shape{123, 15}) {
		t.Errorf("fc1.weight %v, want [123 15]", s)
	}
	if n, want := nn.NumParameters(m), c.NumParameters(); n != want {
		t.Errorf("%d parameters, NumParameters says %d", n, want)
	}
	for _, bad := range []struct {
		ratio float64
		dim   int
		want  string
	}{{4, 60, "set one of them"}, {0, -1, "MLP width -1"}} {
		b := c
		b.MLPRatio, b.MLPDim = bad.ratio, bad.dim
		if _, err := models.NewViT(b, tensor.NewGenerator(1)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("MLPRatio %v, MLPDim %d: error %v, want one containing %q", bad.ratio, bad.dim, err, bad.want)
		}
	}
}

func maps(m map[string]*tensor.Tensor) map[string]*tensor.Tensor {
	out := make(map[string]*tensor.Tensor, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func ExampleNewViT() {
	// The configuration of testdata/golden/gen_vit.py's torchvision model.
	c := models.ViTConfig{ImageSize: 32, PatchSize: 8, InChannels: 3, NumClasses: 10, Dim: 48, Depth: 2, Heads: 3}
	m, err := models.NewViT(c, tensor.NewGenerator(0))
	if err != nil {
		panic(err)
	}
	defer m.Release()
	fmt.Println(nn.NumParameters(m), c.NumParameters())
	fmt.Println(nn.StateKeys(m)[:6])
	x := autograd.Const(tensor.Zeros(tensor.Shape{4, 3, 32, 32}))
	defer x.Release()
	y := m.Forward(x)
	defer y.Release()
	fmt.Println(y.Shape())
	// Output:
	// 67258 67258
	// [cls_token pos_embed patch_embed.proj.weight patch_embed.proj.bias blocks.0.norm1.weight blocks.0.norm1.bias]
	// [4 10]
}
