package load

import (
	"math"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// schedule turns the open-loop phases into intended send times. It drives
// each phase's vegeta.Pacer in virtual time: asking the pacer "how long
// after the previous intended send is the next one due?" with the previous
// intended time as elapsed, so the answer never depends on how late the
// real sends were. It is pure and needs no clock.
type schedule struct {
	phases []schedPhase
	i      int           // current phase
	offset time.Duration // start of phase i within the window
	hits   uint64        // hits scheduled so far in phase i
	last   time.Duration // intended time of the previous hit, within phase i
}

type schedPhase struct {
	pacer vegeta.Pacer
	dur   time.Duration
}

func newSchedule(phases []Phase) *schedule {
	s := &schedule{}
	for _, p := range phases {
		s.phases = append(s.phases, schedPhase{pacer: phasePacer(p), dur: p.Duration})
	}
	return s
}

// next returns the intended send time of the next hit, as an offset from
// the start of the window, and false once every phase is exhausted. A hit
// falling exactly on a phase's end belongs to that phase, so a constant
// phase yields exactly rate×duration hits when that is whole.
func (s *schedule) next() (time.Duration, bool) {
	for s.i < len(s.phases) {
		p := s.phases[s.i]
		wait, stop := p.pacer.Pace(s.last, s.hits)
		if wait < 0 {
			wait = 0
		}
		if !stop && wait <= p.dur-s.last {
			s.last += wait
			s.hits++
			return s.offset + s.last, true
		}
		s.offset += p.dur
		s.i++
		s.hits, s.last = 0, 0
	}
	return 0, false
}

// phasePacer maps a validated phase onto a vegeta.Pacer: vegeta's own
// ConstantPacer and LinearPacer for constant and ramp phases, and
// piecewisePacer for steps and bursts.
func phasePacer(p Phase) vegeta.Pacer {
	switch p.Kind {
	case KindConstant:
		return constantPacer(p.Rate)
	case KindRamp:
		return vegeta.LinearPacer{StartAt: constantPacer(p.From), Slope: (p.To - p.From) / p.Duration.Seconds()}
	case KindSteps:
		step := p.Duration / time.Duration(p.Steps)
		segs := make([]segment, p.Steps)
		for i := range segs {
			segs[i] = segment{rate: p.From + (p.To-p.From)*float64(i)/float64(p.Steps-1), dur: step}
		}
		segs[len(segs)-1].dur = p.Duration - step*time.Duration(p.Steps-1)
		return &piecewisePacer{segs: segs}
	case KindBurst:
		return &piecewisePacer{segs: []segment{{p.High, p.HighFor}, {p.Low, p.LowFor}}, cyclic: true}
	}
	panic("load: unvalidated phase kind " + p.Kind)
}

// constantPacer expresses a possibly fractional rate as vegeta's integer
// Freq per Per, exact to 0.001 requests/s.
func constantPacer(rate float64) vegeta.ConstantPacer {
	if rate == math.Trunc(rate) {
		return vegeta.ConstantPacer{Freq: int(rate), Per: time.Second}
	}
	return vegeta.ConstantPacer{Freq: int(math.Round(rate * 1000)), Per: 1000 * time.Second}
}

// segment is a stretch of constant rate.
type segment struct {
	rate float64 // requests per second, >= 0
	dur  time.Duration
}

// piecewisePacer is a vegeta.Pacer whose rate is piecewise constant: steps
// (the segments once) or bursts (the segments repeated). Hit k (0-based) is
// due when the integral of the rate reaches k+1, as with ConstantPacer.
type piecewisePacer struct {
	segs   []segment
	cyclic bool
}

var _ vegeta.Pacer = (*piecewisePacer)(nil)

// Pace implements vegeta.Pacer.
func (p *piecewisePacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	due, ok := p.timeOf(float64(hits + 1))
	if !ok {
		return 0, true
	}
	if due <= elapsed {
		return 0, false
	}
	return due - elapsed, false
}

// Rate implements vegeta.Pacer.
func (p *piecewisePacer) Rate(elapsed time.Duration) float64 {
	if p.cyclic {
		elapsed %= p.period()
	}
	for _, s := range p.segs {
		if elapsed < s.dur {
			return s.rate
		}
		elapsed -= s.dur
	}
	return 0
}

func (p *piecewisePacer) period() time.Duration {
	var d time.Duration
	for _, s := range p.segs {
		d += s.dur
	}
	return d
}

// timeOf returns the earliest time at which the rate's integral reaches
// h > 0, and false if it never does.
func (p *piecewisePacer) timeOf(h float64) (time.Duration, bool) {
	var base time.Duration
	if p.cyclic {
		var perCycle float64
		for _, s := range p.segs {
			perCycle += s.rate * s.dur.Seconds()
		}
		if perCycle <= 0 {
			return 0, false
		}
		// Full cycles before the one holding h; h on a cycle boundary
		// belongs to the earlier cycle.
		c := math.Ceil(h/perCycle) - 1
		if c > float64(math.MaxInt64/int64(p.period())) {
			return 0, false
		}
		base = time.Duration(c) * p.period()
		h -= c * perCycle
	}
	for _, s := range p.segs {
		n := s.rate * s.dur.Seconds()
		if h <= n && s.rate > 0 {
			return base + time.Duration(h/s.rate*1e9), true
		}
		h -= n
		base += s.dur
	}
	return 0, false
}

// plannedHits counts the hits the schedule of phases holds, without a clock.
func plannedHits(phases []Phase) uint64 {
	s := newSchedule(phases)
	var n uint64
	for _, ok := s.next(); ok; _, ok = s.next() {
		n++
	}
	return n
}

// integral is the expected number of hits in [0, t).
func (p *piecewisePacer) integral(t time.Duration) float64 {
	var h float64
	for t > 0 {
		for _, s := range p.segs {
			d := min(s.dur, t)
			h += s.rate * d.Seconds()
			t -= d
			if t <= 0 {
				break
			}
		}
		if !p.cyclic {
			break
		}
	}
	return h
}
