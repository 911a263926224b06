//go:build unix && !linux && !freebsd

package launch

import "syscall"

// setParentDeathSignal does nothing where the kernel has no parent-death
// signal; ranks started by flock run notice that their parent changed
// instead (see flock train).
func setParentDeathSignal(*syscall.SysProcAttr) {}
