//go:build !purego

package cpu

//go:noescape
func sumColumnsAVX512(x []float32, s, c []float64)

//go:noescape
func sumColumnsAVX2(x []float32, s, c []float64)

//go:noescape
func sumColumns4AVX512(x []float32, stride int, s, c []float64)

//go:noescape
func sumLanesAVX512(x []float32, lanes *[16]float64)

//go:noescape
func sumLanesAVX2(x []float32, lanes *[8]float64)

// sumColumnsVec folds x[k] into the compensated sums s[k] + c[k] for a
// leading part of the columns with the vector loop of the kernel path, with
// the same arithmetic as sweepColumns, and returns that part's length.
func sumColumnsVec(x []float32, s, c []float64) int {
	x, c = x[:len(s)], c[:len(s)]
	switch activeVec() {
	case vecAVX512:
		sumColumnsAVX512(x, s, c)
		return len(s) &^ 7
	case vecAVX2:
		sumColumnsAVX2(x, s, c)
		return len(s) &^ 3
	}
	return 0
}

// hasColumns4Vec reports whether sumColumns4Vec has a kernel here.
func hasColumns4Vec() bool { return activeVec() == vecAVX512 }

// sumColumns4Vec folds four rows, x[r·stride:][:len(s)] for r = 0…3 in
// that order, into the compensated sums of a leading part of the columns,
// as four calls of sumColumnsVec would, and returns that part's length (0
// where the CPU has no AVX-512: the caller then folds row by row).
func sumColumns4Vec(x []float32, stride int, s, c []float64) int {
	if activeVec() != vecAVX512 || stride < len(s) || len(x) < 3*stride+len(s) {
		return 0
	}
	c = c[:len(s)]
	sumColumns4AVX512(x, stride, s, c)
	return len(s) &^ 7
}

// sumRunVec adds a leading part of x to a with the vector loop of the
// kernel path and returns that part's length: element i goes to lane
// i mod 8 (4 for AVX2), each lane a compensated sum, and the lanes are
// merged into a in order.
func sumRunVec(x []float32, a *acc) int {
	switch activeVec() {
	case vecAVX512:
		var l [16]float64
		sumLanesAVX512(x, &l)
		for i := range 8 {
			a.merge(passSum, acc{s: l[i], c: l[8+i]})
		}
		return len(x) &^ 7
	case vecAVX2:
		var l [8]float64
		sumLanesAVX2(x, &l)
		for i := range 4 {
			a.merge(passSum, acc{s: l[i], c: l[4+i]})
		}
		return len(x) &^ 3
	}
	return 0
}
