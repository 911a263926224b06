//go:build linux

package dist

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// shmSupported reports whether this platform has the shared-memory
// transport.
const shmSupported = true

// shmHostIdentity names the memory this process can share through dir: the
// kernel's boot id and the device of the file system holding dir. Two
// processes with the same identity run under one kernel and see the same
// files in dir (a container with a /dev/shm of its own has another device).
func shmHostIdentity(dir string) (string, error) {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return "", &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	return strings.TrimSpace(string(boot)) + "/" + strconv.FormatUint(uint64(st.Dev), 16), nil
}

// shmCreate creates the file name in dir (readable and writable by this
// user only, failing if it exists), reserves size bytes for it, so that
// touching the mapping can never fault for want of space, and maps it.
func shmCreate(dir, name string, size int) ([]byte, error) {
	path := filepath.Join(dir, name)
	fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, &os.PathError{Op: "create", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	if err := syscall.Fallocate(fd, 0, 0, int64(size)); err != nil {
		syscall.Unlink(path)
		return nil, &os.PathError{Op: "reserve", Path: path, Err: err}
	}
	b, err := syscall.Mmap(fd, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		syscall.Unlink(path)
		return nil, &os.PathError{Op: "map", Path: path, Err: err}
	}
	return b, nil
}

// shmOpen maps a peer's file, which must be a regular file of exactly size
// bytes owned by this user and closed to everyone else.
func shmOpen(dir, name string, size int) ([]byte, error) {
	path := filepath.Join(dir, name)
	fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	switch {
	case st.Mode&syscall.S_IFMT != syscall.S_IFREG:
		return nil, fmt.Errorf("%s: not a regular file", path)
	case st.Uid != uint32(os.Geteuid()):
		return nil, fmt.Errorf("%s: owned by uid %d, not %d", path, st.Uid, os.Geteuid())
	case st.Mode&0o077 != 0:
		return nil, fmt.Errorf("%s: mode %#o lets others in", path, st.Mode&0o777)
	case st.Size != int64(size):
		return nil, fmt.Errorf("%s: %d bytes, want %d", path, st.Size, size)
	}
	b, err := syscall.Mmap(fd, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, &os.PathError{Op: "map", Path: path, Err: err}
	}
	return b, nil
}

func shmUnmap(b []byte) {
	if b != nil {
		syscall.Munmap(b)
	}
}

func shmUnlink(dir, name string) error {
	err := syscall.Unlink(filepath.Join(dir, name))
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	return err
}

// Futex operations on a word of a shared mapping (not FUTEX_PRIVATE: the
// waiters are in other processes).
const (
	futexWait = 0
	futexWake = 1
)

// shmFutexWait sleeps while *addr == val, at most d; it may return early
// for any reason.
func shmFutexWait(addr *uint32, val uint32, d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWait, uintptr(val),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// shmFutexWake wakes every process sleeping on addr.
func shmFutexWake(addr *uint32) {
	syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWake, math.MaxInt32, 0, 0, 0)
}
