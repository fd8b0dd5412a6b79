// Package loadbalancer holds the backend-selection policies as pure state
// machines: Prequal (NSDI '24) and the classic baselines.
//
// A policy starts no goroutine, opens no socket and never reads the wall
// clock. Time arrives as a now argument and randomness from a *rand.Rand the
// caller owns, so the ingress can drive a policy with real time and HTTP while
// tests drive it with a fake clock and a fixed seed.
//
// Policies are not safe for concurrent use: the caller holds one lock per
// route around every call. Calls are short (O(pool size) at most) and Pick
// does not allocate.
package loadbalancer

import (
	"errors"
	"math/rand/v2"
	"time"
)

// ErrNoEndpoints is returned by Pick when the policy has no endpoints.
var ErrNoEndpoints = errors.New("loadbalancer: no endpoints")

// Policy chooses an endpoint for each request and learns from what happens.
type Policy interface {
	// Name is the algorithm name, as accepted by New.
	Name() string

	// SetEndpoints replaces the endpoint set (addresses, "host:port").
	// State of endpoints that stay is kept; state of those that go is dropped.
	SetEndpoints(now time.Time, endpoints []string)

	// Pick chooses the endpoint for one request. The returned Picked must be
	// handed back to Done exactly once when the request finishes.
	Pick(now time.Time, rng *rand.Rand) (Picked, error)

	// Done reports that a request picked earlier finished. status is the HTTP
	// status code, or 0 when no response came (connection error, timeout).
	Done(now time.Time, p Picked, latency time.Duration, status int)

	// ProbesDue appends to dst the endpoints to probe now and returns it:
	// the probes owed by queries since the last call, plus idle probes when
	// no query has triggered one for a while. Policies that do not probe
	// return dst unchanged. Call it after each Pick and from an idle ticker.
	ProbesDue(now time.Time, rng *rand.Rand, dst []string) []string

	// ProbeResult hands in a probe answer received at now (the local receipt
	// time, never the backend's clock).
	ProbeResult(now time.Time, endpoint string, r ProbeReply)

	// ProbeFailed reports a probe that produced no usable answer.
	ProbeFailed(now time.Time, endpoint string, reason ProbeOutcome)

	// Reset forgets everything learned and zeroes the per-run counters; it
	// keeps the endpoints. In-flight requests stay counted: their Done calls
	// are still to come.
	Reset(now time.Time)

	// Stats returns a copy of the policy's counters for snapshots and metrics.
	Stats() Stats
}

// Picked is the token for one picked request.
type Picked struct {
	// Endpoint is the chosen address.
	Endpoint string
	// Fallback is true when Prequal had too few usable probes and chose
	// uniformly at random.
	Fallback bool
	// Hot is true when Prequal chose among probes that were all hot.
	Hot bool

	index   int    // position in the endpoint slice at pick time
	gen     uint64 // endpoint-set generation at pick time
	explore bool   // prequal: this request explores a replica of unknown latency
	at      int64  // the pick's clock reading (base.nowClock)
	counted bool   // prequal: compensation added this request to its pool entry
}

// ProbeReply is a backend's answer to a probe.
type ProbeReply struct {
	// RIF is the backend's requests in flight.
	RIF int
	// Latency is the backend's latency estimate at its current RIF.
	Latency time.Duration
	// LatencyKnown is false when the backend has no recent history; Latency
	// is then meaningless and must not be read as 0 ms.
	LatencyKnown bool
	// QPS, EPS and Utilization are the backend's load report over its
	// last second (see the contract): completed requests per second, 5xx
	// answers per second, and the busy fraction of its slots (0..1).
	// LoadKnown is true only when all three were present; a policy must
	// treat them as unknown otherwise (an old backend).
	QPS, EPS, Utilization float64
	LoadKnown             bool
}

// ServerFeedback is what a backend piggybacks on a response (the
// X-Prequal-Queue and X-Prequal-Service-Us headers): its queue length
// (waiting, not in service) when it answered and this request's service
// time. Known is false when the response carried neither.
type ServerFeedback struct {
	Known       bool
	QueueSize   int
	ServiceTime time.Duration
}

// FeedbackUser is implemented by policies that read server feedback
// (Caps.Feedback). The caller hands it in, under the route lock, just
// before Done for the same attempt, when the response carried it.
type FeedbackUser interface {
	ServerFeedback(now time.Time, p Picked, fb ServerFeedback)
}

// SyncPicker is the optional two-phase pick of synchronous probing
// (Caps.Sync; the paper's sync mode, §A.4 of the anchors): per query the
// policy names the replicas to probe, the caller probes them concurrently
// and hands back what answered, and the policy picks from those answers
// alone. The caller must not hold the route lock while it waits, so other
// requests proceed:
//
//	lock;   targets = PlanSync(now, rng, buf[:0]); wait, timeout := SyncWait(); unlock
//	probe every target concurrently; stop at `wait` answers or after `timeout`
//	lock;   p, err = PickSync(now, rng, answers); unlock   // then Done(p) as usual
//
// answers holds the answers of this query's probes only, received after
// its PlanSync (never an older one); a target that failed or did not answer
// in time is simply absent (or has OK false). With no usable answer
// PickSync falls back to a uniformly random healthy endpoint, counted as a
// fallback. Pick on a SyncPicker is that same fallback, for callers that
// do not probe synchronously. Probes of sync mode are not fed to
// ProbeResult.
type SyncPicker interface {
	PlanSync(now time.Time, rng *rand.Rand, dst []string) []string
	SyncWait() (answers int, timeout time.Duration)
	PickSync(now time.Time, rng *rand.Rand, answers []SyncAnswer) (Picked, error)
}

// SyncAnswer is one probe answer of a synchronous pick.
type SyncAnswer struct {
	Endpoint string
	Reply    ProbeReply
	OK       bool // false: the probe failed; Reply is meaningless
	// Outcome is why the probe failed when OK is false (ProbeStatus,
	// ProbeMalformed, ProbeStale, ProbeTimeout, ...), counted as such in
	// Stats.ProbeOutcomes; a caller that leaves it empty has it counted
	// as ProbeTimeout.
	Outcome ProbeOutcome
}

// ProbeOutcome classifies a probe's result.
type ProbeOutcome string

// Probe outcomes. Every outcome other than ProbeOK is a failure reason.
const (
	ProbeOK        ProbeOutcome = "ok"
	ProbeTimeout   ProbeOutcome = "timeout"   // no answer in time, or connection error
	ProbeStatus    ProbeOutcome = "status"    // HTTP status other than 200
	ProbeMalformed ProbeOutcome = "malformed" // body is not a valid probe reply
	ProbeStale     ProbeOutcome = "stale"     // backend timestamp too far from our clock
	ProbeDropped   ProbeOutcome = "dropped"   // never sent: the probe queue was full
)

// ProbeOutcomes lists every outcome in a fixed order, for stable output.
var ProbeOutcomes = []ProbeOutcome{ProbeOK, ProbeTimeout, ProbeStatus, ProbeMalformed, ProbeStale, ProbeDropped}

// Stats are a policy's counters since the last Reset.
type Stats struct {
	Algorithm string `json:"algorithm"`
	// Endpoints in the order of the current endpoint set.
	Endpoints []EndpointStats `json:"endpoints"`
	// Picks is the total number of picks.
	Picks uint64 `json:"picks"`
	// Fallbacks counts picks made uniformly at random because fewer than
	// the minimum number of usable probes were in the pool.
	Fallbacks uint64 `json:"fallbacks"`
	// HotPicks counts picks where every usable probe was hot; ColdPicks
	// those that chose the coldest-fastest probe.
	HotPicks  uint64 `json:"hot_picks"`
	ColdPicks uint64 `json:"cold_picks"`
	// Aversions counts picks that passed over an endpoint whose recent
	// error rate is above AversionThreshold (see erroraversion.go).
	Aversions uint64 `json:"error_aversions"`
	// ProbesPlanned counts probes handed out by ProbesDue.
	ProbesPlanned uint64 `json:"probes_planned"`
	// ProbeOutcomes counts probe results and failures by outcome: every
	// entry of ProbeOutcomes, plus "other" for unlisted reasons if any.
	ProbeOutcomes map[ProbeOutcome]uint64 `json:"probe_outcomes"`
	// PoolSize is the number of probes in the pool now.
	PoolSize int `json:"pool_size"`
	// PoolRemovals counts probes removed from the pool, by reason
	// ("overflow", "reuse", "age", "oldest", "worst", and "replaced" when a
	// newer answer from the same replica took an entry's place).
	PoolRemovals map[string]uint64 `json:"pool_removals,omitempty"`
	// ReuseBudget is Prequal's b_reuse in force (Eq. 1 for the current
	// fleet size, bounded by MaxReuse): the most picks one probe may
	// serve; 0 for policies without a pool. ReusedPicks says how many
	// picks actually went to a probe already used.
	ReuseBudget float64 `json:"reuse_budget,omitempty"`
	// StaleAnswers counts probe answers dropped because a newer answer from
	// the same replica had already been received.
	StaleAnswers uint64 `json:"stale_answers,omitempty"`
	// ProbesCoalesced counts probes a pool policy owed but did not send
	// because every remaining target already had a probe in flight.
	ProbesCoalesced uint64 `json:"probes_coalesced,omitempty"`
	// ReusedPicks counts picks made on a probe already used for a pick
	// (a pool policy's reuse in practice, under its budget).
	ReusedPicks uint64 `json:"reused_picks,omitempty"`
	// SlowHeld counts probe answers with no latency that slow memory
	// answered with a replica's remembered, far slower latency
	// (PrequalConfig.SlowMemory): how often an exploration was withheld.
	SlowHeld uint64 `json:"slow_held,omitempty"`
}

// EndpointStats are per-endpoint counters.
type EndpointStats struct {
	Address  string `json:"address"`
	Picks    uint64 `json:"picks"`
	InFlight int    `json:"in_flight"`
	// Errors counts finished requests with status 0 or >= 500.
	Errors uint64 `json:"errors"`
	// Averse is true while the endpoint's recent error rate makes the
	// policy avoid it.
	Averse bool `json:"averse,omitempty"`
}
