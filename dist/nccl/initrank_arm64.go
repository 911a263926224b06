package nccl

import (
	"github.com/ebitengine/purego"
	"github.com/flockml/flock/backend/cuda"
)

// initRankByValue calls ncclCommInitRank(ncclComm_t*, int nranks,
// ncclUniqueId id, int rank). Under AAPCS64 a composite argument larger than
// 16 bytes is passed as a pointer to a copy the caller made, in the next
// integer register: so the id travels as a pointer to its bytes.
type initRankByValue struct {
	fn func(comm *uintptr, nranks int32, id *uniqueID, rank int32) int32
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
	cp := *id
	return f.fn(comm, int32(nranks), &cp, int32(rank))
}
