//go:build race && linux

package rawio

import (
	"runtime"
	"unsafe"
)

// ioSync orders a write before the read that receives its bytes, for the
// race detector, as package syscall does for its own calls (the kernel's
// accesses to a buffer are invisible to the detector).
var ioSync int64

func raceRead(p []byte) {
	runtime.RaceWriteRange(unsafe.Pointer(&p[0]), len(p))
	runtime.RaceAcquire(unsafe.Pointer(&ioSync))
}

func raceWrite(p []byte) {
	runtime.RaceReleaseMerge(unsafe.Pointer(&ioSync))
	if len(p) > 0 {
		runtime.RaceReadRange(unsafe.Pointer(&p[0]), len(p))
	}
}
