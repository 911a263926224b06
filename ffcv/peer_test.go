package ffcv_test

import (
	"context"
	"encoding/json"
	"math"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/flockml/flock/ffcv"
	"github.com/flockml/flock/ffcv/beton"
	"github.com/flockml/flock/internal/peers"
)

// ffcvRead loads each .beton file named in argv with FFCV's own Loader, in
// order, and prints per file the labels and each image's pixel sum.
const ffcvRead = `
import json, sys
import numpy as np
from ffcv.fields.decoders import IntDecoder, SimpleRGBImageDecoder
from ffcv.loader import Loader, OrderOption
out = []
for path in sys.argv[1:]:
    loader = Loader(path, batch_size=8, num_workers=1, order=OrderOption.SEQUENTIAL, drop_last=False,
                    pipelines={"image": [SimpleRGBImageDecoder()], "label": [IntDecoder()]})
    labels, sums = [], []
    for x, y in loader:
        labels += [int(v) for v in np.asarray(y).reshape(-1)]
        sums += [int(v) for v in np.asarray(x, dtype=np.int64).reshape(len(x), -1).sum(axis=1)]
    out.append({"labels": labels, "sums": sums})
print(json.dumps(out))
`

// TestFFCVReadsFlockFiles writes synthetic images with flock's writer, raw
// and JPEG, and reads them with FFCV's own Loader (bench/peers/setup.sh's
// environment; skipped without it): the labels are flock's, the raw
// pixels exactly, the JPEG ones within its loss.
func TestFFCVReadsFlockFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("starts FFCV (numba compiles its pipeline); skipped in -short mode")
	}
	python, err := peers.Python(".")
	if err != nil {
		t.Skipf("FFCV: %v", err)
	}
	const n, side = 20, 24
	dir := t.TempDir()
	var paths []string
	for _, mode := range []beton.ImageMode{beton.WriteRaw, beton.WriteJPEG} {
		src := &ffcv.SyntheticSource{N: n, Width: side, Height: side, Seed: 3,
			Image: beton.RGBImageField{Mode: mode, JPEGQuality: 95}}
		p := filepath.Join(dir, filepath.Base(t.Name())+string(rune('0'+mode))+".beton")
		if err := beton.Write(context.Background(), p, src.Fields(), src, beton.WriterOptions{}); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	r, err := beton.Open(paths[0], beton.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fImg, _ := r.FieldIndex("image")
	fLabel, _ := r.FieldIndex("label")
	labels, sums := make([]int64, n), make([]int64, n)
	for i := range n {
		img, err := r.Image(fImg, i)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range img.Data {
			sums[i] += int64(b)
		}
		labels[i] = r.Int(fLabel, i)
	}

	out, err := exec.Command(python, append([]string{"-c", ffcvRead}, paths...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("FFCV's Loader on flock's files: %v\n%s", err, out)
	}
	var got []struct {
		Labels []int64 `json:"labels"`
		Sums   []int64 `json:"sums"`
	}
	if err := json.Unmarshal(lastLine(out), &got); err != nil || len(got) != 2 {
		t.Fatalf("FFCV's output %q: %v", out, err)
	}
	for k, g := range got {
		if len(g.Labels) != n || len(g.Sums) != n {
			t.Fatalf("%s: FFCV read %d labels and %d images, want %d", paths[k], len(g.Labels), len(g.Sums), n)
		}
		for i := range n {
			if g.Labels[i] != labels[i] {
				t.Errorf("%s: sample %d: FFCV reads label %d, flock wrote %d", paths[k], i, g.Labels[i], labels[i])
			}
			// Raw pixels are exact; a JPEG's mean pixel is within 2 levels.
			tol := 0.0
			if k == 1 {
				tol = 2 * side * side * 3
			}
			if d := math.Abs(float64(g.Sums[i] - sums[i])); d > tol {
				t.Errorf("%s: sample %d: FFCV's pixels sum to %d, flock wrote %d", paths[k], i, g.Sums[i], sums[i])
			}
		}
	}
}

// lastLine returns the last non-empty line of b, where a child's JSON
// follows whatever its libraries printed.
func lastLine(b []byte) []byte {
	end := len(b)
	for end > 0 && (b[end-1] == '\n' || b[end-1] == '\r') {
		end--
	}
	start := end
	for start > 0 && b[start-1] != '\n' {
		start--
	}
	return b[start:end]
}
