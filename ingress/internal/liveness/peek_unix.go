//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package liveness

import "syscall"

const supported = true

// peek sets k.usable when a non-blocking peek finds nothing to read: not a
// byte (stray data), not EOF (n == 0), not an error (a reset).
func (k *Checker) peek(fd uintptr) {
	_, _, err := syscall.Recvfrom(int(fd), k.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	k.usable = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
}
