package local

import "syscall"

// sysProcAttr puts the child in its own process group (so stop reaches its
// children too) and has the kernel kill it if this process dies without
// cleaning up (kill -9).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
