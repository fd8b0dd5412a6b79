package sim

import (
	"math"
	"testing"
)

// TestDraws_MatchTheBackend: the same seed gives the same random bits and
// the same service times as backend/src/dist.rs. The expected values were
// printed by dist.rs itself (Rng::new(42).next_u64() ×3; Rng::new(7) with
// Exp.draw(20.0) ×4 and, afresh, Normal.draw(20e6) ×6, "{:e}"). The bits
// are identical; Go's log and cos may differ from the C library's in the
// last bit, so draws are compared to 1e-14 relative.
func TestDraws_MatchTheBackend(t *testing.T) {
	close := func(got, want float64) bool {
		return got == want || math.Abs(got-want) <= 1e-14*math.Abs(want)
	}
	r := NewRng(42)
	for i, want := range []uint64{13679457532755275413, 2949826092126892291, 5139283748462763858} {
		if got := r.Uint64(); got != want {
			t.Errorf("u64 %d = %d, want %d", i, got, want)
		}
	}
	r = NewRng(7)
	for i, want := range []float64{1.884090355514765e1, 8.174146779390819e1, 2.0903134392893667e0, 1.0793753315396035e1} {
		if got := Exp.Draw(20, &r); !close(got, want) {
			t.Errorf("exp %d = %v, want %v", i, got, want)
		}
	}
	r = NewRng(7)
	for i, want := range []float64{4.729984594914456e7, 1.2069520494923646e7, 2.0089970523196626e7, 8.3877388947594e6, 0, 6.1245560128803395e7} {
		if got := Normal.Draw(20e6, &r); !close(got, want) {
			t.Errorf("normal %d = %v, want %v", i, got, want)
		}
	}
	if got := Fixed.Draw(20e6, &r); got != 20e6 {
		t.Errorf("fixed = %v", got)
	}
}
