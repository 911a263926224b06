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
