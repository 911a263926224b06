//go:build unix

package launch

import (
	"os"
	"os/exec"
	"syscall"
)

var sigTerm os.Signal = syscall.SIGTERM

// setProcessGroup makes the rank the leader of a new process group, so
// that its children get the signals it gets and a terminal's Ctrl-C reaches
// the ranks only through the launcher; where the system can, the rank gets
// SIGTERM when the launcher dies.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setParentDeathSignal(cmd.SysProcAttr)
}

// signalGroup sends sig to the process group p leads.
func signalGroup(p *os.Process, sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		p.Signal(sig)
		return
	}
	if syscall.Kill(-p.Pid, s) != nil {
		p.Signal(sig)
	}
}

// exitStatus returns the status of an ended process: its exit code, or
// 128 + the signal's number and the signal when a signal ended it.
func exitStatus(ps *os.ProcessState) (int, os.Signal) {
	if ps == nil {
		return 1, nil
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), ws.Signal()
	}
	return ps.ExitCode(), nil
}

// signalNumber returns sig's number, SIGTERM's for nil.
func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return int(syscall.SIGTERM)
}
