//go:build !amd64 || purego

package cpu

// sgemmArchs returns no assembly paths: other CPUs use pure Go.
func sgemmArchs() []*sgemmArch { return nil }
