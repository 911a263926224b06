//go:build !linux

package jpeg

import "time"

func threadCPU() time.Duration { return 0 }
