// Package nccl is a dist.Comm over NVIDIA's NCCL, for tensors on GPUs of
// the cuda backend: the all-reduce of data-parallel training between GPUs
// in one machine or many.
//
// libnccl.so.2 is opened at run time, like the CUDA libraries (see
// backend/cuda's Open: FLOCK_CUDA_LIB_DIR, the loader's search path, the
// nvidia/nccl/lib folder of an installed PyTorch); Available says whether it
// can be. Rank 0 makes the communicator's unique id (ncclGetUniqueId) and
// publishes it in the job's rendezvous store (dist.Store); every rank reads
// it and joins with ncclCommInitRankScalable, which takes the id by pointer
// (NCCL 2.23), or ncclCommInitRank on older versions. Init does the whole
// rendezvous from a dist.Env, as dist.Init does for TCP.
//
// Each collective runs on a communication stream. Before it, an event
// recorded on the compute stream makes the communication stream wait for
// the kernels already queued (those that produced the tensor); after it, the
// compute stream waits for the collective's end, so later kernels read the
// result. The calling goroutine waits for the collective itself, polling
// ncclCommGetAsyncError: issued through a dist.Queue, an all-reduce of one
// gradient bucket overlaps the kernels of the rest of backward. Buffers a
// collective used are recorded with the allocator, so that freeing them
// early never hands their memory to a kernel while NCCL still reads it.
//
// Nothing blocks forever: past the operation's deadline (its context's, or
// Config.Timeout), or on an NCCL error, the communicator is aborted
// (ncclCommAbort) and the operation, and every later one, returns a
// *dist.OpError naming it. The other ranks, left waiting, reach their own
// deadlines or see NCCL's error, and fail the same way.
//
// NCCL has no tags: Send and Recv between two ranks match in issue order,
// and each message carries a small header (tag and size) that Recv checks.
// NewGroup uses ncclCommSplit (NCCL 2.18).
package nccl
