package load

import (
	"time"

	"github.com/prequalbench/prequalbench/openloop"
)

// schedule turns the open-loop phases into intended send times: the
// simulator's schedule (package openloop), so a simulated run and a real
// one send at the same instants. It is pure and needs no clock.
type schedule struct{ s *openloop.Schedule }

// newSchedule builds the schedule of validated phases.
func newSchedule(phases []Phase) *schedule {
	s, err := openloop.New(phases)
	if err != nil {
		panic("load: unvalidated phases: " + err.Error())
	}
	return &schedule{s}
}

// next returns the intended send time of the next hit, as an offset from
// the start of the window, and false once every phase is exhausted.
func (s *schedule) next() (time.Duration, bool) { return s.s.Next() }

// phase is the index of the phase of the hit next returned last.
func (s *schedule) phase() int { return s.s.Index() }

// plannedHits counts the hits the schedule of phases holds, without a clock.
func plannedHits(phases []Phase) uint64 {
	s := newSchedule(phases)
	var n uint64
	for _, ok := s.next(); ok; _, ok = s.next() {
		n++
	}
	return n
}
