package nn

import (
	"strconv"

	"github.com/flockml/flock/autograd"
)

// Sequential applies its layers in order. The layers are registered as
// children named "0", "1", ..., so their parameters are named
// "0.weight", "1.bias", as in PyTorch's nn.Sequential.
type Sequential struct {
	Base
	Layers []Layer
}

// NewSequential returns a Sequential of layers, taking ownership of them.
func NewSequential(layers ...Layer) *Sequential {
	s := &Sequential{}
	for _, l := range layers {
		s.Append(l)
	}
	return s
}

// Append adds l as the last layer.
func (s *Sequential) Append(l Layer) {
	s.RegisterModule(strconv.Itoa(len(s.Layers)), l)
	s.Layers = append(s.Layers, l)
}

// Forward returns the last layer's output. Intermediate outputs are
// released as soon as the next layer has consumed them; the graph keeps
// what the backward pass needs.
func (s *Sequential) Forward(x *autograd.Var) *autograd.Var {
	if len(s.Layers) == 0 {
		return identity(x)
	}
	h := s.Layers[0].Forward(x)
	for _, l := range s.Layers[1:] {
		next := l.Forward(h)
		h.Release()
		h = next
	}
	return h
}
