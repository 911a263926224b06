package nn

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/safetensors"
	"github.com/flockml/flock/tensor"
)

// netOf returns a small model covering every layer with state.
func netOf(seed uint64, opts ...tensor.Option) *checkNet {
	g := tensor.NewGenerator(seed)
	n := &checkNet{}
	n.features = NewSequential(
		NewConv2d(3, 8, 3, Conv2dOptions{Padding: 1, NoBias: true}, g, opts...),
		NewBatchNorm2d(8, BatchNormOptions{}, opts...),
		NewReLU(),
		NewMaxPool2d(2, PoolOptions{}),
	)
	n.RegisterModule("features", n.features)
	n.pos = NewEmbedding(16, 8, g, opts...)
	n.RegisterModule("pos", n.pos)
	n.attn = NewMultiheadAttention(8, 2, AttentionOptions{}, g, opts...)
	n.RegisterModule("attn", n.attn)
	n.norm = NewLayerNorm(tensor.Shape{8}, LayerNormOptions{}, opts...)
	n.RegisterModule("norm", n.norm)
	n.head = NewLinear(8, 5, true, g, opts...)
	n.RegisterModule("head", n.head)
	return n
}

// checkNet is the Net of testdata/golden/check_state_dict.py: convolutional
// features of an 8×8 image become 16 tokens of size 8, with a positional
// embedding, self-attention, a residual connection, layer norm, mean pooling
// and a linear head.
type checkNet struct {
	Base
	features *Sequential
	pos      *Embedding
	attn     *MultiheadAttention
	norm     *LayerNorm
	head     *Linear
}

func (n *checkNet) Forward(x *autograd.Var) *autograd.Var {
	h := n.features.Forward(x) // [N, 8, 4, 4]
	f := autograd.Flatten(h, 2, 3)
	h.Release()
	tokens := autograd.Transpose(f, 1, 2) // [N, 16, 8]
	f.Release()
	idx := tensor.Arange(0, 16, 1, tensor.Of(tensor.Int64), tensor.On(x.Value.Device()))
	pos := n.pos.Lookup(idx)
	idx.Release()
	t := autograd.Add(tokens, pos)
	tokens.Release()
	pos.Release()
	defer t.Release()
	a := n.attn.Forward(t)
	s := autograd.Add(t, a)
	a.Release()
	normed := n.norm.Forward(s)
	s.Release()
	m := autograd.Mean(normed, 1)
	normed.Release()
	defer m.Release()
	return n.head.Forward(m)
}

func equalValues(t *testing.T, what string, a, b *tensor.Tensor) {
	t.Helper()
	if err := compare(what, a, b, tolerance{}); err != nil {
		t.Error(err)
	}
}

func TestStateDictRoundTrip(t *testing.T) {
	t.Parallel()
	a, b := netOf(1), netOf(2)
	defer a.Release()
	defer b.Release()
	keepA, keepB := Parameters(a), Parameters(b)

	sd := StateDict(a)
	if len(sd) != len(StateKeys(a)) {
		t.Fatalf("StateDict has %d entries for %d keys", len(sd), len(StateKeys(a)))
	}
	if !sd["head.weight"].SharesStorage(a.head.Weight.Value) {
		t.Errorf("StateDict copied a parameter; it should share its storage")
	}
	if err := compare("before", a.head.Weight.Value, b.head.Weight.Value, tolerance{}); err == nil {
		t.Fatalf("two seeds gave the same weights")
	}
	if err := LoadStateDict(a, sd, true); err != nil {
		t.Fatalf("a module loading its own state dict: %v", err)
	}
	a.features.Layers[1].(*BatchNorm2d).NumBatchesTracked.Fill(7)
	if err := LoadStateDict(b, sd, true); err != nil {
		t.Fatal(err)
	}
	ReleaseAll(sd)
	for i, p := range Parameters(b) {
		if p != keepB[i] {
			t.Errorf("LoadStateDict replaced parameter %d; it must copy in place", i)
		}
		equalValues(t, "parameter", p.Value, keepA[i].Value)
	}
	sa, sb := StateDict(a), StateDict(b)
	defer ReleaseAll(sa)
	defer ReleaseAll(sb)
	for k := range sa {
		equalValues(t, k, sb[k], sa[k])
	}
	if v := sb["features.1.num_batches_tracked"]; v.DType() != tensor.Int64 || v.Item() != 7 {
		t.Errorf("num_batches_tracked = %v, want int64 7", v)
	}
}

func TestSaveLoad(t *testing.T) {
	t.Parallel()
	a := netOf(3)
	defer a.Release()
	path := filepath.Join(t.TempDir(), "net.safetensors")
	if err := Save(path, a); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Metadata["format"] != "pt" {
		t.Errorf("metadata %v, want format=pt", f.Metadata)
	}
	keys := StateKeys(a)
	slices.Sort(keys)
	if !slices.Equal(f.Names(), keys) {
		t.Errorf("file holds %v, want %v", f.Names(), keys)
	}
	if nbt := f.Tensors["features.1.num_batches_tracked"]; nbt.DType != "I64" || len(nbt.Shape) != 0 {
		t.Errorf("num_batches_tracked stored as %s%v, want I64 scalar", nbt.DType, nbt.Shape)
	}

	b := netOf(4, tensor.Of(tensor.Float64))
	defer b.Release()
	if err := Load(path, b, true); err != nil {
		t.Fatal(err)
	}
	sa, sb := StateDict(a), StateDict(b)
	defer ReleaseAll(sa)
	defer ReleaseAll(sb)
	for k := range sa {
		if sb[k].DType() != tensor.Float64 && sb[k].DType() != tensor.Int64 {
			t.Errorf("%s: loading changed the module's dtype to %v", k, sb[k].DType())
		}
		equalValues(t, k, sb[k], sa[k])
	}

	if err := Load(filepath.Join(t.TempDir(), "absent.safetensors"), b, true); err == nil || !strings.HasPrefix(err.Error(), "nn: load: ") {
		t.Errorf("Load of a missing file: %v", err)
	}
}

func TestLoadStateDictErrors(t *testing.T) {
	t.Parallel()
	g := tensor.NewGenerator(5)
	for _, c := range []struct {
		name   string
		edit   func(sd map[string]*tensor.Tensor)
		strict bool
		msgs   []string // empty: no error
	}{
		{"exact strict", func(map[string]*tensor.Tensor) {}, true, nil},
		{"missing strict", func(sd map[string]*tensor.Tensor) { del(sd, "1.bias", "0.running_var") }, true,
			[]string{`missing keys "0.running_var", "1.bias"`}},
		{"missing lenient", func(sd map[string]*tensor.Tensor) { del(sd, "1.bias") }, false, nil},
		{"missing num_batches_tracked strict", func(sd map[string]*tensor.Tensor) { del(sd, "0.num_batches_tracked") }, true, nil},
		{"many missing", func(sd map[string]*tensor.Tensor) {
			for k := range sd {
				del(sd, k)
			}
		}, true, []string{`missing keys "0.weight", "0.bias", "0.running_mean", … (`, " more)"}},
		{"unexpected strict", func(sd map[string]*tensor.Tensor) {
			sd["1.extra"] = tensor.Zeros(tensor.Shape{2})
			sd["0.alpha"] = tensor.Zeros(tensor.Shape{2})
		}, true, []string{`unexpected keys "0.alpha", "1.extra"`}},
		{"unexpected lenient", func(sd map[string]*tensor.Tensor) { sd["1.extra"] = tensor.Zeros(tensor.Shape{2}) }, false, nil},
		{"shape strict", func(sd map[string]*tensor.Tensor) { replace(sd, "1.weight", tensor.Zeros(tensor.Shape{4, 3})) }, true,
			[]string{`"1.weight" is [4 3] in the state dict but [3 4] in the module`}},
		{"shape lenient", func(sd map[string]*tensor.Tensor) { replace(sd, "0.running_mean", tensor.Zeros(tensor.Shape{5})) }, false,
			[]string{`shape mismatch: "0.running_mean" is [5] in the state dict but [4] in the module`}},
		{"all three", func(sd map[string]*tensor.Tensor) {
			del(sd, "0.weight")
			sd["2"] = tensor.Zeros(nil)
			replace(sd, "1.bias", tensor.Zeros(tensor.Shape{1, 3}))
		}, true, []string{`missing keys "0.weight"`, `unexpected keys "2"`, `"1.bias" is [1 3]`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := NewSequential(NewBatchNorm2d(4, BatchNormOptions{}), NewLinear(4, 3, true, g))
			defer src.Release()
			for _, p := range src.NamedParameters() {
				Uniform(p.Param.Value, 5, 6, g)
			}
			dst := NewSequential(NewBatchNorm2d(4, BatchNormOptions{}), NewLinear(4, 3, true, g))
			defer dst.Release()
			before := StateDict(dst)
			for k, v := range before {
				before[k] = v.Clone()
				v.Release()
			}
			defer ReleaseAll(before)

			sd := StateDict(src)
			defer ReleaseAll(sd)
			c.edit(sd)
			err := LoadStateDict(dst, sd, c.strict)
			after := StateDict(dst)
			defer ReleaseAll(after)
			if len(c.msgs) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				for k, v := range after {
					if want, ok := sd[k]; ok {
						equalValues(t, k, v, want)
					} else {
						equalValues(t, k+" (absent, kept)", v, before[k])
					}
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want one containing %q", c.msgs)
			}
			if !strings.HasPrefix(err.Error(), "nn: load state dict: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			for _, m := range c.msgs {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not contain %q", err, m)
				}
			}
			for k, v := range after {
				equalValues(t, k+" (after a failed load)", v, before[k])
			}
		})
	}
}

func del(sd map[string]*tensor.Tensor, keys ...string) {
	for _, k := range keys {
		sd[k].Release()
		delete(sd, k)
	}
}

func replace(sd map[string]*tensor.Tensor, key string, t *tensor.Tensor) {
	sd[key].Release()
	sd[key] = t
}

// TestSaveLoadPyTorch writes a trained model's state with Save and has
// testdata/golden/check_state_dict.py read it with a plain safetensors
// reader, compare keys, order, shapes and dtypes with torch's state_dict,
// load it strictly into the same PyTorch model and reproduce flock's output.
func TestSaveLoadPyTorch(t *testing.T) {
	t.Parallel()
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import torch, numpy").Run(); err != nil {
		t.Skipf("%s with torch and numpy is not available: %v", python, err)
	}
	g := tensor.NewGenerator(6)
	net := netOf(7)
	defer net.Release()

	// One training step's forward pass gives batch norm non-trivial running
	// statistics.
	xt := autograd.Const(g.Randn(tensor.Shape{4, 3, 8, 8}))
	defer xt.Release()
	net.Forward(xt).Release()
	Eval(net)
	x := autograd.Const(g.Randn(tensor.Shape{2, 3, 8, 8}))
	defer x.Release()
	y := net.Forward(x)
	defer y.Release()

	dir := t.TempDir()
	state, io := filepath.Join(dir, "state.safetensors"), filepath.Join(dir, "io.safetensors")
	if err := Save(state, net); err != nil {
		t.Fatal(err)
	}
	err := safetensors.SaveTensors(io, map[string]*tensor.Tensor{"input": x.Value, "output": y.Value},
		map[string]string{"keys": strings.Join(StateKeys(net), ",")})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(python, filepath.Join("..", "testdata", "golden", "check_state_dict.py"), state, io).CombinedOutput()
	if err != nil {
		t.Fatalf("check_state_dict.py: %v\n%s", err, out)
	}
	t.Logf("check_state_dict.py: %s", strings.TrimSpace(string(out)))
}

// TestLoadStateDictWithoutNumBatchesTracked loads, strictly, a state dict
// holding only floating-point tensors, as older PyTorch checkpoints and
// float-only exports are: PyTorch's BatchNorm fills the absent
// num_batches_tracked with 0, and so does LoadStateDict.
func TestLoadStateDictWithoutNumBatchesTracked(t *testing.T) {
	t.Parallel()
	g := tensor.NewGenerator(8)
	src := NewSequential(NewLinear(3, 4, true, g), NewBatchNorm2d(4, BatchNormOptions{}))
	defer src.Release()
	dst := NewSequential(NewLinear(3, 4, true, g), NewBatchNorm2d(4, BatchNormOptions{}))
	defer dst.Release()
	dst.Layers[1].(*BatchNorm2d).NumBatchesTracked.Fill(7)
	sd := StateDict(src)
	defer ReleaseAll(sd)
	del(sd, "1.num_batches_tracked")
	for k, v := range sd {
		if v.DType() == tensor.Int64 {
			t.Fatalf("state dict still holds the integer tensor %q", k)
		}
	}
	if err := LoadStateDict(dst, sd, true); err != nil {
		t.Fatal(err)
	}
	if n := dst.Layers[1].(*BatchNorm2d).NumBatchesTracked.Item(); n != 0 {
		t.Errorf("num_batches_tracked = %v after loading a state dict without it, want 0", n)
	}
	equalValues(t, "1.running_var", dst.Layers[1].(*BatchNorm2d).RunningVar, sd["1.running_var"])

	// Other missing buffers stay errors.
	del(sd, "1.running_mean")
	if err := LoadStateDict(dst, sd, true); err == nil || !strings.Contains(err.Error(), `missing keys "1.running_mean"`) {
		t.Errorf("missing running_mean: error %v", err)
	}
}
