package h1

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkReadRequestHead compares a plain head with one of 4,000 empty
// fields (16 KiB, the head limit), which MaxFields refuses after 256: the
// refusal must cost about what any head of that size costs, not 4,000
// fields' parse. Besides
// ns/op (wall time, which a busy host inflates) it reports cpu-ns/op, the
// process's CPU time per head.
func BenchmarkReadRequestHead(b *testing.B) {
	plain := "GET /work HTTP/1.1\r\nHost: bench.local\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n"
	empty := "GET /work HTTP/1.1\r\nHost: bench.local\r\n" + strings.Repeat("a:\r\n", 4000) + "\r\n"
	// A head as large in one field: what any 16 KiB head costs.
	cookie := "GET /work HTTP/1.1\r\nHost: bench.local\r\nCookie: " + strings.Repeat("a", 16000-4) + "\r\n\r\n"
	for _, tt := range []struct{ name, head string }{{"plain", plain}, {"4000-empty-fields", empty}, {"16KiB-cookie", cookie}} {
		b.Run(tt.name, func(b *testing.B) {
			var sr strings.Reader
			var r Request
			cpu0 := processCPU()
			for b.Loop() {
				// A fresh reader, as on a new connection (the refused
				// head closes its connection).
				sr.Reset(tt.head)
				_ = NewReader(&sr, 16<<10).ReadRequestHead(&r)
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
