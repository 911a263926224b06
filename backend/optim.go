package backend

// Fused optimizer updates are optional: a backend that can update a
// parameter, its gradient's consequences and the optimizer's state in one
// pass over memory implements FusedSGD or FusedAdamW, and callers find out
// with a type assertion, composing the update from elementwise kernels
// otherwise. The arithmetic may be carried out in float64 and rounded once
// per stored value, so results agree with a composition of float32 kernels
// to within a few units in the last place, not bit for bit.

// SGDParams are the settings of one SGD update, with torch.optim.SGD's
// meaning: rate LR, momentum μ, dampening τ, weight decay λ.
type SGDParams struct {
	LR, Momentum, Dampening, WeightDecay float64
	Nesterov                             bool
	// First marks the first step, on which the momentum buffer is set to
	// the (decayed) gradient instead of being updated.
	First bool
}

// FusedSGD is implemented by backends that update a parameter by SGD in one
// pass.
type FusedSGD interface {
	// SGDStep updates param (and buf) in place from grad:
	//
	//	d ← g + λ·p
	//	b ← d on the first step, else b ← μ·b + (1−τ)·d     (when μ ≠ 0)
	//	d ← d + μ·b (Nesterov) or d ← b                    (when μ ≠ 0)
	//	p ← p − lr·d
	//
	// param, grad and buf are contiguous views of one float dtype and
	// shape; buf is the zero View when the momentum is 0. grad is not
	// written.
	SGDStep(param, grad, buf View, p SGDParams) error
}

// AdamWParams are the settings of one AdamW update, with
// torch.optim.AdamW's meaning; Step counts from 1.
type AdamWParams struct {
	LR, Beta1, Beta2, Eps, WeightDecay float64
	Step                               int
}

// FusedAdamW is implemented by backends that update a parameter by AdamW in
// one pass.
type FusedAdamW interface {
	// AdamWStep updates param and the moments m and v in place from grad
	// (Loshchilov & Hutter, decoupled weight decay), at step t:
	//
	//	p ← p·(1 − lr·λ)
	//	m ← β₁·m + (1−β₁)·g
	//	v ← β₂·v + (1−β₂)·g²
	//	p ← p − lr/(1−β₁ᵗ) · m / (√v/√(1−β₂ᵗ) + ε)
	//
	// All four are contiguous views of one float dtype and shape; grad is
	// not written.
	AdamWStep(param, grad, m, v View, p AdamWParams) error
}
