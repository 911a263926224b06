package dist

import "github.com/flockml/flock/backend"

// Reduction kernels shared by the TCP and shared-memory paths: plain Go,
// unrolled by four with the slices re-sliced to the block so that the
// compiler drops the bounds checks.

type reduceElem interface {
	float32 | float64 | int32 | int64
}

// reduceBlock is the number of bytes reduced at a time by reduceMany, small
// enough that the output block stays in the L1 cache while every input is
// folded into it.
const reduceBlock = 8 << 10

// reduce2 sets out[i] = a[i] ⊕ b[i]; out may alias a or b.
func reduce2[T reduceElem](op ReduceOp, out, a, b []T) {
	n := len(out)
	a, b = a[:n], b[:n]
	i := 0
	switch op {
	case Sum, Avg:
		for ; i+4 <= n; i += 4 {
			o, x, y := out[i:i+4:i+4], a[i:i+4:i+4], b[i:i+4:i+4]
			o[0], o[1], o[2], o[3] = x[0]+y[0], x[1]+y[1], x[2]+y[2], x[3]+y[3]
		}
		for ; i < n; i++ {
			out[i] = a[i] + b[i]
		}
	case Max:
		for ; i < n; i++ {
			out[i] = max(a[i], b[i])
		}
	case Min:
		for ; i < n; i++ {
			out[i] = min(a[i], b[i])
		}
	}
}

// reduce3 sets out[i] = (a[i] ⊕ b[i]) ⊕ c[i]; out may alias a.
func reduce3[T reduceElem](op ReduceOp, out, a, b, c []T) {
	n := len(out)
	a, b, c = a[:n], b[:n], c[:n]
	i := 0
	switch op {
	case Sum, Avg:
		for ; i+4 <= n; i += 4 {
			o, x, y, z := out[i:i+4:i+4], a[i:i+4:i+4], b[i:i+4:i+4], c[i:i+4:i+4]
			o[0], o[1], o[2], o[3] = x[0]+y[0]+z[0], x[1]+y[1]+z[1], x[2]+y[2]+z[2], x[3]+y[3]+z[3]
		}
		for ; i < n; i++ {
			out[i] = a[i] + b[i] + c[i]
		}
	case Max:
		for ; i < n; i++ {
			out[i] = max(max(a[i], b[i]), c[i])
		}
	case Min:
		for ; i < n; i++ {
			out[i] = min(min(a[i], b[i]), c[i])
		}
	}
}

// reduce4 sets out[i] = ((a[i] ⊕ b[i]) ⊕ c[i]) ⊕ d[i]; out may alias a.
func reduce4[T reduceElem](op ReduceOp, out, a, b, c, d []T) {
	n := len(out)
	a, b, c, d = a[:n], b[:n], c[:n], d[:n]
	i := 0
	switch op {
	case Sum, Avg:
		for ; i+4 <= n; i += 4 {
			o, x, y, z, w := out[i:i+4:i+4], a[i:i+4:i+4], b[i:i+4:i+4], c[i:i+4:i+4], d[i:i+4:i+4]
			o[0] = x[0] + y[0] + z[0] + w[0]
			o[1] = x[1] + y[1] + z[1] + w[1]
			o[2] = x[2] + y[2] + z[2] + w[2]
			o[3] = x[3] + y[3] + z[3] + w[3]
		}
		for ; i < n; i++ {
			out[i] = a[i] + b[i] + c[i] + d[i]
		}
	case Max:
		for ; i < n; i++ {
			out[i] = max(max(max(a[i], b[i]), c[i]), d[i])
		}
	case Min:
		for ; i < n; i++ {
			out[i] = min(min(min(a[i], b[i]), c[i]), d[i])
		}
	}
}

// reduceFold sets out = ins[0] ⊕ ins[1] ⊕ … ⊕ ins[k−1], folded left to
// right, up to three inputs per pass; ins[0] may alias out, no other input
// may. len(ins) ≥ 2.
func reduceFold[T reduceElem](op ReduceOp, out []T, ins [][]byte) {
	at := func(i int) []T { return tcpAs[T](ins[i]) }
	k := len(ins)
	var i int
	switch {
	case k == 2:
		reduce2(op, out, at(0), at(1))
		return
	case k == 3:
		reduce3(op, out, at(0), at(1), at(2))
		return
	default:
		reduce4(op, out, at(0), at(1), at(2), at(3))
		i = 4
	}
	for ; i < k; i += 3 {
		switch k - i {
		case 1:
			reduce2(op, out, out, at(i))
		case 2:
			reduce3(op, out, out, at(i), at(i+1))
		default:
			reduce4(op, out, out, at(i), at(i+1), at(i+2))
		}
	}
}

// scaleBy divides the elements of b by n.
//
// Every backend divides through it, so that their averages agree bit for
// bit. For n a power of two it multiplies by 1/n, which is exact and so
// gives the quotient's very bits at a fraction of a division's cost (two
// ranks' averages are twice as fast).
func scaleBy[T float32 | float64](b []T, n int) {
	if n > 0 && n&(n-1) == 0 {
		r := 1 / T(n)
		for i := range b {
			b[i] *= r
		}
		return
	}
	d := T(n)
	for i := range b {
		b[i] /= d
	}
}

// reduceMany sets out (bytes of dtype dt) to the fold of ins, each as long
// as out, block by block; for Avg it divides by avg; when pub is not nil
// each finished block is also copied into pub. ins[0] may alias out.
func reduceMany(dt uint8, op ReduceOp, out, pub []byte, ins [][]byte, blk [][]byte, avg int) {
	blk = blk[:len(ins)]
	for off := 0; off < len(out); off += reduceBlock {
		end := min(off+reduceBlock, len(out))
		for i, in := range ins {
			blk[i] = in[off:end]
		}
		o := out[off:end]
		switch backend.DType(dt) {
		case backend.Float32:
			v := tcpAs[float32](o)
			reduceFold(op, v, blk)
			if op == Avg {
				scaleBy(v, avg)
			}
		case backend.Float64:
			v := tcpAs[float64](o)
			reduceFold(op, v, blk)
			if op == Avg {
				scaleBy(v, avg)
			}
		case backend.Int32:
			reduceFold(op, tcpAs[int32](o), blk)
		case backend.Int64:
			reduceFold(op, tcpAs[int64](o), blk)
		}
		if pub != nil {
			copy(pub[off:end], o)
		}
	}
	for i := range blk {
		blk[i] = nil
	}
}
