package loadbalancer

import (
	"math"
	"math/rand/v2"
	"time"
)

// prequalSync is Prequal's synchronous mode (the paper's §4 "sync" mode;
// anchors §A.4): no pool; per query d probes to distinct replicas drawn
// uniformly, the pick waits for d − 1 answers or a short timeout and
// applies HCL to the answers of this query alone, so it never uses an
// answer older than the query. The hot threshold is the Q_RIF quantile of
// the RIFs of recent answers (the same count window as async Prequal).
// With no usable answer it falls back to a uniformly random healthy
// replica, counted as a fallback, as async Prequal does with too few
// probes. It reuses async Prequal's machinery: the answers become a
// one-query pool, so HCL, unknown-latency exploration and error aversion
// are exactly async Prequal's.
type prequalSync struct {
	*prequal
	sync SyncConfig
}

var (
	_ Policy     = (*prequalSync)(nil)
	_ SyncPicker = (*prequalSync)(nil)
)

func newPrequalSync(pc PrequalConfig, sc SyncConfig) *prequalSync {
	p := newPoolPolicy(NamePrequalSync, pc, hcl{})
	if sc.D > cap(p.pool) {
		p.pool = make([]probeEntry, 0, sc.D)
		p.cats = make([]uint8, sc.D)
		p.scores = make([]float64, sc.D)
	}
	return &prequalSync{prequal: p, sync: sc}
}

func (s *prequalSync) Caps() Caps { return Caps{Sync: true} }

// PlanSync draws d = min(D, n) distinct replicas uniformly.
func (s *prequalSync) PlanSync(now time.Time, rng *rand.Rand, dst []string) []string {
	n := len(s.eps)
	s.see(now)
	d := min(s.sync.D, n)
	for i := range d {
		j := i + rng.IntN(n-i)
		s.perm[i], s.perm[j] = s.perm[j], s.perm[i]
		dst = append(dst, s.eps[s.perm[i]].addr)
	}
	s.probesPlanned += uint64(d)
	return dst
}

// SyncWait: d − 1 answers (at least 1) or Timeout.
func (s *prequalSync) SyncWait() (int, time.Duration) {
	return max(s.sync.D-1, 1), s.sync.Timeout
}

// PickSync applies HCL to this query's answers. Each answer's outcome is
// counted: a success as ProbeOK, a failure as its Outcome. Planned probes
// with no answer at all count as timeouts when the wait ended without
// enough successes (its timeout passed); when it ended at SyncWait's
// count, the rest were not waited for and count as nothing
// (ProbesPlanned minus the outcomes counts them).
func (s *prequalSync) PickSync(now time.Time, rng *rand.Rand, answers []SyncAnswer) (Picked, error) {
	n := len(s.eps)
	if n == 0 {
		return Picked{}, ErrNoEndpoints
	}
	t := s.see(now)
	s.pool = s.pool[:0]
	oks := 0
	for k := range answers {
		a := &answers[k]
		if !a.OK {
			if a.Outcome == "" || a.Outcome == ProbeOK {
				s.countOutcome(ProbeTimeout)
			} else {
				s.countOutcome(a.Outcome)
			}
			continue
		}
		oks++
		ep, ok := s.planned(a.Endpoint)
		if !ok || len(s.pool) == cap(s.pool) || s.inPool(ep) {
			continue
		}
		s.countOutcome(ProbeOK)
		rif := min(max(a.Reply.RIF, 0), math.MaxInt32/2)
		s.recordRIF(rif)
		known := a.Reply.LatencyKnown && a.Reply.Latency >= 0
		s.replicas[ep].latencyKnown = known
		s.pool = append(s.pool, probeEntry{ep: int32(ep), received: t, rif: int32(rif), latency: min(a.Reply.Latency, maxLatency), known: known})
	}
	d := min(s.sync.D, n)
	if need, _ := s.SyncWait(); oks < min(need, d) && len(answers) < d {
		s.outcomes[outcomeSlot(ProbeTimeout)] += uint64(d - len(answers))
	}
	pk := s.chooseAnswer(rng)
	s.pool = s.pool[:0] // the answers serve this query only
	return pk, nil
}

// chooseAnswer picks from the one-query pool of answers.
func (s *prequalSync) chooseAnswer(rng *rand.Rand) Picked {
	if len(s.pool) == 0 {
		return s.fallback(rng)
	}
	thr := s.hotThreshold()
	c, hot := s.sel.choose(s.prequal, thr, rng)
	ep := int(s.pool[c].ep)
	if s.averse(ep) {
		if i := s.redrawHealthy(ep, rng); i != ep {
			pk := s.pick(i)
			s.markExploring(i, &pk)
			return pk
		}
	}
	pk := s.pick(ep)
	pk.Hot = hot
	s.markExploring(ep, &pk)
	if hot {
		s.hotPicks++
	} else {
		s.coldPicks++
	}
	return pk
}

// planned finds an answering endpoint's index: among the last plan's
// targets first (perm's prefix, which is this query's plan unless another
// query planned in between), where the caller's string is usually the
// very one PlanSync handed out and compares at once, else by address.
func (s *prequalSync) planned(addr string) (int, bool) {
	for _, ep := range s.perm[:min(s.sync.D, len(s.perm))] {
		if s.eps[ep].addr == addr {
			return ep, true
		}
	}
	ep, ok := s.byAddr[addr]
	return ep, ok
}

func (s *prequalSync) inPool(ep int) bool {
	for i := range s.pool {
		if int(s.pool[i].ep) == ep {
			return true
		}
	}
	return false
}

// fallback is a uniformly random healthy replica, counted.
func (s *prequalSync) fallback(rng *rand.Rand) Picked {
	i := s.redrawHealthy(rng.IntN(len(s.eps)), rng)
	pk := s.pick(i)
	if len(s.eps) > 1 { // with one replica there is no choice to fall back from
		s.fallbacks++
		pk.Fallback = true
	}
	s.markExploring(i, &pk)
	return pk
}

// Pick is the fallback, for callers that do not probe synchronously.
func (s *prequalSync) Pick(now time.Time, rng *rand.Rand) (Picked, error) {
	if len(s.eps) == 0 {
		return Picked{}, ErrNoEndpoints
	}
	s.see(now)
	return s.fallback(rng), nil
}

// ProbesDue: sync mode plans its probes per query in PlanSync.
func (s *prequalSync) ProbesDue(_ time.Time, _ *rand.Rand, dst []string) []string { return dst }

// ProbeResult only counts: sync mode keeps no pool between queries.
func (s *prequalSync) ProbeResult(_ time.Time, endpoint string, _ ProbeReply) {
	if _, ok := s.byAddr[endpoint]; ok {
		s.countOutcome(ProbeOK)
	}
}
