//go:build !linux

package dist

import (
	"errors"
	"time"
)

// shmSupported reports whether this platform has the shared-memory
// transport: it needs Linux futexes, so ranks elsewhere talk over TCP.
const shmSupported = false

var errSHMUnsupported = errors.New("shared memory transport needs Linux")

func shmHostIdentity(dir string) (string, error) { return "", errSHMUnsupported }

func shmCreate(dir, name string, size int) ([]byte, error) { return nil, errSHMUnsupported }

func shmOpen(dir, name string, size int) ([]byte, error) { return nil, errSHMUnsupported }

func shmUnmap(b []byte) {}

func shmUnlink(dir, name string) error { return nil }

func shmFutexWait(addr *uint32, val uint32, d time.Duration) {}

func shmFutexWake(addr *uint32) {}
