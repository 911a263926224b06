package examples

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/ffcv"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/nn/models"
	"github.com/flockml/flock/npy"
	"github.com/flockml/flock/safetensors"
	"github.com/flockml/flock/tensor"
)

const ffcvData = "../testdata/ffcv"

// TestEvaluate runs the module in evaluate/, which imports flock as a
// library through a replace directive, as a user's module would: it loads a
// torchvision ResNet-50 export and evaluates it on the first 8 images of
// the committed FFCV file with the FFCV-exact loader, in batches of 3 (the
// last batch, of 2, is kept because the loader evaluates).
//
// The export is made here: flock's ResNet-50 has torchvision's state-dict
// keys (TestResNetRegistry checks them against torchvision's), so its state
// dict with random weights and running statistics, saved without the
// integer num_batches_tracked tensors as a float-only export is, stands for
// torchvision.models.resnet50's. The example's logits must equal those of
// the same network, kept in memory, applied to the pixels that FFCV's own
// loader returned for those images (jpeg_q90_max256.centercrop224.first8.npy),
// normalised here: weights, loading, decoding, cropping, normalisation and
// the last batch are all checked at once.
//
// The go command runs offline (GOPROXY=off): flock comes from this
// repository and its dependencies from the module cache that built it.
func TestEvaluate(t *testing.T) {
	run := exampleRunner(t, "evaluate")
	dir := t.TempDir()
	weights := filepath.Join(dir, "resnet50.safetensors")
	logits := filepath.Join(dir, "logits.npy")

	g := tensor.NewGenerator(23)
	m, err := models.NewResNet(models.ResNetOptions{Depth: 50}, g)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()
	sd := nn.StateDict(m)
	for k, v := range sd {
		switch {
		case strings.HasSuffix(k, ".running_mean"):
			nn.Uniform(v, -0.1, 0.1, g)
		case strings.HasSuffix(k, ".running_var"):
			nn.Uniform(v, 0.5, 2, g)
		case strings.HasSuffix(k, ".num_batches_tracked"):
			v.Release()
			delete(sd, k)
		}
	}
	err = safetensors.SaveTensors(weights, sd, map[string]string{"format": "pt"})
	nn.ReleaseAll(sd)
	if err != nil {
		t.Fatal(err)
	}

	beton, err := filepath.Abs(filepath.Join(ffcvData, "jpeg_q90_max256.beton"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := run("-weights", weights, "-data", beton, "-limit", "8", "-batch-size", "3", "-logits", logits)
	if err != nil {
		t.Fatalf("go run: %v\n%s", err, out)
	}

	ref, err := npy.ReadFile(filepath.Join(ffcvData, "jpeg_q90_max256.centercrop224.first8.npy"))
	if err != nil {
		t.Fatal(err)
	}
	pix, err := ref.Uint8()
	if err != nil {
		t.Fatal(err)
	}
	xs := make([]float32, 8*3*224*224)
	for i := range 8 {
		for c := range 3 {
			for p := range 224 * 224 {
				v := float64(pix[(i*224*224+p)*3+c])
				xs[(i*3+c)*224*224+p] = float32((v - ffcv.ImageNetMean[c]) / ffcv.ImageNetStd[c])
			}
		}
	}
	in := autograd.Const(tensor.FromSlice(xs, tensor.Shape{8, 3, 224, 224}))
	defer in.Release()
	nn.Eval(m)
	var y *autograd.Var
	autograd.NoGrad(func() { y = m.Forward(in) })
	defer y.Release()
	want := y.Value.Float32s()

	got, err := npy.ReadFile(logits)
	if err != nil {
		t.Fatal(err)
	}
	gotF, err := got.Float32()
	if err != nil || len(got.Shape) != 2 || got.Shape[0] != 8 || got.Shape[1] != 1000 {
		t.Fatalf("logits %v %v: want [8 1000] float32", got.Shape, err)
	}
	lo, hi := slices.Min(gotF), slices.Max(gotF)
	if math.IsNaN(float64(lo)) || math.IsInf(float64(lo), 0) || math.IsInf(float64(hi), 0) || !(hi > lo) {
		t.Fatalf("logits in [%v, %v]: want finite, distinct values", lo, hi)
	}
	worst := 0.0
	for i, v := range gotF {
		worst = max(worst, math.Abs(float64(v-want[i]))/(1+math.Abs(float64(want[i]))))
	}
	t.Logf("example's logits against FFCV's pixels through the same network: max relative difference %.2g", worst)
	if worst > 1e-4 {
		t.Errorf("the example's logits differ from the network's on FFCV's pixels by %.3g (relative)", worst)
	}

	labels, err := npy.ReadFile(filepath.Join(ffcvData, "jpeg_q90_max256.labels.npy"))
	if err != nil {
		t.Fatal(err)
	}
	lab, err := labels.Int64()
	if err != nil {
		t.Fatal(err)
	}
	correct := 0
	for i := range 8 {
		row := gotF[i*1000 : (i+1)*1000]
		best := 0
		for k, v := range row {
			if v > row[best] {
				best = k
			}
		}
		if int64(best) == lab[i] {
			correct++
		}
	}
	if line := fmt.Sprintf("8 images, top-1 accuracy %.2f%%", 100*float64(correct)/8); !strings.Contains(out, line) {
		t.Errorf("output %q, want %q", out, line)
	}

	// At 64×64 the default stem would be the small one, whose conv1 does
	// not fit ResNet-50's weights: a strict load names the mismatch.
	out, err = run("-weights", weights, "-data", beton, "-limit", "2", "-size", "64", "-stem", "auto")
	if err == nil || !strings.Contains(out, `"conv1.weight" is [64 3 7 7] in the state dict but [64 3 3 3] in the module`) {
		t.Errorf("small stem: %v\n%s", err, out)
	}
}
