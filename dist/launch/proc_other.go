//go:build !unix

package launch

import (
	"os"
	"os/exec"
)

var sigTerm = os.Kill

func setProcessGroup(cmd *exec.Cmd) {}

func signalGroup(p *os.Process, sig os.Signal) {
	if p.Signal(sig) != nil {
		p.Kill()
	}
}

func exitStatus(ps *os.ProcessState) (int, os.Signal) {
	if ps == nil {
		return 1, nil
	}
	return ps.ExitCode(), nil
}

func signalNumber(os.Signal) int { return 15 }
