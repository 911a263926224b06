//go:build race

package cpu

// raceEnabled reports a -race build, in which sync.Pool drops items at
// random on purpose, so allocation counts mean nothing.
const raceEnabled = true
