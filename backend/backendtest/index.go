package backendtest

import (
	"fmt"

	"github.com/flockml/flock/backend"
)

func init() { register("Index", checkIndex) }

// indexDTypes are the element types the indexing kernels are checked with.
var indexDTypes = []backend.DType{backend.Float32, backend.Float64, backend.Int64}

// coords returns the row-major coordinates of flat position i in shape.
func coords(shape backend.Shape, i int) []int {
	c := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		c[d] = i % shape[d]
		i /= shape[d]
	}
	return c
}

// flat returns the row-major position of coordinates c in shape.
func flat(shape backend.Shape, c []int) int {
	at := 0
	for d, x := range c {
		at = at*shape[d] + x
	}
	return at
}

// randomIndex returns a view of shape (strided when asked) holding values
// in [0, n) with repeats, and those values.
func (e *Env) randomIndex(dt backend.DType, shape backend.Shape, strided bool, n int) (backend.View, []float64) {
	return e.Random(dt, shape, strided, 0, float64(n))
}

// sumTol returns the tolerances for sums of a few values in [−100, 100):
// exact for integers.
func sumTol(dt backend.DType) (rtol, atol float64) {
	if !dt.IsFloat() {
		return 0, 0
	}
	return 4 * Tol(dt), 100 * Tol(dt)
}

func checkIndex(e *Env) {
	checkGather(e)
	checkScatterAdd(e)
	checkIndexSelect(e)
	checkIndexAdd(e)
	checkIndexErrors(e)
}

type gatherCase struct {
	x, index backend.Shape // for ScatterAdd: dst and index; src is x
	axis     int
}

var gatherCases = []gatherCase{
	{backend.Shape{0}, backend.Shape{0}, 0},
	{backend.Shape{1}, backend.Shape{1}, 0},
	{backend.Shape{5}, backend.Shape{9}, 0},
	{backend.Shape{3, 4}, backend.Shape{3, 4}, 1},
	{backend.Shape{3, 4}, backend.Shape{2, 3}, 0},
	{backend.Shape{3, 4}, backend.Shape{3, 0}, 1},
	{backend.Shape{4, 5, 6}, backend.Shape{3, 7, 2}, 1},
	{backend.Shape{4, 5, 6}, backend.Shape{4, 5, 11}, 2},
	{backend.Shape{2, 1, 3, 5}, backend.Shape{2, 1, 3, 4}, 0},
	{backend.Shape{64, 300}, backend.Shape{64, 257}, 1},
	{backend.Shape{300, 70}, backend.Shape{517, 70}, 0},
}

func checkGather(e *Env) {
	for _, dt := range indexDTypes {
		for _, it := range []backend.DType{backend.Int32, backend.Int64} {
			for _, c := range gatherCases {
				for _, strided := range []bool{false, true} {
					name := fmt.Sprintf("%v%v/index %v%v/axis=%d/strided=%v", dt, c.x, it, c.index, c.axis, strided)
					x, xv := e.Random(dt, c.x, strided, -100, 100)
					index, iv := e.randomIndex(it, c.index, strided, max(c.x[c.axis], 1))
					if c.x[c.axis] == 0 && len(iv) > 0 {
						continue
					}
					dst := e.Alloc(dt, c.index)
					if err := e.B.Gather(dst, x, index, c.axis); err != nil {
						e.T.Errorf("Gather %s: %v", name, err)
						continue
					}
					want := make([]float64, len(iv))
					for i := range want {
						at := coords(c.index, i)
						at[c.axis] = int(iv[i])
						want[i] = xv[flat(c.x, at)]
					}
					e.Close("Gather "+name, e.Get(dst), want, 0, 0)
				}
			}
		}
	}
}

func checkScatterAdd(e *Env) {
	for _, dt := range indexDTypes {
		for _, it := range []backend.DType{backend.Int32, backend.Int64} {
			for _, c := range gatherCases {
				for _, strided := range []bool{false, true} {
					// dst is c.x; src is index's shape grown by one on every
					// axis, so that index is smaller than src.
					src := c.index.Clone()
					for d := range src {
						src[d]++
					}
					name := fmt.Sprintf("%v dst%v/index %v%v/src%v/axis=%d/strided=%v", dt, c.x, it, c.index, src, c.axis, strided)
					dst, dv := e.Random(dt, c.x, strided, -100, 100)
					index, iv := e.randomIndex(it, c.index, strided, max(c.x[c.axis], 1))
					if c.x[c.axis] == 0 && len(iv) > 0 {
						continue
					}
					sv, svals := e.Random(dt, src, strided, -100, 100)
					if err := e.B.ScatterAdd(dst, index, sv, c.axis); err != nil {
						e.T.Errorf("ScatterAdd %s: %v", name, err)
						continue
					}
					want := append([]float64(nil), dv...)
					for i := range iv {
						at := coords(c.index, i)
						from := flat(src, at)
						at[c.axis] = int(iv[i])
						want[flat(c.x, at)] += svals[from]
					}
					rtol, atol := sumTol(dt)
					e.Close("ScatterAdd "+name, e.Get(dst), want, rtol, atol)
				}
			}
		}
	}
}

type selectCase struct {
	x    backend.Shape
	n    int // entries of the index
	axis int
}

var selectCases = []selectCase{
	{backend.Shape{1}, 1, 0},
	{backend.Shape{5}, 0, 0},
	{backend.Shape{5}, 9, 0},
	{backend.Shape{0, 3}, 4, 1},
	{backend.Shape{7, 4}, 3, 0},
	{backend.Shape{7, 4}, 6, 1},
	{backend.Shape{3, 5, 4}, 8, 1},
	{backend.Shape{3, 5, 4}, 2, 2},
	{backend.Shape{1000, 96}, 517, 0},
	{backend.Shape{6, 1000}, 300, 1},
}

func checkIndexSelect(e *Env) {
	for _, dt := range indexDTypes {
		for _, it := range []backend.DType{backend.Int32, backend.Int64} {
			for _, c := range selectCases {
				for _, strided := range []bool{false, true} {
					shape := c.x.Clone()
					shape[c.axis] = c.n
					name := fmt.Sprintf("%v%v/%d indices %v/axis=%d/strided=%v", dt, c.x, c.n, it, c.axis, strided)
					x, xv := e.Random(dt, c.x, strided, -100, 100)
					index, iv := e.randomIndex(it, backend.Shape{c.n}, strided, c.x[c.axis])
					dst := e.Alloc(dt, shape)
					if err := e.B.IndexSelect(dst, x, index, c.axis); err != nil {
						e.T.Errorf("IndexSelect %s: %v", name, err)
						continue
					}
					want := make([]float64, shape.NumElements())
					for i := range want {
						at := coords(shape, i)
						at[c.axis] = int(iv[at[c.axis]])
						want[i] = xv[flat(c.x, at)]
					}
					e.Close("IndexSelect "+name, e.Get(dst), want, 0, 0)
				}
			}
		}
	}
}

func checkIndexAdd(e *Env) {
	for _, dt := range indexDTypes {
		for _, it := range []backend.DType{backend.Int32, backend.Int64} {
			for _, c := range selectCases {
				for _, strided := range []bool{false, true} {
					shape := c.x.Clone()
					shape[c.axis] = c.n
					name := fmt.Sprintf("%v dst%v/%d indices %v/axis=%d/strided=%v", dt, c.x, c.n, it, c.axis, strided)
					dst, dv := e.Random(dt, c.x, strided, -100, 100)
					index, iv := e.randomIndex(it, backend.Shape{c.n}, strided, c.x[c.axis])
					src, svals := e.Random(dt, shape, strided, -100, 100)
					if err := e.B.IndexAdd(dst, index, src, c.axis); err != nil {
						e.T.Errorf("IndexAdd %s: %v", name, err)
						continue
					}
					want := append([]float64(nil), dv...)
					for i := range svals {
						at := coords(shape, i)
						at[c.axis] = int(iv[at[c.axis]])
						want[flat(c.x, at)] += svals[i]
					}
					rtol, atol := sumTol(dt)
					e.Close("IndexAdd "+name, e.Get(dst), want, rtol, atol)
				}
			}
		}
	}
}

func checkIndexErrors(e *Env) {
	dt := backend.Float32
	x, _ := e.Random(dt, backend.Shape{3, 4}, false, -1, 1)
	for _, bad := range []float64{4, -1} {
		index := e.Alloc(backend.Int64, backend.Shape{2, 2})
		e.Set(index, []float64{0, 1, bad, 2})
		if err := e.B.Gather(e.Alloc(dt, backend.Shape{2, 2}), x, index, 1); err == nil {
			e.T.Errorf("Gather with index %g on an axis of 4: no error", bad)
		}
		src, _ := e.Random(dt, backend.Shape{2, 2}, false, -1, 1)
		if err := e.B.ScatterAdd(x, index, src, 1); err == nil {
			e.T.Errorf("ScatterAdd with index %g on an axis of 4: no error", bad)
		}
		index1 := e.Alloc(backend.Int32, backend.Shape{3})
		e.Set(index1, []float64{0, bad, 1})
		if err := e.B.IndexSelect(e.Alloc(dt, backend.Shape{3, 3}), x, index1, 1); err == nil {
			e.T.Errorf("IndexSelect with index %g on an axis of 4: no error", bad)
		}
		src3, _ := e.Random(dt, backend.Shape{3, 3}, false, -1, 1)
		if err := e.B.IndexAdd(x, index1, src3, 1); err == nil {
			e.T.Errorf("IndexAdd with index %g on an axis of 4: no error", bad)
		}
	}
	index, _ := e.randomIndex(backend.Int64, backend.Shape{3}, false, 3)
	if err := e.B.IndexSelect(e.Alloc(dt, backend.Shape{3, 4}), x, index, 0); err != nil {
		e.T.Errorf("IndexSelect of [3 4] by 3 indices: %v", err)
	}
	if err := e.B.IndexSelect(e.Alloc(dt, backend.Shape{2, 4}), x, index, 0); err == nil {
		e.T.Errorf("IndexSelect into [2 4] with 3 indices: no error")
	}
	findex, _ := e.Random(dt, backend.Shape{3}, false, 0, 3)
	if err := e.B.IndexSelect(e.Alloc(dt, backend.Shape{3, 4}), x, findex, 0); err == nil {
		e.T.Errorf("IndexSelect with a float32 index: no error")
	}
	big, _ := e.randomIndex(backend.Int64, backend.Shape{4, 4}, false, 3)
	if err := e.B.Gather(e.Alloc(dt, backend.Shape{4, 4}), x, big, 1); err == nil {
		e.T.Errorf("Gather with index [4 4] from x [3 4] along axis 1: no error")
	}
}
