//go:build !linux

package local

import "syscall"

// sysProcAttr puts the child in its own process group, so stop reaches its
// children too.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
