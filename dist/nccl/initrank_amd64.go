package nccl

import (
	"encoding/binary"

	"github.com/ebitengine/purego"
	"github.com/flockml/flock/backend/cuda"
)

// initRankByValue calls ncclCommInitRank(ncclComm_t*, int nranks,
// ncclUniqueId id, int rank), which takes the 128-byte id by value. Under
// the System V AMD64 ABI a struct of that size is passed in memory: the
// integer arguments fill rdi, rsi and rdx in order (comm, nranks, rank —
// the struct takes no register) and the struct's bytes occupy the first
// stack slots. The function is therefore called with six integer register
// arguments (three of them unused) followed by the id as sixteen 8-byte
// words, which purego places on the stack in order. Only integers cross
// into C.
type initRankByValue struct {
	fn func(comm *uintptr, nranks, rank int32, r3, r4, r5 uintptr,
		w0, w1, w2, w3, w4, w5, w6, w7, w8, w9, w10, w11, w12, w13, w14, w15 uint64) int32
}

func bindInitRank(a *api, lib *cuda.Library) error {
	p := lib.Symbol("ncclCommInitRank")
	if p == 0 {
		return (&cuda.Binder{Lib: lib, Missing: []string{"ncclCommInitRank"}}).Err()
	}
	purego.RegisterFunc(&a.ncclCommInitRank.fn, p)
	return nil
}

func (f initRankByValue) call(comm *uintptr, nranks, rank int, id *uniqueID) int32 {
	var w [16]uint64
	for i := range w {
		w[i] = binary.LittleEndian.Uint64(id[8*i:])
	}
	return f.fn(comm, int32(nranks), int32(rank), 0, 0, 0,
		w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8], w[9], w[10], w[11], w[12], w[13], w[14], w[15])
}
