package models_test

import (
	"path/filepath"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/internal/golden"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/nn/models"
	"github.com/flockml/flock/safetensors"
	"github.com/flockml/flock/tensor"
)

// TestLoadPyTorchExport loads the state dict of a torchvision
// VisionTransformer exported from PyTorch as a safetensors file
// (testdata/golden/gen_export.py), converts its names and checks that the
// flock model computes PyTorch's logits.
func TestLoadPyTorchExport(t *testing.T) {
	sd, err := safetensors.LoadTensors(filepath.Join(golden.Dir(), "export_vit_tiny.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer nn.ReleaseAll(sd)
	ref, err := safetensors.LoadTensors(filepath.Join(golden.Dir(), "export_vit_tiny_io.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer nn.ReleaseAll(ref)
	timm, err := models.ConvertTorchvisionViT(sd)
	if err != nil {
		t.Fatal(err)
	}
	defer nn.ReleaseAll(timm)
	m, err := models.NewViT(models.ViTConfig{ImageSize: 32, PatchSize: 8, InChannels: 3, NumClasses: 10, Dim: 48, Depth: 2, Heads: 3}, tensor.NewGenerator(9))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()
	if err := nn.LoadStateDict(m, timm, true); err != nil {
		t.Fatal(err)
	}
	nn.Eval(m)
	x := autograd.Const(ref["input"].Retain())
	defer x.Release()
	var y *autograd.Var
	autograd.NoGrad(func() { y = m.Forward(x) })
	defer y.Release()
	golden.Compare(t, "logits", y.Value, ref["logits"].Float64s(), ref["logits"].Shape(), golden.DTypes[0])
}
