package ingress

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/prequalbench/prequalbench/ingress/adminapi"
)

// OutlierConfig configures outlier ejection, after Envoy's outlier
// detection: an endpoint is ejected after Consecutive gateway failures or
// 5xx other than 503 in a row (503 is a full queue shedding load; 503s
// neither count nor break the run), or when its success rate over an Interval is an outlier
// across the route (below mean − StdevFactor·stdev over the endpoints with
// at least MinRequests requests, when at least MinHosts have). An ejection
// lasts BaseEjection times 2^(k−1) for the endpoint's k-th ejection in a
// row, capped at MaxEjection; k starts again after an endpoint has gone
// MaxEjection since its return without one. No ejection makes more than
// MaxEjectedFraction of a route's endpoints ejected at once.
type OutlierConfig struct {
	// Disabled turns ejection off.
	Disabled bool
	// Consecutive failures that eject; default 5.
	Consecutive int
	// Interval of the success-rate evaluation; default 1 s.
	Interval time.Duration
	// BaseEjection is the first ejection's length; default 1 s.
	BaseEjection time.Duration
	// MaxEjection caps an ejection's length; default 30 s.
	MaxEjection time.Duration
	// MaxEjectedFraction of a route's endpoints may be ejected at once;
	// default 0.5.
	MaxEjectedFraction float64
	// MinHosts with enough requests for the success-rate test; default 3.
	// With the default StdevFactor the test ejects nothing on fewer than
	// 5 such hosts anyway: the largest z-score among n rates is √(n−1),
	// 1.73 for 4. Small routes rely on Consecutive.
	MinHosts int
	// MinRequests in an interval for an endpoint to take part; default 20.
	MinRequests int
	// StdevFactor is k of mean − k·stdev; default 1.9 (Envoy's 1900/1000).
	StdevFactor float64
}

// withDefaults fills zero fields and checks the rest.
func (c OutlierConfig) withDefaults() (OutlierConfig, error) {
	set := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	setD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	set(&c.Consecutive, 5)
	set(&c.MinHosts, 3)
	set(&c.MinRequests, 20)
	setD(&c.Interval, time.Second)
	setD(&c.BaseEjection, time.Second)
	setD(&c.MaxEjection, 30*time.Second)
	if c.MaxEjectedFraction == 0 {
		c.MaxEjectedFraction = 0.5
	}
	if c.StdevFactor == 0 {
		c.StdevFactor = 1.9
	}
	switch {
	case c.Consecutive < 1:
		return c, fmt.Errorf("Outlier.Consecutive: want >= 1, got %d", c.Consecutive)
	case c.Interval < 0 || c.BaseEjection < 0:
		return c, fmt.Errorf("Outlier.Interval and Outlier.BaseEjection: want > 0, got %v and %v", c.Interval, c.BaseEjection)
	case c.MaxEjection < c.BaseEjection:
		return c, fmt.Errorf("Outlier.MaxEjection: want >= BaseEjection %v, got %v", c.BaseEjection, c.MaxEjection)
	case c.MaxEjectedFraction < 0 || c.MaxEjectedFraction > 1:
		return c, fmt.Errorf("Outlier.MaxEjectedFraction: want in [0, 1], got %g", c.MaxEjectedFraction)
	case c.MinHosts < 1 || c.MinRequests < 1:
		return c, fmt.Errorf("Outlier.MinHosts and Outlier.MinRequests: want >= 1, got %d and %d", c.MinHosts, c.MinRequests)
	case c.StdevFactor < 0:
		return c, fmt.Errorf("Outlier.StdevFactor: want >= 0, got %g", c.StdevFactor)
	}
	return c, nil
}

// Ejection reasons, the reason label of prequal_outlier_ejections_total.
const (
	ejectConsecutive = "consecutive"
	ejectSuccessRate = "success_rate"
)

// outliers is one route's ejection state. The route's mutex guards it.
type outliers struct {
	cfg           OutlierConfig
	eps           map[string]*outlierEndpoint
	order         []string // the route's endpoints, in its order
	intervalStart time.Time
	// Counters since the last reset.
	ejections map[string]uint64 // by reason
	returns   uint64
	// newReturns counts returns not yet passed to the metrics.
	newReturns int
}

type outlierEndpoint struct {
	consecutive         int
	requests, successes int // in the current interval
	ejected             bool
	reason              string
	until               time.Time
	streak              int // ejections in a row, for the growing time
	returned            time.Time
}

// ejection is a decision the route carries out on its policy.
type ejection struct {
	addr   string
	until  time.Time
	reason string
}

func newOutliers(cfg OutlierConfig) *outliers {
	return &outliers{cfg: cfg, eps: map[string]*outlierEndpoint{}, ejections: map[string]uint64{}}
}

// setEndpoints keeps the state of endpoints that stay.
func (o *outliers) setEndpoints(addrs []string) {
	next := make(map[string]*outlierEndpoint, len(addrs))
	for _, a := range addrs {
		if e := o.eps[a]; e != nil {
			next[a] = e
		} else {
			next[a] = &outlierEndpoint{}
		}
	}
	o.eps, o.order = next, slices.Clone(addrs)
}

// observe counts one finished attempt on addr and returns the ejections
// it (and a due success-rate evaluation) decide.
func (o *outliers) observe(now time.Time, addr string, status int, dst []ejection) []ejection {
	if o.cfg.Disabled || status == 499 {
		return dst
	}
	e := o.eps[addr]
	if e == nil {
		return dst
	}
	dst = o.tick(now, dst)
	e.requests++
	if status != 0 && status < 500 {
		e.successes++
		e.consecutive = 0
		return dst
	}
	if status == http.StatusServiceUnavailable {
		// The backend shedding load (its queue is full): ejecting it
		// would move its load onto the others and idle its capacity.
		// It still counts against its success rate.
		return dst
	}
	e.consecutive++
	if !e.ejected && e.consecutive >= o.cfg.Consecutive && o.roomToEject() {
		dst = append(dst, o.eject(now, addr, e, ejectConsecutive))
	}
	return dst
}

// tick returns endpoints whose time is up and runs the success-rate test
// once per interval.
func (o *outliers) tick(now time.Time, dst []ejection) []ejection {
	if o.cfg.Disabled {
		return dst
	}
	for _, e := range o.eps {
		if e.ejected && !now.Before(e.until) {
			// Its exclusion in the policy ended on its own at until.
			e.ejected, e.consecutive, e.returned = false, 0, e.until
			o.returns++
			o.newReturns++
		}
	}
	if o.intervalStart.IsZero() {
		o.intervalStart = now
	}
	if now.Sub(o.intervalStart) < o.cfg.Interval {
		return dst
	}
	o.intervalStart = now
	dst = o.successRateEjections(now, dst)
	for _, e := range o.eps {
		e.requests, e.successes = 0, 0
	}
	return dst
}

// successRateEjections ejects endpoints whose success rate this interval
// is below mean − k·stdev of the endpoints with enough requests.
func (o *outliers) successRateEjections(now time.Time, dst []ejection) []ejection {
	var rates []float64
	for _, a := range o.order {
		if e := o.eps[a]; !e.ejected && e.requests >= o.cfg.MinRequests {
			rates = append(rates, float64(e.successes)/float64(e.requests))
		}
	}
	if len(rates) < o.cfg.MinHosts {
		return dst
	}
	var mean, sq float64
	for _, r := range rates {
		mean += r
	}
	mean /= float64(len(rates))
	for _, r := range rates {
		sq += (r - mean) * (r - mean)
	}
	limit := mean - o.cfg.StdevFactor*math.Sqrt(sq/float64(len(rates)))
	for _, a := range o.order {
		e := o.eps[a]
		if e.ejected || e.requests < o.cfg.MinRequests || float64(e.successes)/float64(e.requests) >= limit {
			continue
		}
		if !o.roomToEject() {
			break
		}
		dst = append(dst, o.eject(now, a, e, ejectSuccessRate))
	}
	return dst
}

// roomToEject: one more ejection keeps at most MaxEjectedFraction of the
// route's endpoints ejected.
func (o *outliers) roomToEject() bool {
	n := 0
	for _, e := range o.eps {
		if e.ejected {
			n++
		}
	}
	return float64(n+1) <= o.cfg.MaxEjectedFraction*float64(len(o.eps))
}

func (o *outliers) eject(now time.Time, addr string, e *outlierEndpoint, reason string) ejection {
	if !e.returned.IsZero() && now.Sub(e.returned) > o.cfg.MaxEjection {
		e.streak = 0 // healthy long enough: start from the base time again
	}
	e.streak++
	d := o.cfg.BaseEjection
	for k := 1; k < e.streak && d < o.cfg.MaxEjection; k++ {
		d *= 2
	}
	d = min(d, o.cfg.MaxEjection)
	e.ejected, e.reason, e.until, e.consecutive = true, reason, now.Add(d), 0
	o.ejections[reason]++
	return ejection{addr: addr, until: e.until, reason: reason}
}

// active lists the current ejections, to apply to a new policy.
func (o *outliers) active(dst []ejection) []ejection {
	for _, a := range o.order {
		if e := o.eps[a]; e.ejected {
			dst = append(dst, ejection{addr: a, until: e.until, reason: e.reason})
		}
	}
	return dst
}

// reset returns every endpoint and zeroes the counters and the ejection
// history; it returns the endpoints that were ejected, to lift in the policy.
func (o *outliers) reset() []ejection {
	lift := o.active(nil)
	for a := range o.eps {
		o.eps[a] = &outlierEndpoint{}
	}
	o.intervalStart = time.Time{}
	clear(o.ejections)
	o.returns = 0
	return lift
}

// state is the admin view.
func (o *outliers) state() adminapi.OutlierState {
	s := adminapi.OutlierState{
		Ejections: map[string]uint64{ejectConsecutive: o.ejections[ejectConsecutive], ejectSuccessRate: o.ejections[ejectSuccessRate]},
		Returns:   o.returns,
		Ejected:   []adminapi.EjectedEndpoint{},
	}
	for _, a := range o.order {
		if e := o.eps[a]; e.ejected {
			s.Ejected = append(s.Ejected, adminapi.EjectedEndpoint{Address: a, Reason: e.reason, Until: e.until.UTC(), Streak: e.streak})
		}
	}
	return s
}
