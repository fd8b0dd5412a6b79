package external

import (
	"os"
	"syscall"
)

// hookProcAttr puts a hook's shell in a process group of its own, so a
// timeout can kill the children it started too (exec.CommandContext
// alone kills only the shell, and a child holding the output pipe would
// run on and hold up the wait).
func hookProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// killGroup kills the process group p leads.
func killGroup(p *os.Process) error {
	if err := syscall.Kill(-p.Pid, syscall.SIGKILL); err != nil {
		return p.Kill()
	}
	return nil
}
