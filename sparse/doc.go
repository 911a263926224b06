// Package sparse is JointSpar: joint sparsification of computation and
// communication in large-batch training (after Liu & Mozafari, "Large
// Scale Training with JointSpar", ICML 2022). Each step computes, sends
// and applies the gradients of a sampled subset of layers only, rescaled
// so that the update stays an unbiased estimate of the full one; with LARS
// as the optimizer it is JointSpar-LARS.
//
// # Our design
//
// The paper's full algorithm text was not available to us; this package
// implements the design below, which follows the paper's idea:
//
//  1. A layer is the group of parameters of one module (a convolution's
//     weight and bias, a batch norm's scale and shift). Each step layer ℓ
//     is drawn independently with probability p_ℓ, Σ_ℓ p_ℓ = budget·L
//     (the expected number of layers). The draw is a function of (seed,
//     step): every worker draws the same layers, and a resumed run draws
//     as the uninterrupted one. Options.PerWorker draws per worker
//     instead, and Options.Balanced deals the layers out to the workers
//     from one shared draw: layer ℓ to ⌊K·p_ℓ⌋ or ⌈K·p_ℓ⌉ of the K
//     workers (E = K·p_ℓ), taken in turn from a random permutation of
//     them, so that each worker still draws ℓ with probability p_ℓ and
//     gets as many layers as the others.
//  2. The layers not drawn have their gradients switched off for the step
//     (autograd.Var.SetRequiresGrad), so backward skips their weight
//     gradients, and every gradient below the lowest layer drawn.
//  3. The drawn layers' gradients are averaged over the workers in one
//     all-reduce of a flat buffer holding just them, and their updates are
//     scaled by 1/p_ℓ: E[1{ℓ drawn}·d_ℓ/p_ℓ] = d_ℓ. The optimizer scales
//     the update direction (optim.UpdateScaler: SGD's g + λ·w, LARS's
//     trust-ratio-scaled one) before its momentum, so that weight decay
//     and LARS are unbiased too — LARS's trust ratio would cancel a scaled
//     gradient; optimizers without update scales (AdamW) get the gradient
//     scaled instead. Layers not drawn get no update at all (no momentum,
//     no weight decay). With per-worker draws the all-reduce is dense over
//     every layer (zeros where a worker did not draw it, a count per
//     layer): computation is saved, bytes are not. With balanced draws
//     every worker knows who holds each layer: its n holders split it into
//     n chunks, send each chunk to the holder that owns it, which averages
//     it and sends it on to every other worker (dist.Exchange, two rounds
//     of one message per pair of workers). A layer then costs its size
//     times n − 1 + K − 1 against a ring all-reduce's 2(K − 1): the same
//     when every worker holds it, less otherwise. Its update is scaled by
//     (n/K)/p_ℓ, which is 1 up to the rounding of K·p_ℓ.
//  4. p_ℓ ∝ the estimated ‖g_ℓ‖, clipped to [p_min, 1] and renormalised
//     to the budget (Probabilities: the variance-minimising choice for a
//     given budget; p_min is 0.05 by default, and 1/K with balanced draws,
//     so that every layer goes to a worker or more). A layer's estimate is a moving average of the norms
//     of its averaged gradient on the steps that drew it; layers never
//     drawn take the mean of the known estimates.
//  5. LARS's trust ratio ‖w_ℓ‖/‖g_ℓ‖ is computed on the averaged gradient
//     and the resulting update scaled by 1/p_ℓ. (Taking the trust ratio of
//     the rescaled gradient g_ℓ/p_ℓ, as a literal reading of the design
//     would, cancels the rescaling: the expected update shrinks to p_ℓ
//     times LARS's, and training slows in proportion.) The parameters LARS
//     does not adapt — biases and normalisation parameters, stepped with
//     the plain gradient at LARS's rate (optim.Adaptive) — are updated
//     unscaled when their layer is drawn: at the rates LARS runs at, a
//     plain step of η·g/p_ℓ diverges (on Fashion-MNIST's CNN at lr 5,
//     rescaling them took JointSpar-LARS from 81.6% to 38.5%). Their
//     expected update is p_ℓ times LARS's. With LARS adapting every
//     parameter (train.Config.LARSAdaptAll, flock train
//     --lars-adapt-all: the biases and normalisation parameters get trust
//     ratios of their own, without weight decay) every drawn parameter's
//     update is scaled and the whole update is unbiased; JointSpar-LARS
//     trains markedly better so (Fashion-MNIST's CNN, 10 epochs, 3 seeds:
//     82.5% against 79.1%), and LARS a little better too. JointSpar-LARS
//     still trains less per epoch than LARS with a shared draw, whose
//     left-out layers do not move at all (Fashion-MNIST, 4 workers × 1024,
//     each at its best rate: ResNet-20, 5 epochs, 85.7% against LARS's
//     87.5%; the CNN, 10 epochs, 82.8% against 90.4%). Per-worker draws
//     average a layer over the workers that drew it, K times less
//     sampling variance on K workers, but save no bytes (the CNN: 88.2%).
//     Balanced draws, whose sampling variance is only that of rounding
//     K·p_ℓ, come within 1 point of LARS on every seed and send fewer
//     bytes (ResNet-20: 86.9% against 87.5%, 0.79–0.84 of its bytes; the
//     CNN: 89.9% against 90.4% at 10 epochs, 0.69–0.74 of its bytes,
//     91.7% against 91.5% at 40).
//
// With budget 1 every layer is drawn with p = 1 and JointSpar is plain
// data-parallel SGD (or LARS). Probabilities and Variance expose the
// sampling maths; JointSpar is the train.Strategy.
package sparse
