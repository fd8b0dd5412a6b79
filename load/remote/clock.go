package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// The generator's clock endpoint: while it runs, a generator answers
// GET ClockPath on ClockPort with its wall clock, so the campaign can
// measure the offset between its own clock (which times the window's
// snapshots and computes the common start) and the generator's (which
// times the sends), through the API server's pod proxy.
const (
	ClockPort = 8089
	ClockPath = "/clock"
	// MaxClockSkew bounds a generator's clock offset. A run is refused
	// when the offset is certainly above it (ClockReading.Least); when
	// the measurement is too coarse to tell (Least below it, Bound
	// above), the run goes on and its reading says so, so a slow API
	// server proxy never passes for a skewed clock. 100 ms is a tenth of
	// a row of the per-second series; the window's state snapshots, taken
	// on the campaign's clock, are then within it of the generators'
	// window.
	MaxClockSkew = 100 * time.Millisecond
	// ClockSamples is how many round trips a measurement makes; the one
	// with the shortest round trip is kept (the tightest bound).
	ClockSamples = 5
)

// clockReply is the endpoint's answer.
type clockReply struct {
	UnixNano int64 `json:"unix_nano"`
}

// ClockHandler answers ClockPath with now().
func ClockHandler(now func() time.Time) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+ClockPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(clockReply{UnixNano: now().UnixNano()})
	})
	return mux
}

// ParseClock reads the endpoint's answer.
func ParseClock(b []byte) (time.Time, error) {
	var r clockReply
	if err := json.Unmarshal(b, &r); err != nil || r.UnixNano == 0 {
		return time.Time{}, fmt.Errorf("loadgen: clock reply %.80q: not {\"unix_nano\": N}", b)
	}
	return time.Unix(0, r.UnixNano), nil
}

// ClockReading is an NTP-style estimate of a remote clock against this
// machine's: Offset is remote minus local, taken at the midpoint of the
// round trip, so the true offset lies within Offset ± RoundTrip/2.
type ClockReading struct {
	Offset, RoundTrip time.Duration
}

// Bound is the largest offset the reading cannot rule out.
func (r ClockReading) Bound() time.Duration {
	return max(r.Offset, -r.Offset) + r.RoundTrip/2
}

// Least is the smallest offset the reading allows: the size of the
// offset less half the round trip, or 0 when that is negative (the
// clocks may agree).
func (r ClockReading) Least() time.Duration {
	return max(max(r.Offset, -r.Offset)-r.RoundTrip/2, 0)
}

// MeasureClock asks get for the remote clock samples times, timing each
// round trip on now, and returns the reading with the shortest round
// trip; an error only when no round trip succeeded.
func MeasureClock(ctx context.Context, samples int, now func() time.Time, get func(context.Context) (time.Time, error)) (ClockReading, error) {
	var best ClockReading
	found := false
	var errs []error
	for range max(samples, 1) {
		t0 := now()
		remote, err := get(ctx)
		t1 := now()
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		rtt := t1.Sub(t0)
		r := ClockReading{Offset: remote.Sub(t0.Add(rtt / 2)), RoundTrip: rtt}
		if !found || r.RoundTrip < best.RoundTrip {
			best, found = r, true
		}
	}
	if !found {
		return best, fmt.Errorf("loadgen: clock: %w", errors.Join(errs...))
	}
	return best, nil
}
