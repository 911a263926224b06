// Package optim updates parameters from their gradients: SGD (momentum,
// dampening, Nesterov, weight decay), AdamW (decoupled decay, AMSGrad) and
// LARS (layer-wise trust ratios for large batches), with PyTorch-style
// parameter groups, gradient clipping by global norm, and learning-rate
// schedules.
//
// Each optimizer documents its update as equations; SGD and AdamW agree with
// torch.optim step for step (tested against PyTorch's own results). A
// Schedule is a pure function from step to rate, so that strategies which
// look ahead (QSR's sync period grows as 1/η²) can query any step. An
// optimizer's State holds its buffers for checkpoints; LoadState restores
// them. Where the parameters' device has fused updates
// (backend.FusedSGD, backend.FusedAdamW), SGD and AdamW (without AMSGrad)
// update each parameter and its state in one pass over memory; elsewhere
// they compose the update from elementwise ops.
//
// A training step reads:
//
//	loss.Backward()
//	optim.ClipGradNorm(params, 1.0)
//	opt.SetLR(sched.LR(step))
//	opt.Step()
//	opt.ZeroGrad()
package optim
