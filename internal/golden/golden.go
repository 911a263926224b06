// Package golden reads the PyTorch golden files of testdata/golden for
// flock's tests and compares tensors with them.
//
// Files hold cases computed in float32 and float64; a tensor is stored under
// "<case>.<f32|f64>.<name>" and each case's parameters as JSON in the
// metadata under "case.<case>". Comparisons allow
// |got − want| ≤ RTol·|want| + ATol·max|want|, where max|want| is the largest
// magnitude of the expected tensor (at least 1): the absolute term covers
// elements that are sums of terms cancelling to near zero, whose relative
// error in float32 is unbounded.
package golden

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/flockml/flock/safetensors"
	"github.com/flockml/flock/tensor"
)

// DType is one of the two precisions each case was computed in, with its
// tolerances.
type DType struct {
	Tag        string
	DT         tensor.DType
	RTol, ATol float64
}

// DTypes are the precisions of the files: float32 within 1e-5, float64
// within 1e-10.
var DTypes = []DType{
	{"f32", tensor.Float32, 1e-5, 1e-5},
	{"f64", tensor.Float64, 1e-10, 1e-10},
}

// File is an open golden file.
type File struct {
	Name string
	F    *safetensors.File
}

// Dir is the directory of the golden files.
func Dir() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "..", "testdata", "golden")
}

// Open reads testdata/golden/name, failing t if it cannot.
func Open(t testing.TB, name string) *File {
	t.Helper()
	f, err := safetensors.Open(filepath.Join(Dir(), name))
	if err != nil {
		t.Fatal(err)
	}
	return &File{Name: name, F: f}
}

// Key is the name of tensor name of case c in precision d.
func Key(c string, d DType, name string) string { return c + "." + d.Tag + "." + name }

// Cases returns the case names, sorted.
func (g *File) Cases(t testing.TB) []string {
	t.Helper()
	var cs []string
	for k := range g.F.Metadata {
		if c, ok := strings.CutPrefix(k, "case."); ok {
			cs = append(cs, c)
		}
	}
	slices.Sort(cs)
	if len(cs) == 0 {
		t.Fatalf("%s: no cases", g.Name)
	}
	return cs
}

// Params decodes the JSON parameters of case c into v.
func (g *File) Params(t testing.TB, c string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(g.F.Metadata["case."+c]), v); err != nil {
		t.Fatalf("%s: case %s: %v", g.Name, c, err)
	}
}

// Has reports whether the file holds key.
func (g *File) Has(key string) bool {
	_, ok := g.F.Tensors[key]
	return ok
}

// Load returns the tensor stored under key, released when t ends.
func (g *File) Load(t testing.TB, key string) *tensor.Tensor {
	t.Helper()
	r, ok := g.F.Tensors[key]
	if !ok {
		t.Fatalf("%s: no tensor %q", g.Name, key)
	}
	x, err := r.ToTensor()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(x.Release)
	return x
}

// Want returns the values stored under key, decoded from the file's bytes
// (F32, F64 or I64), and their shape.
func (g *File) Want(t testing.TB, key string) ([]float64, tensor.Shape) {
	t.Helper()
	r, ok := g.F.Tensors[key]
	if !ok {
		t.Fatalf("%s: no tensor %q", g.Name, key)
	}
	out := make([]float64, r.NumElements())
	le := binary.LittleEndian
	for i := range out {
		switch r.DType {
		case safetensors.F32:
			out[i] = float64(math.Float32frombits(le.Uint32(r.Data[4*i:])))
		case safetensors.F64:
			out[i] = math.Float64frombits(le.Uint64(r.Data[8*i:]))
		case safetensors.I64:
			out[i] = float64(int64(le.Uint64(r.Data[8*i:])))
		default:
			t.Fatalf("%s: %s has dtype %s", g.Name, key, r.DType)
		}
	}
	return out, tensor.Shape(r.Shape)
}

// Check compares got (not consumed) with the tensor stored under key.
func (g *File) Check(t testing.TB, key string, got *tensor.Tensor, d DType) {
	t.Helper()
	want, shape := g.Want(t, key)
	Compare(t, key, got, want, shape, d)
}

// Compare checks got (not consumed) against want of the given shape with
// d's dtype and tolerances (see the package comment).
func Compare(t testing.TB, name string, got *tensor.Tensor, want []float64, shape tensor.Shape, d DType) {
	t.Helper()
	if got == nil {
		t.Errorf("%s: no result", name)
		return
	}
	if !got.Shape().Equal(shape) || got.DType() != d.DT {
		t.Errorf("%s: %v%v, want %v%v", name, got.DType(), got.Shape(), d.DT, shape)
		return
	}
	scale := 1.0
	for _, w := range want {
		scale = max(scale, math.Abs(w))
	}
	bad := 0
	for i, v := range got.Float64s() {
		if math.Abs(v-want[i]) <= d.RTol*math.Abs(want[i])+d.ATol*scale {
			continue
		}
		if bad++; bad <= 3 {
			t.Errorf("%s[%d] = %.10g, want %.10g (diff %.3g)", name, i, v, want[i], v-want[i])
		}
	}
	if bad > 3 {
		t.Errorf("%s: %d of %d elements differ", name, bad, len(want))
	}
}

// ForEach runs fn as a subtest for every case of the file in both
// precisions.
func (g *File) ForEach(t *testing.T, fn func(t *testing.T, c string, d DType)) {
	for _, c := range g.Cases(t) {
		for _, d := range DTypes {
			t.Run(fmt.Sprintf("%s/%s", c, d.Tag), func(t *testing.T) { fn(t, c, d) })
		}
	}
}
