package nccl

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/flockml/flock/backend/cuda"
)

// uniqueID is ncclUniqueId: 128 opaque bytes made by rank 0.
type uniqueID [128]byte

// api is the part of NCCL the communicator calls, bound at run time from
// libnccl.so.2. Only integers and pointers cross into C.
type api struct {
	lib *cuda.Library

	ncclGetVersion           func(v *int32) int32
	ncclGetUniqueId          func(id *uniqueID) int32
	ncclCommInitRankScalable func(comm *uintptr, nranks, rank, nIDs int32, ids *uniqueID, config unsafe.Pointer) int32
	ncclCommInitRank         initRankByValue
	ncclCommSplit            func(comm uintptr, color, key int32, newcomm *uintptr, config unsafe.Pointer) int32
	ncclCommFinalize         func(comm uintptr) int32
	ncclCommDestroy          func(comm uintptr) int32
	ncclCommAbort            func(comm uintptr) int32
	ncclCommGetAsyncError    func(comm uintptr, res *int32) int32
	ncclGetErrorString       func(res int32) string
	ncclGetLastError         func(comm uintptr) string
	ncclAllReduce            func(send, recv uintptr, count uint64, dt, op int32, comm, stream uintptr) int32
	ncclReduceScatter        func(send, recv uintptr, recvCount uint64, dt, op int32, comm, stream uintptr) int32
	ncclAllGather            func(send, recv uintptr, sendCount uint64, dt int32, comm, stream uintptr) int32
	ncclBroadcast            func(send, recv uintptr, count uint64, dt, root int32, comm, stream uintptr) int32
	ncclSend                 func(buf uintptr, count uint64, dt, peer int32, comm, stream uintptr) int32
	ncclRecv                 func(buf uintptr, count uint64, dt, peer int32, comm, stream uintptr) int32
	ncclGroupStart           func() int32
	ncclGroupEnd             func() int32
}

// NCCL result codes the communicator acts on.
const (
	ncclSuccess    = 0
	ncclInProgress = 7
	ncclSplitNone  = -1 // NCCL_SPLIT_NOCOLOR
)

var loaded struct {
	once sync.Once
	api  *api
	err  error
}

// load binds NCCL once per process.
func load() (*api, error) {
	loaded.once.Do(func() {
		lib, err := cuda.Open(cuda.NCCL)
		if err != nil {
			loaded.err = err
			return
		}
		a := &api{lib: lib}
		b := &cuda.Binder{Lib: lib}
		b.Bind(&a.ncclGetVersion, "ncclGetVersion")
		b.Bind(&a.ncclGetUniqueId, "ncclGetUniqueId")
		b.Bind(&a.ncclCommDestroy, "ncclCommDestroy")
		b.Bind(&a.ncclCommAbort, "ncclCommAbort")
		b.Bind(&a.ncclCommGetAsyncError, "ncclCommGetAsyncError")
		b.Bind(&a.ncclGetErrorString, "ncclGetErrorString")
		b.Bind(&a.ncclAllReduce, "ncclAllReduce")
		b.Bind(&a.ncclReduceScatter, "ncclReduceScatter")
		b.Bind(&a.ncclAllGather, "ncclAllGather")
		b.Bind(&a.ncclBroadcast, "ncclBroadcast")
		b.Bind(&a.ncclSend, "ncclSend")
		b.Bind(&a.ncclRecv, "ncclRecv")
		b.Bind(&a.ncclGroupStart, "ncclGroupStart")
		b.Bind(&a.ncclGroupEnd, "ncclGroupEnd")
		if err := b.Err(); err != nil {
			loaded.err = err
			return
		}
		// Newer entry points, each optional: the scalable init takes the
		// id by pointer (NCCL 2.23); split (2.18) makes groups.
		opt := &cuda.Binder{Lib: lib}
		opt.Bind(&a.ncclCommInitRankScalable, "ncclCommInitRankScalable")
		opt.Bind(&a.ncclCommSplit, "ncclCommSplit")
		opt.Bind(&a.ncclCommFinalize, "ncclCommFinalize")
		opt.Bind(&a.ncclGetLastError, "ncclGetLastError")
		if a.ncclCommInitRankScalable == nil {
			if err := bindInitRank(a, lib); err != nil {
				loaded.err = err
				return
			}
		}
		loaded.api = a
	})
	return loaded.api, loaded.err
}

// Available reports whether NCCL can be loaded, and why not.
func Available() error {
	_, err := load()
	return err
}

// Version is the loaded NCCL's version ("2.21.5").
func Version() (string, error) {
	a, err := load()
	if err != nil {
		return "", err
	}
	var v int32
	if err := a.check(0, "ncclGetVersion", a.ncclGetVersion(&v)); err != nil {
		return "", err
	}
	return cuda.NCCLVersionString(int(v)), nil
}

// check turns an ncclResult_t into nil or an error naming the call, with
// NCCL's last message for comm when it has one.
func (a *api) check(comm uintptr, call string, res int32) error {
	if res == ncclSuccess {
		return nil
	}
	e := &cuda.Error{Call: call, Code: int(res), Desc: a.ncclGetErrorString(res)}
	if comm != 0 && a.ncclGetLastError != nil {
		if last := a.ncclGetLastError(comm); last != "" {
			return fmt.Errorf("%w: %s", e, last)
		}
	}
	return e
}

// initRank creates this rank's communicator from the id rank 0 made.
func (a *api) initRank(comm *uintptr, nranks, rank int, id *uniqueID) error {
	if a.ncclCommInitRankScalable != nil {
		return a.check(0, "ncclCommInitRankScalable", a.ncclCommInitRankScalable(comm, int32(nranks), int32(rank), 1, id, nil))
	}
	return a.check(0, "ncclCommInitRank", a.ncclCommInitRank.call(comm, nranks, rank, id))
}
