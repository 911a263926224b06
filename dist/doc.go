// Package dist is flock's communication layer: the collectives and messages
// through which the workers of a distributed job (data parallel, Local SGD,
// gossip, Swarm, JointSpar) exchange tensors.
//
// # Model
//
// A job has Size ranks, numbered 0 … Size−1; each holds a [Comm]. A
// collective is called by every rank, in the same order, with tensors of the
// same dtype and element count, and works in place on contiguous tensors
// where the Comm wants them: host tensors, or, for a [Placed] Comm
// (dist/nccl's), tensors on its device. [DeviceOf] says which; strategies
// allocate their communication buffers there and copy between them and a
// model on another device (a GPU's, with a host transport) through
// tensor's cross-device copy. For a ReduceOp ⊕ (Sum, Avg = Sum/Size, Max, Min) and rank r's
// tensor xᵣ of n elements:
//
//	AllReduce(x, ⊕)       xᵣ ← x₀ ⊕ x₁ ⊕ … ⊕ x_{Size−1}            on every rank
//	ReduceScatter(d, s, ⊕) dᵣ ← (s₀ ⊕ … ⊕ s_{Size−1})[r·n, (r+1)·n)  s has Size·n elements
//	AllGather(d, s)       dᵣ[j·n, (j+1)·n) ← sⱼ                     d has Size·n elements
//	Broadcast(x, root)    xᵣ ← x_root
//	Barrier()             returns once every rank has entered it
//
// Send and Recv move one tensor from one rank to another, matched by a tag;
// messages between two ranks with one tag arrive in the order sent. NewGroup
// makes a Comm over a subset of the ranks (renumbered 0 … len−1) for
// hierarchical schemes; every rank of the parent calls it, non-members get
// nil. NeighborAllReduce averages a tensor with chosen peers' by weight
// (t ← w_self·t + Σ_j w_j·t_j), built on Send and Recv so that it runs on
// every transport: decentralized training's gossip step.
//
// Float32 and float64 take every ReduceOp; int32 and int64 take Sum, Max and
// Min. Max and Min propagate NaN.
//
// # Ordering and overlap
//
// One Comm runs one collective at a time: the ranks agree on what the k-th
// collective is by counting. To compute while communicating, issue the
// operations through a [Queue]: it runs them in issue order on its own
// goroutine and returns a [Work] handle to Wait on. Data parallelism issues
// the all-reduce of each gradient bucket as soon as backward has produced it
// and waits for all of them before the optimizer step.
//
// # Failure
//
// Nothing blocks forever. Every operation takes a context; without a
// deadline it is bounded by the job's timeout ([InitOptions].Timeout, else
// FLOCK_TIMEOUT, else [DefaultTimeout]). When a peer dies, closes its
// Comm, breaks its connection or stays silent past the timeout, every
// pending and later operation of the other ranks returns an [*OpError]
// naming the operation and that peer's rank, and the Comm stays broken: a
// job restarts from a checkpoint rather than continuing with a rank missing.
// Mismatched arguments between ranks (sizes, dtypes, roots) are errors;
// arguments that are wrong on their face (a nil or non-contiguous tensor, a
// rank out of range) are programmer errors and panic.
//
// # Backends
//
// [NewLocal] connects K ranks inside one process, one goroutine each: the
// way to simulate K workers on one machine and to test strategies. Its
// collectives move data straight between the ranks' tensors with no
// staging copies.
//
// DialTCP connects the processes of a job over TCP: a full mesh of
// persistent connections, each authenticated by an HMAC challenge–response
// over the job token (the token itself is never sent), ring all-reduce
// (reduce-scatter then all-gather, pipelined over chunks) for large tensors
// and recursive doubling for small ones.
//
// When every rank runs on one host, DialTCP moves the world communicator's
// collectives through shared memory instead: each rank maps a file of
// /dev/shm (mode 0600, a random name exchanged only over the authenticated
// connections, unlinked once every rank has mapped it), reduces its chunk
// reading its peers' contributions straight from their buffers, then copies
// the others' reduced chunks. Point-to-point messages, groups and failure
// detection stay on TCP. FLOCK_SHM=0 or TCPConfig.NoSharedMemory keeps
// everything on TCP.
//
// Init builds a Comm from an [Env] — the rank, world size and master address
// that torchrun, SLURM, OpenMPI or `flock run` put in the environment (see
// EnvFromOS): rank 0 serves a rendezvous key-value store at the master
// address, every rank publishes its listening address there, and all dial
// each other.
//
// # Testing a backend
//
// Package [github.com/flockml/flock/dist/commtest] checks a backend against
// the definitions above for world sizes 1–8, every dtype and ReduceOp and
// awkward sizes (0, 1, primes, not divisible by the world size), and checks
// message ordering, groups, queues, and that closed or absent ranks make the
// others fail rather than hang.
package dist
