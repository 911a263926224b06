package autograd_test

import (
	"fmt"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

func TestSoftmaxGrad(t *testing.T) {
	cases := []struct {
		shape []int
		axis  int
	}{
		{[]int{3, 5}, -1},
		{[]int{3, 5}, 0},
		{[]int{2, 3, 4}, 1},
		{[]int{7}, 0},
		{[]int{2, 1, 3}, 1},
	}
	var gc []gradCase
	for i, c := range cases {
		gc = append(gc,
			gradCase{
				name:   fmt.Sprintf("softmax %v axis %d", c.shape, c.axis),
				inputs: []*tensor.Tensor{normal(uint64(i+1), c.shape...)},
				f:      func(xs []*autograd.Var) *autograd.Var { return autograd.Softmax(xs[0], c.axis) },
			},
			gradCase{
				name:   fmt.Sprintf("log-softmax %v axis %d", c.shape, c.axis),
				inputs: []*tensor.Tensor{normal(uint64(i+20), c.shape...)},
				f:      func(xs []*autograd.Var) *autograd.Var { return autograd.LogSoftmax(xs[0], c.axis) },
			})
	}
	runGradCases(t, gc)
}
