package cpu

import (
	"fmt"
	"math"

	"github.com/flockml/flock/backend"
)

// elems returns the n elements of a contiguous view as a slice of the
// buffer, or nil for the zero View.
func elems[T any](v backend.View, n int) []T {
	if v.IsZero() || n == 0 {
		return nil
	}
	return sliceOf[T](v)[v.Offset : v.Offset+n]
}

// splitAxis views shape as [outer, dim, inner] around axis.
func splitAxis(shape backend.Shape, axis int) (outer, dim, inner int) {
	outer, inner = 1, 1
	for _, d := range shape[:axis] {
		outer *= d
	}
	for _, d := range shape[axis+1:] {
		inner *= d
	}
	return outer, shape[axis], inner
}

// softmaxBlock is how many inner positions a softmax over a non-last axis
// handles together, so that each pass reads rows of memory instead of single
// elements.
const softmaxBlock = 32

// Softmax implements backend.Backend. With the tensor viewed as
// [outer, dim, inner] around axis, each line x_{o,·,i} maps to
// softmax(x)_d = e^{x_d − m} / Σ_k e^{x_k − m} with m = max_k x_k, or to
// log-softmax x_d − m − log Σ_k e^{x_k − m}; subtracting m keeps e^· ≤ 1,
// so large logits do not overflow. Sums accumulate in float64. (The vector
// kernel paths compute float32 softmax rows' exponentials in float32.)
func (c *Backend) Softmax(dst, x backend.View, axis int, log bool) error {
	const k = "cpu: softmax"
	if err := softmaxArgs(k, x.Shape, axis, x, dst); err != nil {
		return err
	}
	if x.NumElements() == 0 {
		return nil
	}
	outer, dim, inner := splitAxis(x.Shape, axis)
	n := x.NumElements()
	switch x.DType {
	case backend.Float32:
		softmaxLines(elems[float32](dst, n), elems[float32](x, n), outer, dim, inner, log)
	case backend.Float64:
		softmaxLines(elems[float64](dst, n), elems[float64](x, n), outer, dim, inner, log)
	}
	return nil
}

// SoftmaxBackward implements backend.Backend:
// softmax: dx = y·(dy − Σ_d dy·y); log-softmax: dx = dy − e^y·Σ_d dy, the
// sums running along axis.
func (c *Backend) SoftmaxBackward(dx, y, dy backend.View, axis int, log bool) error {
	const k = "cpu: softmax_backward"
	if err := softmaxArgs(k, y.Shape, axis, y, dy, dx); err != nil {
		return err
	}
	if y.NumElements() == 0 {
		return nil
	}
	outer, dim, inner := splitAxis(y.Shape, axis)
	n := y.NumElements()
	switch y.DType {
	case backend.Float32:
		softmaxGradLines(elems[float32](dx, n), elems[float32](y, n), elems[float32](dy, n), outer, dim, inner, log)
	case backend.Float64:
		softmaxGradLines(elems[float64](dx, n), elems[float64](y, n), elems[float64](dy, n), outer, dim, inner, log)
	}
	return nil
}

func softmaxArgs(kernel string, shape backend.Shape, axis int, vs ...backend.View) error {
	if axis < 0 || axis >= len(shape) {
		return fmt.Errorf("%s: axis %d out of range for shape %v", kernel, axis, shape)
	}
	if err := backend.CheckFloat(kernel, vs[0].DType); err != nil {
		return err
	}
	names := []string{"y", "dy", "dx"}
	if len(vs) == 2 {
		names = []string{"x", "dst"}
	}
	for i, v := range vs {
		if err := backend.CheckDense(kernel, nil, names[i], v, vs[0].DType, shape); err != nil {
			return err
		}
	}
	return nil
}

// softmaxGrain returns how many lines of dim×width elements make a chunk
// worth a goroutine.
func softmaxGrain(dim, width int) int { return max(1, 16384/max(dim*width, 1)) }

func softmaxLines[T float32 | float64](y, x []T, outer, dim, inner int, log bool) {
	if inner == 1 {
		y32, _ := any(y).([]float32)
		x32, _ := any(x).([]float32)
		vec := x32 != nil && !log
		parallelFor(outer, softmaxGrain(dim, 1), func(lo, hi int) {
			for o := lo; o < hi; o++ {
				if vec && softmaxRowVec(y32[o*dim:(o+1)*dim], x32[o*dim:(o+1)*dim]) {
					continue
				}
				softmaxRow(y[o*dim:(o+1)*dim], x[o*dim:(o+1)*dim], log)
			}
		})
		return
	}
	blocks := (inner + softmaxBlock - 1) / softmaxBlock
	parallelFor(outer*blocks, softmaxGrain(dim, min(inner, softmaxBlock)), func(lo, hi int) {
		var m, s [softmaxBlock]float64
		for u := lo; u < hi; u++ {
			o, i0 := u/blocks, (u%blocks)*softmaxBlock
			w := min(softmaxBlock, inner-i0)
			base := o*dim*inner + i0
			for j := range w {
				m[j], s[j] = math.Inf(-1), 0
			}
			for d := range dim {
				row := x[base+d*inner : base+d*inner+w]
				for j, v := range row {
					m[j] = max(m[j], float64(v))
				}
			}
			for d := range dim {
				row := x[base+d*inner : base+d*inner+w]
				out := y[base+d*inner : base+d*inner+w]
				for j, v := range row {
					e := math.Exp(float64(v) - m[j])
					s[j] += e
					if !log {
						out[j] = T(e)
					}
				}
			}
			for j := range w {
				if log {
					s[j] = math.Log(s[j])
				} else {
					s[j] = 1 / s[j]
				}
			}
			for d := range dim {
				row := x[base+d*inner : base+d*inner+w]
				out := y[base+d*inner : base+d*inner+w]
				for j, v := range row {
					if log {
						out[j] = T(float64(v) - m[j] - s[j])
					} else {
						out[j] = T(float64(out[j]) * s[j])
					}
				}
			}
		}
	})
}

// softmaxRow is the softmax of one contiguous line.
func softmaxRow[T float32 | float64](y, x []T, log bool) {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, float64(v))
	}
	s := 0.0
	if log {
		for _, v := range x {
			s += math.Exp(float64(v) - m)
		}
		ls := math.Log(s)
		for i, v := range x {
			y[i] = T(float64(v) - m - ls)
		}
		return
	}
	for i, v := range x {
		e := math.Exp(float64(v) - m)
		y[i] = T(e)
		s += e
	}
	r := 1 / s
	for i, e := range y {
		y[i] = T(float64(e) * r)
	}
}

func softmaxGradLines[T float32 | float64](dx, y, dy []T, outer, dim, inner int, log bool) {
	if inner == 1 {
		dx32, _ := any(dx).([]float32)
		y32, _ := any(y).([]float32)
		dy32, _ := any(dy).([]float32)
		vec := y32 != nil && !log
		parallelFor(outer, softmaxGrain(dim, 1), func(lo, hi int) {
			for o := lo; o < hi; o++ {
				r := o * dim
				if vec && softmaxGradRowVec(dx32[r:r+dim], y32[r:r+dim], dy32[r:r+dim]) {
					continue
				}
				softmaxGradRow(dx[r:r+dim], y[r:r+dim], dy[r:r+dim], log)
			}
		})
		return
	}
	blocks := (inner + softmaxBlock - 1) / softmaxBlock
	parallelFor(outer*blocks, softmaxGrain(dim, min(inner, softmaxBlock)), func(lo, hi int) {
		var s [softmaxBlock]float64
		for u := lo; u < hi; u++ {
			o, i0 := u/blocks, (u%blocks)*softmaxBlock
			w := min(softmaxBlock, inner-i0)
			base := o*dim*inner + i0
			clear(s[:w])
			for d := range dim {
				at := base + d*inner
				for j := range w {
					if log {
						s[j] += float64(dy[at+j])
					} else {
						s[j] += float64(dy[at+j]) * float64(y[at+j])
					}
				}
			}
			for d := range dim {
				at := base + d*inner
				for j := range w {
					yv, g := float64(y[at+j]), float64(dy[at+j])
					if log {
						dx[at+j] = T(g - math.Exp(yv)*s[j])
					} else {
						dx[at+j] = T(yv * (g - s[j]))
					}
				}
			}
		}
	})
}

func softmaxGradRow[T float32 | float64](dx, y, dy []T, log bool) {
	s := 0.0
	if log {
		for _, g := range dy {
			s += float64(g)
		}
		for i, g := range dy {
			dx[i] = T(float64(g) - math.Exp(float64(y[i]))*s)
		}
		return
	}
	for i, g := range dy {
		s += float64(g) * float64(y[i])
	}
	for i, g := range dy {
		dx[i] = T(float64(y[i]) * (float64(g) - s))
	}
}
