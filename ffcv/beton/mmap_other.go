//go:build !linux

package beton

import "os"

// Elsewhere the Reader falls back to the process cache.
func mmapFile(f *os.File, size int64) ([]byte, error) { return nil, nil }

func munmap(b []byte) error { return nil }

func willNeed(b []byte) {}
