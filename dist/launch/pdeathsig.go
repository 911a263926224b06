//go:build linux || freebsd

package launch

import "syscall"

// setParentDeathSignal has the kernel send the rank SIGTERM when the
// launcher dies, even by SIGKILL, so that no rank outlives it: a flock
// rank then stops as when interrupted. The signal follows the death of the
// thread that started the rank, and the Go runtime keeps its threads
// unless a goroutine locked to one exits, which Run's caller does not do.
func setParentDeathSignal(a *syscall.SysProcAttr) {
	a.Pdeathsig = syscall.SIGTERM
}
