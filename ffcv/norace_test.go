//go:build !race

package ffcv

const raceEnabled = false
