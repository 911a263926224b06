package backend

import "fmt"

// NormGroups returns how many groups of normSize elements a layer norm of
// a tensor of the given shape normalises; normSize must be the product of
// some trailing axes of the shape.
func NormGroups(shape Shape, normSize int) (int, error) {
	if normSize <= 0 {
		return 0, fmt.Errorf("normSize %d must be positive", normSize)
	}
	acc := 1
	for i := len(shape) - 1; i >= 0 && acc < normSize; i-- {
		acc *= shape[i]
	}
	if acc != normSize {
		return 0, fmt.Errorf("normSize %d is not the size of trailing axes of shape %v", normSize, shape)
	}
	return shape.NumElements() / normSize, nil
}

// layerNormInput checks x and normSize, which must be the product of some
// trailing axes of x, and returns the number of groups.
func layerNormInput(kernel string, check OperandCheck, x View, normSize int) (rows int, err error) {
	if err := CheckFloat(kernel, x.DType); err != nil {
		return 0, err
	}
	if err := CheckDense(kernel, check, "x", x, x.DType, nil); err != nil {
		return 0, err
	}
	rows, err = NormGroups(x.Shape, normSize)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", kernel, err)
	}
	return rows, nil
}

// CheckLayerNorm checks the operands of Backend.LayerNorm and returns the
// number of groups: x float and contiguous, y like x, and weight and bias
// (normSize elements each) and mean and rstd (one per group) absent or
// contiguous in x's dtype.
func CheckLayerNorm(kernel string, check OperandCheck, y, mean, rstd, x, weight, bias View, normSize int) (rows int, err error) {
	rows, err = layerNormInput(kernel, check, x, normSize)
	if err != nil {
		return 0, err
	}
	dt := x.DType
	if err := CheckDense(kernel, check, "y", y, dt, x.Shape); err != nil {
		return 0, err
	}
	if err := checkVectors(kernel, check, dt, normSize, namedView{"weight", weight}, namedView{"bias", bias}); err != nil {
		return 0, err
	}
	return rows, checkVectors(kernel, check, dt, rows, namedView{"mean", mean}, namedView{"rstd", rstd})
}

// CheckLayerNormBackward checks the operands of Backend.LayerNormBackward
// and returns the number of groups: x float and contiguous, dy like x, dx
// absent or like x, mean and rstd (one per group) present, and weight,
// dweight and dbias (normSize elements each) absent or contiguous in x's
// dtype.
func CheckLayerNormBackward(kernel string, check OperandCheck, dx, dweight, dbias, dy, x, weight, mean, rstd View, normSize int) (rows int, err error) {
	rows, err = layerNormInput(kernel, check, x, normSize)
	if err != nil {
		return 0, err
	}
	dt := x.DType
	if err := CheckDense(kernel, check, "dy", dy, dt, x.Shape); err != nil {
		return 0, err
	}
	if !dx.IsZero() {
		if err := CheckDense(kernel, check, "dx", dx, dt, x.Shape); err != nil {
			return 0, err
		}
	}
	if mean.IsZero() || rstd.IsZero() {
		return 0, fmt.Errorf("%s: mean and rstd are required", kernel)
	}
	if err := checkVectors(kernel, check, dt, normSize, namedView{"weight", weight}, namedView{"dweight", dweight}, namedView{"dbias", dbias}); err != nil {
		return 0, err
	}
	return rows, checkVectors(kernel, check, dt, rows, namedView{"mean", mean}, namedView{"rstd", rstd})
}
