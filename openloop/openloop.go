// Package openloop owns the open-loop send schedule: phases of constant,
// ramping, stepped or bursting rate turned into intended send times. It is
// pure (no clock), so the load engine and the simulator send at the same
// instants.
package openloop

import (
	"fmt"
	"math"
	"time"
)

// Phase kinds.
const (
	KindConstant = "constant" // Rate for Duration
	KindRamp     = "ramp"     // linear From→To over Duration
	KindSteps    = "steps"    // From→To in Steps equal steps over Duration
	KindBurst    = "burst"    // High for HighFor, then Low for LowFor, repeated over Duration
)

// Phase is one segment of an open-loop schedule.
type Phase struct {
	Kind     string
	Duration time.Duration
	Rate     float64 // constant
	From, To float64 // ramp, steps
	Steps    int     // steps: From→To in Steps equal steps (first From, last To)
	High     float64 // burst
	Low      float64 // burst, may be 0 (silence between bursts)
	HighFor  time.Duration
	LowFor   time.Duration
}

// Schedule yields the intended send times of an open loop. Hit k
// (1-based) of a phase is due when the integral of the phase's rate
// reaches k; a constant phase uses an integer interval (vegeta's
// ConstantPacer's), exact to 0.001 requests/s.
type Schedule struct {
	phases []Phase
	i      int
	offset int64 // start of phase i
	hits   float64
	segs   []segment // phase i's rate, piecewise (steps, burst)
	cyclic bool
}

type segment struct {
	rate float64
	dur  int64
}

// New checks the phases' kinds and durations and returns their schedule.
func New(phases []Phase) (*Schedule, error) {
	for i, p := range phases {
		if p.Duration <= 0 {
			return nil, fmt.Errorf("open[%d].duration must be > 0, got %v", i, p.Duration)
		}
		switch p.Kind {
		case KindConstant, KindRamp, KindSteps, KindBurst:
		default:
			return nil, fmt.Errorf("open[%d].kind must be one of constant, ramp, steps, burst; got %q", i, p.Kind)
		}
	}
	s := &Schedule{phases: phases}
	s.enter()
	return s, nil
}

func (s *Schedule) enter() {
	s.hits, s.segs, s.cyclic = 0, s.segs[:0], false
	if s.i >= len(s.phases) {
		return
	}
	p := s.phases[s.i]
	switch p.Kind {
	case KindSteps:
		n := max(p.Steps, 2)
		step := int64(p.Duration) / int64(n)
		for k := range n {
			d := step
			if k == n-1 {
				d = int64(p.Duration) - step*int64(n-1)
			}
			s.segs = append(s.segs, segment{rate: p.From + (p.To-p.From)*float64(k)/float64(n-1), dur: d})
		}
	case KindBurst:
		s.segs = append(s.segs, segment{p.High, int64(p.HighFor)}, segment{p.Low, int64(p.LowFor)})
		s.cyclic = true
	}
}

// Next returns the next intended send as an offset from the schedule's
// start, and false when the schedule is over.
func (s *Schedule) Next() (time.Duration, bool) {
	for s.i < len(s.phases) {
		p := s.phases[s.i]
		due, ok := s.timeOf(p, s.hits+1)
		if ok && due <= int64(p.Duration) {
			s.hits++
			return time.Duration(s.offset + due), true
		}
		s.offset += int64(p.Duration)
		s.i++
		s.enter()
	}
	return 0, false
}

// Index is the phase of the hit Next returned last (0 before any).
func (s *Schedule) Index() int { return s.i }

// timeOf is when the rate's integral over the phase reaches h.
func (s *Schedule) timeOf(p Phase, h float64) (int64, bool) {
	switch p.Kind {
	case KindConstant:
		freq, per := float64(p.Rate), float64(time.Second)
		if p.Rate != math.Trunc(p.Rate) {
			freq, per = math.Round(p.Rate*1000), float64(1000*time.Second)
		}
		if freq <= 0 {
			return 0, false
		}
		interval := int64(per) / int64(freq)
		return int64(h) * interval, true
	case KindRamp:
		slope := (p.To - p.From) / p.Duration.Seconds()
		disc := p.From*p.From + 2*slope*h
		if disc < 0 {
			return 0, false
		}
		// h = From·t + slope·t²/2, solved without cancellation.
		t := 2 * h / (p.From + math.Sqrt(disc))
		return int64(t * 1e9), true
	}
	var base int64
	if s.cyclic {
		var perCycle float64
		var period int64
		for _, g := range s.segs {
			perCycle += g.rate * float64(g.dur) / 1e9
			period += g.dur
		}
		if perCycle <= 0 {
			return 0, false
		}
		// Full cycles before the one holding h; h on a cycle boundary
		// belongs to the earlier cycle.
		c := math.Ceil(h/perCycle) - 1
		if c > float64(math.MaxInt64/period) {
			return 0, false
		}
		base = int64(c) * period
		h -= c * perCycle
	}
	for _, g := range s.segs {
		n := g.rate * float64(g.dur) / 1e9
		if h <= n && g.rate > 0 {
			return base + int64(h/g.rate*1e9), true
		}
		h -= n
		base += g.dur
	}
	return 0, false
}

// MeanRate is the mean offered rate of the phases: their integral per
// second of their whole length.
func MeanRate(phases []Phase) float64 {
	var hits, secs float64
	for _, p := range phases {
		d := p.Duration.Seconds()
		secs += d
		switch p.Kind {
		case KindConstant:
			hits += p.Rate * d
		case KindRamp:
			hits += (p.From + p.To) / 2 * d
		case KindSteps:
			hits += (p.From + p.To) / 2 * d
		case KindBurst:
			period := (p.HighFor + p.LowFor).Seconds()
			full := math.Floor(d / period)
			rest := d - full*period
			hits += full * (p.High*p.HighFor.Seconds() + p.Low*p.LowFor.Seconds())
			hi := math.Min(rest, p.HighFor.Seconds())
			hits += p.High*hi + p.Low*(rest-hi)
		}
	}
	if secs == 0 {
		return 0
	}
	return hits / secs
}
