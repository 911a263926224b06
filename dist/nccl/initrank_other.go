//go:build !amd64 && !arm64

package nccl

import (
	"fmt"
	"runtime"

	"github.com/flockml/flock/backend/cuda"
)

// initRankByValue is unavailable where the ABI of a struct argument is not
// worked out; NCCL 2.23's ncclCommInitRankScalable is needed there.
type initRankByValue struct{}

func bindInitRank(a *api, lib *cuda.Library) error {
	return fmt.Errorf("nccl: %s lacks ncclCommInitRankScalable (NCCL 2.23), needed on %s", lib.Path, runtime.GOARCH)
}

func (initRankByValue) call(comm *uintptr, nranks, rank int, id *uniqueID) int32 { return -1 }
