package cpu

import (
	"fmt"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/internal/float16"
)

// number is a Go type that stores one of the numeric dtypes directly.
type number interface {
	~float32 | ~float64 | ~int32 | ~int64 | ~uint8
}

// bits is the raw storage of an element of a given size.
type rawBits interface {
	~uint8 | ~uint16 | ~uint32 | ~uint64
}

// rowFunc converts n elements: dst[do + i·ds] = src[so + i·ss].
type rowFunc func(do, ds, so, ss, n int)

func numToNum[D, S number](d []D, s []S) rowFunc {
	return func(do, ds, so, ss, n int) {
		if ds == 1 && ss == 1 {
			dd, sr := d[do:do+n], s[so:so+n]
			for i, x := range sr {
				dd[i] = D(x)
			}
			return
		}
		for range n {
			d[do] = D(s[so])
			do += ds
			so += ss
		}
	}
}

func rawCopy[T rawBits](d, s []T) rowFunc {
	return func(do, ds, so, ss, n int) {
		if ds == 1 && ss == 1 {
			copy(d[do:do+n], s[so:so+n])
			return
		}
		for range n {
			d[do] = s[so]
			do += ds
			so += ss
		}
	}
}

func numToBool[S number](d []uint8, s []S) rowFunc {
	return func(do, ds, so, ss, n int) {
		for range n {
			var b uint8
			if s[so] != 0 {
				b = 1
			}
			d[do] = b
			do += ds
			so += ss
		}
	}
}

func numToHalf[S number](d []uint16, s []S, enc func(float32) uint16) rowFunc {
	return func(do, ds, so, ss, n int) {
		for range n {
			d[do] = enc(float32(s[so]))
			do += ds
			so += ss
		}
	}
}

func halfToNum[D number](d []D, s []uint16, dec func(uint16) float32) rowFunc {
	return func(do, ds, so, ss, n int) {
		for range n {
			d[do] = D(dec(s[so]))
			do += ds
			so += ss
		}
	}
}

func halfToBool(d []uint8, s []uint16, dec func(uint16) float32) rowFunc {
	return func(do, ds, so, ss, n int) {
		for range n {
			var b uint8
			if dec(s[so]) != 0 {
				b = 1
			}
			d[do] = b
			do += ds
			so += ss
		}
	}
}

func halfToHalf(d, s []uint16, dec func(uint16) float32, enc func(float32) uint16) rowFunc {
	return func(do, ds, so, ss, n int) {
		for range n {
			d[do] = enc(dec(s[so]))
			do += ds
			so += ss
		}
	}
}

// fromNum picks the converter from a numeric source to dst's dtype.
func fromNum[S number](dst backend.View, s []S) rowFunc {
	switch dst.DType {
	case backend.Float32:
		return numToNum(F32(dst), s)
	case backend.Float64:
		return numToNum(F64(dst), s)
	case backend.Int32:
		return numToNum(I32(dst), s)
	case backend.Int64:
		return numToNum(I64(dst), s)
	case backend.Uint8:
		return numToNum(U8(dst), s)
	case backend.Float16:
		return numToHalf(sliceOf[uint16](dst), s, float16.FromFloat32)
	case backend.BFloat16:
		return numToHalf(sliceOf[uint16](dst), s, float16.BFloat16FromFloat32)
	case backend.Bool:
		return numToBool(U8(dst), s)
	}
	return nil
}

// fromHalf picks the converter from a 16-bit float source to dst's dtype.
func fromHalf(dst backend.View, s []uint16, dec func(uint16) float32) rowFunc {
	switch dst.DType {
	case backend.Float32:
		return halfToNum(F32(dst), s, dec)
	case backend.Float64:
		return halfToNum(F64(dst), s, dec)
	case backend.Int32:
		return halfToNum(I32(dst), s, dec)
	case backend.Int64:
		return halfToNum(I64(dst), s, dec)
	case backend.Uint8:
		return halfToNum(U8(dst), s, dec)
	case backend.Float16:
		return halfToHalf(sliceOf[uint16](dst), s, dec, float16.FromFloat32)
	case backend.BFloat16:
		return halfToHalf(sliceOf[uint16](dst), s, dec, float16.BFloat16FromFloat32)
	case backend.Bool:
		return halfToBool(U8(dst), s, dec)
	}
	return nil
}

// converter returns the row function that copies src into dst, converting
// between their dtypes.
func converter(dst, src backend.View) rowFunc {
	if dst.DType == src.DType {
		switch dst.DType.Size() {
		case 1:
			if dst.DType == backend.Bool {
				return numToBool(U8(dst), U8(src))
			}
			return rawCopy(U8(dst), U8(src))
		case 2:
			return rawCopy(sliceOf[uint16](dst), sliceOf[uint16](src))
		case 4:
			return rawCopy(sliceOf[uint32](dst), sliceOf[uint32](src))
		case 8:
			return rawCopy(sliceOf[uint64](dst), sliceOf[uint64](src))
		}
		return nil
	}
	switch src.DType {
	case backend.Float32:
		return fromNum(dst, F32(src))
	case backend.Float64:
		return fromNum(dst, F64(src))
	case backend.Int32:
		return fromNum(dst, I32(src))
	case backend.Int64:
		return fromNum(dst, I64(src))
	case backend.Uint8, backend.Bool:
		return fromNum(dst, U8(src))
	case backend.Float16:
		return fromHalf(dst, sliceOf[uint16](src), float16.ToFloat32)
	case backend.BFloat16:
		return fromHalf(dst, sliceOf[uint16](src), float16.BFloat16ToFloat32)
	}
	return nil
}

// span returns the first element index and one past the last element index
// that v addresses (equal when v is empty).
func span(v backend.View) (lo, hi int) {
	if v.NumElements() == 0 {
		return v.Offset, v.Offset
	}
	hi = v.Offset + 1
	for i, d := range v.Shape {
		hi += (d - 1) * v.Strides[i]
	}
	return v.Offset, hi
}

// checkView reports an error when v's strides do not match its shape or it
// reaches outside its buffer.
func checkView(kernel, name string, v backend.View) error {
	if v.Buf == nil {
		return fmt.Errorf("cpu: %s: %s has no buffer", kernel, name)
	}
	if len(v.Strides) != len(v.Shape) {
		return fmt.Errorf("cpu: %s: %s has shape %v but %d strides", kernel, name, v.Shape, len(v.Strides))
	}
	if v.DType.Size() == 0 {
		return fmt.Errorf("cpu: %s: %s has dtype %v", kernel, name, v.DType)
	}
	for i, s := range v.Strides {
		if s < 0 || v.Shape[i] < 0 {
			return fmt.Errorf("cpu: %s: %s has shape %v, strides %v", kernel, name, v.Shape, v.Strides)
		}
	}
	lo, hi := span(v)
	if lo < 0 || hi*v.DType.Size() > v.Buf.Size() {
		return fmt.Errorf("cpu: %s: %s (shape %v, strides %v, offset %d) overruns its %d-byte buffer", kernel, name, v.Shape, v.Strides, v.Offset, v.Buf.Size())
	}
	return nil
}

// checkHostView is checkView for kernels that need v in host memory.
func checkHostView(kernel, name string, v backend.View) error {
	if err := checkView(kernel, name, v); err != nil {
		return err
	}
	if _, ok := v.Buf.(backend.HostBuffer); !ok {
		return fmt.Errorf("cpu: %s: %s lives on %s, not in host memory", kernel, name, v.Buf.Backend().Name())
	}
	return nil
}

// staged moves a view of a buffer on another device into host memory: the
// bytes it spans are read into a fresh buffer and the returned view
// addresses them there.
func (c *Backend) staged(v backend.View, load bool) (backend.View, error) {
	lo, hi := span(v)
	es := v.DType.Size()
	host := &Buffer{owner: c, data: make([]byte, max(hi-lo, 1)*es), class: -1}
	if load && hi > lo {
		if err := v.Buf.Backend().Read(host.data[:(hi-lo)*es], v.Buf, lo*es); err != nil {
			return v, err
		}
	}
	v.Buf = host
	v.Offset -= lo
	return v, nil
}

// Copy implements backend.Backend. Conversions: floats to integers truncate
// toward zero (values outside the integer's range give unspecified
// results); integers to floats round to nearest; any dtype to Bool is x ≠ 0
// (NaN is true); Float16 and BFloat16 round to nearest even, with overflow
// to ±Inf. Either view may live on another backend: the bytes it spans are
// staged through host memory.
func (c *Backend) Copy(dst, src backend.View) error {
	if err := checkView("copy", "dst", dst); err != nil {
		return err
	}
	if err := checkView("copy", "src", src); err != nil {
		return err
	}
	if !dst.Shape.Equal(src.Shape) {
		return fmt.Errorf("cpu: copy: dst shape %v, src shape %v", dst.Shape, src.Shape)
	}
	if dst.NumElements() == 0 {
		return nil
	}
	remoteDst := false
	if _, ok := src.Buf.(backend.HostBuffer); !ok {
		var err error
		if src, err = c.staged(src, true); err != nil {
			return fmt.Errorf("cpu: copy: read source: %w", err)
		}
	}
	orig := dst
	if _, ok := dst.Buf.(backend.HostBuffer); !ok {
		remoteDst = true
		var err error
		if dst, err = c.staged(dst, !dst.IsContiguous()); err != nil {
			return fmt.Errorf("cpu: copy: read destination: %w", err)
		}
	}
	f := converter(dst, src)
	if f == nil {
		return fmt.Errorf("cpu: copy: %v to %v not supported", src.DType, dst.DType)
	}
	l := newLayout(dst.Shape, dst, src)
	_, step := l.inner()
	walk(&l, func(lo, hi int) {
		runs(&l, lo, hi, func(off [maxOperands]int, n int) { f(off[0], step[0], off[1], step[1], n) })
	})
	if remoteDst {
		lo, hi := span(orig)
		es := dst.DType.Size()
		return orig.Buf.Backend().Write(orig.Buf, lo*es, bytesOf(dst)[:(hi-lo)*es])
	}
	return nil
}

func fillRow[T any](d []T, v T) func(off [maxOperands]int, n int, step int) {
	return func(off [maxOperands]int, n int, step int) {
		o := off[0]
		if step == 1 {
			r := d[o : o+n]
			for i := range r {
				r[i] = v
			}
			return
		}
		for range n {
			d[o] = v
			o += step
		}
	}
}

// Fill implements backend.Backend. value converts as Copy converts a
// float64.
func (c *Backend) Fill(dst backend.View, value float64) error {
	if err := checkHostView("fill", "dst", dst); err != nil {
		return err
	}
	var f func(off [maxOperands]int, n int, step int)
	switch dst.DType {
	case backend.Float32:
		f = fillRow(F32(dst), float32(value))
	case backend.Float64:
		f = fillRow(F64(dst), value)
	case backend.Float16:
		f = fillRow(sliceOf[uint16](dst), float16.FromFloat32(float32(value)))
	case backend.BFloat16:
		f = fillRow(sliceOf[uint16](dst), float16.BFloat16FromFloat32(float32(value)))
	case backend.Int32:
		f = fillRow(I32(dst), int32(value))
	case backend.Int64:
		f = fillRow(I64(dst), int64(value))
	case backend.Uint8:
		f = fillRow(U8(dst), uint8(value))
	case backend.Bool:
		var b uint8
		if value != 0 {
			b = 1
		}
		f = fillRow(U8(dst), b)
	default:
		return fmt.Errorf("cpu: fill: dtype %v", dst.DType)
	}
	l := newLayout(dst.Shape, dst)
	_, step := l.inner()
	walk(&l, func(lo, hi int) {
		runs(&l, lo, hi, func(off [maxOperands]int, n int) { f(off, n, step[0]) })
	})
	return nil
}
