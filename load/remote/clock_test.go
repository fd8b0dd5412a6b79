package remote

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"testing"
	"time"
)

// The offset is the remote clock minus the local one at the round trip's
// midpoint, the bound adds half the round trip, and of several round
// trips the shortest is kept.
func TestMeasureClock(t *testing.T) {
	local := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// Round trips of 40, 10 and 30 ms; the remote is 250 ms ahead and
	// answers at the midpoint of each.
	rtts := []time.Duration{40 * time.Millisecond, 10 * time.Millisecond, 30 * time.Millisecond}
	i, calls := 0, 0
	now := func() time.Time {
		calls++
		return local
	}
	get := func(context.Context) (time.Time, error) {
		rtt := rtts[i]
		i++
		remote := local.Add(rtt/2 + 250*time.Millisecond)
		local = local.Add(rtt)
		return remote, nil
	}
	r, err := MeasureClock(context.Background(), 3, now, get)
	if err != nil {
		t.Fatal(err)
	}
	if r.Offset != 250*time.Millisecond || r.RoundTrip != 10*time.Millisecond || r.Bound() != 255*time.Millisecond {
		t.Errorf("reading %+v (bound %v), want offset 250ms, round trip 10ms, bound 255ms", r, r.Bound())
	}
	if (ClockReading{Offset: -40 * time.Millisecond, RoundTrip: 20 * time.Millisecond}).Bound() != 50*time.Millisecond {
		t.Error("a negative offset's bound is not its size plus half the round trip")
	}
	// The least offset a reading allows is its size less half the round
	// trip, never below zero: a perfect clock behind a 300 ms round trip
	// is at least 0 ms off, not 150.
	for _, c := range []struct {
		r     ClockReading
		least time.Duration
	}{
		{ClockReading{Offset: -400 * time.Millisecond, RoundTrip: 300 * time.Millisecond}, 250 * time.Millisecond},
		{ClockReading{Offset: 10 * time.Millisecond, RoundTrip: 300 * time.Millisecond}, 0},
		{ClockReading{Offset: 120 * time.Millisecond, RoundTrip: 20 * time.Millisecond}, 110 * time.Millisecond},
	} {
		if got := c.r.Least(); got != c.least {
			t.Errorf("%+v: least %v, want %v", c.r, got, c.least)
		}
	}
	_, err = MeasureClock(context.Background(), 2, time.Now, func(context.Context) (time.Time, error) { return time.Time{}, errors.New("no route") })
	if err == nil {
		t.Error("no successful round trip gave a reading")
	}
}

// The generator's endpoint answers its clock, and ParseClock reads it.
func TestClockHandler(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 123, time.UTC)
	srv := httptest.NewServer(ClockHandler(func() time.Time { return at }))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + ClockPath)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	got, err := ParseClock(b)
	if err != nil || !got.Equal(at) {
		t.Errorf("clock %v, %v; want %v", got, err, at)
	}
	if _, err := ParseClock([]byte("<html>")); err == nil {
		t.Error("a non-clock answer parsed")
	}
}
