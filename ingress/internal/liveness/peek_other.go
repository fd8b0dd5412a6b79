//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package liveness

// The check needs MSG_PEEK and MSG_DONTWAIT; elsewhere every connection is
// taken as usable, and a stale one fails its exchange as before.
const supported = false

func (k *Checker) peek(uintptr) {}
