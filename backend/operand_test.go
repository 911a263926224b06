package backend

import (
	"errors"
	"strings"
	"testing"
)

// stubBuffer stands for a buffer in tests that check shapes and dtypes only.
type stubBuffer struct{}

func (stubBuffer) Backend() Backend { return nil }
func (stubBuffer) Size() int        { return 1 << 20 }

func view(dt DType, shape ...int) View { return Contiguous(stubBuffer{}, dt, Shape(shape)) }

// TestCheckLayerNormBackward checks the shared operand checks of the layer
// norm's backward: each mistake is named, and the backend's own check
// sees every operand present, first.
func TestCheckLayerNormBackward(t *testing.T) {
	t.Parallel()
	x, vec, grp := view(Float32, 4, 6), view(Float32, 6), view(Float32, 4)
	strided := x
	strided.Strides = []int{1, 4}
	for _, c := range []struct {
		name                                     string
		dx, dweight, dbias, dy, x, weight, m, rs View
		normSize                                 int
		want                                     string
	}{
		{"ok", x, vec, vec, x, x, vec, grp, grp, 6, ""},
		{"ok without dx and parameters", View{}, View{}, View{}, x, x, View{}, grp, grp, 6, ""},
		{"integer x", x, vec, vec, x, view(Int32, 4, 6), vec, grp, grp, 6, "dtype int32, want float32 or float64"},
		{"normSize", x, vec, vec, x, x, vec, grp, grp, 5, "normSize 5 is not the size of trailing axes"},
		{"dy missing", x, vec, vec, View{}, x, vec, grp, grp, 6, "dy is missing"},
		{"dx shape", view(Float32, 6, 4), vec, vec, x, x, vec, grp, grp, 6, "dx has shape [6 4], want [4 6]"},
		{"dy strided", x, vec, vec, strided, x, vec, grp, grp, 6, "dy (shape [4 6], strides [1 4]) is not contiguous"},
		{"no rstd", x, vec, vec, x, x, vec, grp, View{}, 6, "mean and rstd are required"},
		{"dweight size", x, view(Float32, 5), vec, x, x, vec, grp, grp, 6, "dweight has shape [5], want 6 elements"},
		{"mean dtype", x, vec, vec, x, x, vec, view(Float64, 4), grp, 6, "mean is float64, want float32"},
	} {
		var seen []string
		check := func(name string, v View) error { seen = append(seen, name); return nil }
		rows, err := CheckLayerNormBackward("cpu: layer_norm_backward", check, c.dx, c.dweight, c.dbias, c.dy, c.x, c.weight, c.m, c.rs, c.normSize)
		switch {
		case c.want == "" && (err != nil || rows != 4):
			t.Errorf("%s: %d groups, %v; want 4, nil", c.name, rows, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "cpu: layer_norm_backward: ")):
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
		if c.name == "ok" && strings.Join(seen, " ") != "x dy dx weight dweight dbias mean rstd" {
			t.Errorf("backend check saw %v, want every operand", seen)
		}
	}
	// The backend's own refusal comes first, as it is.
	own := errors.New("cuda: layer_norm_backward: x lives on another device")
	_, err := CheckLayerNormBackward("cuda: layer_norm_backward", func(string, View) error { return own }, x, vec, vec, x, x, vec, grp, grp, 6)
	if err != own {
		t.Errorf("error %v, want the backend's own", err)
	}
}

// TestCheckScatterAdd checks the shared checks of ScatterAdd and IndexAdd.
func TestCheckScatterAdd(t *testing.T) {
	t.Parallel()
	dst, idx, src := view(Float32, 3, 5), view(Int64, 2, 5), view(Float32, 2, 6)
	broadcast := dst
	broadcast.Strides = []int{0, 1}
	for _, c := range []struct {
		name          string
		dst, idx, src View
		axis          int
		want          string
	}{
		{"ok", dst, idx, src, 0, ""},
		{"float index", dst, view(Float32, 2, 5), src, 0, "index is float32, want int32 or int64"},
		{"axis", dst, idx, src, 2, "axis 2 out of range for dst of shape [3 5]"},
		{"rank", dst, view(Int32, 10), src, 0, "differ in rank"},
		{"index beyond src", dst, view(Int32, 3, 5), src, 0, "index of shape [3 5] exceeds src [2 6] or dst [3 5] on axis 0"},
		{"index beyond dst off the axis", dst, view(Int32, 2, 6), src, 0, "exceeds src [2 6] or dst [3 5] on axis 1"},
		{"uint8 dst", view(Uint8, 3, 5), idx, view(Uint8, 2, 6), 0, "dst is uint8, want float32, float64, int32 or int64"},
		{"mixed dtypes", dst, idx, view(Float64, 2, 6), 0, "src is float64 and dst float32"},
		{"broadcast dst", broadcast, idx, src, 0, "stride 0 on axis 0"},
	} {
		err := CheckScatterAdd("cpu: scatter_add", c.dst, c.idx, c.src, c.axis)
		if (c.want == "") != (err == nil) || err != nil && (!strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "cpu: scatter_add: ")) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
	if shape, err := CheckIndexAdd("cpu: index_add", dst, view(Int32, 4), view(Float32, 3, 4), 1); err != nil || !shape.Equal(Shape{3, 4}) {
		t.Errorf("CheckIndexAdd: %v, %v; want [3 4], nil", shape, err)
	}
	if _, err := CheckIndexAdd("cpu: index_add", dst, view(Int32, 4), view(Float32, 3, 5), 1); err == nil || !strings.Contains(err.Error(), "src has shape [3 5], want [3 4]") {
		t.Errorf("CheckIndexAdd with a mis-shaped src: %v", err)
	}
}
