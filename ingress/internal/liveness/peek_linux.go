package liveness

import (
	"syscall"
	"unsafe"
)

const supported = true

// peek sets k.usable when a non-blocking peek finds nothing to read: not a
// byte (stray data), not EOF (n == 0), not an error (a reset). The call is
// a RawSyscall: it cannot block (MSG_DONTWAIT), so it skips the runtime's
// syscall bookkeeping, which wakes sysmon when the process was idle (see
// package rawio).
func (k *Checker) peek(fd uintptr) {
	for {
		_, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&k.buf[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		k.usable = e == syscall.EAGAIN
		return
	}
}
