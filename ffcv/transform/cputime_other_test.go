//go:build !linux

package transform

import "time"

func threadCPU() time.Duration { return 0 }
