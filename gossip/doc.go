// Package gossip is flock's decentralized training: workers that average
// with a few neighbours at each iteration instead of all-reducing with
// everyone: DmSGD over exponential graphs (Ying et al., 2021) and Swarm
// SGD (Nadiradze et al., 2021). Its foundation is the topologies:
// who mixes with whom, with which weights, and how fast that mixes.
//
// # Mixing
//
// A Topology on n nodes gives, for each iteration k, a mixing matrix W(k)
// and every node takes the weighted average
//
//	x_i ← Σ_j w_ij(k) x_j
//
// W(k) is doubly stochastic: w_ij ≥ 0, W1 = 1 (nodes that agree stay
// agreed) and 1ᵀW = 1ᵀ (mixing keeps the average x̄ = 1ᵀx/n). How fast
// the nodes approach their average is measured by
//
//	ρ = ‖W − 11ᵀ/n‖₂    (the largest singular value),   ‖Wx − x̄1‖ ≤ ρ ‖x − x̄1‖
//
// Rho computes it with gonum's SVD. ρ = 0 is exact averaging (Full), ρ
// near 1 slow mixing (a long ring: 1 − O(1/n²)). For a time-varying
// topology the product of consecutive matrices is what matters; Product
// returns W(k+m−1) ⋯ W(k).
//
// Node i's row and column of W(k) are In(k, i) and Out(k, i): the self
// weight w_ii, returned apart, and the other nodes it receives from (w_ij)
// and sends to (w_ji), ascending by node. A node's degree is the length of
// these lists. Matrix assembles W(k) as a *mat.Dense.
//
// # Topologies
//
// New builds them by name (flock topology prints them); τ = ⌈log₂ n⌉:
//
//	ring           self and i ± 1, 1/3 each (n = 2: ½ and ½; n = 1: itself)
//	mesh, torus    2-D grid of GridShape(n) (the most square rows × cols), Metropolis–Hastings
//	               weights w_ij = 1/(1 + max(d_i, d_j)), w_ii = 1 − Σ_j w_ij; torus wraps around
//	full           1/n everywhere
//	exp            static exponential: i receives from i + 2^j, j < τ, all τ+1 weights 1/(τ+1);
//	               circulant, not symmetric; ρ = 1 − 2/(1+τ) for even n
//	sym-exp        i ± 2^j, j < τ, uniform over the distinct neighbours and self; symmetric
//	one-peer-exp   time-varying, period τ: i averages ½ itself and ½ node i + 2^(k mod τ);
//	               for n a power of two τ consecutive matrices give exactly 11ᵀ/n
//	matching       random maximal matchings of a regular base graph (ring, torus, sym-exp,
//	               full), drawn from (seed, k): pairs average ½ and ½ (Swarm SGD's pairwise gossip)
//
// The exponential graphs are those of Ying, Yuan, Chen, Hu, Pan and Yin
// (2021), "Exponential Graph is Provably Efficient for Decentralized Deep
// Training": a node talks to τ peers (static) or one (one-peer), yet ρ
// is 1 − Θ(1/log n) where the ring's is 1 − Θ(1/n²), and one-peer
// iterations average exactly every τ steps on 2^τ nodes.
// Metropolis–Hastings weights are from Xiao and Boyd (2004), "Fast linear
// iterations for distributed averaging". Random matchings are the
// interactions of Swarm SGD (Nadiradze, Sabour, Davies, Li and Alistarh,
// 2021, "Asynchronous Decentralized SGD with Quantized and Local
// Updates"), drawn so that every worker knows the pairs of iteration k
// without asking anyone.
//
// # Training
//
// DmSGD is decentralized momentum SGD (adapt-then-combine) as a
// train.Strategy: every worker takes its own momentum step, then averages
// its parameters with its in-neighbours' at iteration k
// (dist.NeighborAllReduce, over any transport's Send and Recv), every
// step or every J steps; momentum stays local. flock train runs it with
// --strategy dmsgd --topology KIND.
//
// Swarm is Swarm SGD, the pairwise asynchronous form: a worker takes H
// local steps (fixed or geometric), then averages with one partner drawn
// among its neighbours — blocking (both end at their mean) or
// non-blocking (the initiator goes on computing and applies the answer on
// top of its pending updates) — optionally exchanging models with the
// lattice Quantizer: round(x/s) mod 2^bits per coordinate, decoded
// against the receiver's own copy, exact while ‖x − ref‖∞ < (2^bits −
// 1)·s/2, with a checksum that catches the coordinates that wrapped (the
// exchange is then repeated at full precision). Each pair of neighbours
// has a Comm of its own (dist.Pairs), so a partner that dies is dropped
// and the others go on. A sequential form draws one interacting pair per
// tick from a seed, for reproducible runs. flock train runs it with
// --strategy swarm --local-steps H [--non-blocking] [--quant-bits B].
package gossip
