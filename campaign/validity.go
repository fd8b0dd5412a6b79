package campaign

import (
	"fmt"
	"math"
	"net/url"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/load"
)

// Thresholds of a run's validity check (judge). A run that breaks one
// measured the host or the load generator, not the system under test.
const (
	// HostIdleFloor is the host idle share (percent of all CPUs) below
	// which a second of the window had no headroom: the ingress, the
	// backends and the generator were then competing for CPU.
	HostIdleFloor = 10.0
	// HostBusySeconds is how many such seconds a window may have: a
	// couple are the odd burst of another process, more is saturation.
	// A short window may have at most a quarter of its seconds busy
	// (HostBusyShare), so 3 of a 4 s window cannot pass.
	HostBusySeconds = 3
	HostBusyShare   = 0.25
	// SendLagFloor and SendLagShare bound the send-lag p99: at most
	// max(SendLagFloor, SendLagShare × the success p50). Below 5 ms lag is
	// timer granularity and scheduling noise; above 1% of the p50 the
	// generator's own delay starts to show in the latency it reports.
	SendLagFloor = 5.0 // ms
	SendLagShare = 0.01
	// CapBoundShare is the share of sends that may wait for a connection
	// at the cap: more than a trace means the cap, not the policy,
	// queued the requests (unless the cap admits every request that can
	// still succeed; see judge).
	CapBoundShare = 0.001
)

// judge checks one run's measurement: the host had headroom, the
// generator kept its schedule and the connection cap did not queue the
// load. Each failed check adds a reason. inFlightBound is the most
// requests the load can have in flight while each ends within the timeout
// (scenario.Load.InFlightBound; 0 = unknown): a cap at or above it binds
// only when requests are failing by the timeout anyway, as in an overload
// scenario, which measures exactly those failures. Its binding is then
// reported (the report's warnings), not a reason to discard the run.
//
// hostBound (scenario protocol.hostBound) skips the host-idle check: the
// scenario measures the saturated host's throughput itself.
func judge(l artifacts.LoadResult, series []load.Second, inFlightBound float64, hostBound bool) artifacts.Validity {
	var reasons []string
	if busy, measured := busySeconds(series); measured > 0 && !hostBound {
		allowed := min(HostBusySeconds, int(math.Ceil(HostBusyShare*float64(measured))))
		if busy > allowed {
			reasons = append(reasons, fmt.Sprintf("host idle below %g%% for %d s of the window's %d (at most %d s allowed): the host, not the system, set the pace",
				HostIdleFloor, busy, measured, allowed))
		}
	}
	if l.SendLag.Count > 0 {
		limit := math.Max(SendLagFloor, SendLagShare*l.Success.P50)
		if l.SendLag.P99 > limit {
			reasons = append(reasons, fmt.Sprintf("send-lag p99 %.1f ms > max(%g ms, %g%% of p50 %.1f ms): the load generator fell behind its schedule",
				l.SendLag.P99, SendLagFloor, 100*SendLagShare, l.Success.P50))
		}
	}
	capQueuesSuccesses := !(inFlightBound > 0 && float64(l.ConnCap) >= inFlightBound)
	if l.Sent > 0 && float64(l.ConnCapBound) > CapBoundShare*float64(l.Sent) && capQueuesSuccesses {
		below := ""
		if inFlightBound > 0 {
			below = fmt.Sprintf(", below the %.0f in flight the load needs (peak rate × timeout)", inFlightBound)
		}
		reasons = append(reasons, fmt.Sprintf("%d of %d requests (%.2f%%) waited for a connection at the cap of %d%s: the cap queued the load",
			l.ConnCapBound, l.Sent, 100*float64(l.ConnCapBound)/float64(l.Sent), l.ConnCap, below))
	}
	if l.Dropped > 0 {
		reasons = append(reasons, fmt.Sprintf("%d scheduled sends were dropped (every load worker stuck for a whole timeout)", l.Dropped))
	}
	if l.Outstanding > 0 {
		reasons = append(reasons, fmt.Sprintf("%d requests of the window were still unanswered when the run stopped waiting", l.Outstanding))
	}
	return artifacts.Validity{Valid: len(reasons) == 0, Reasons: reasons}
}

// busySeconds counts the window's seconds with the host idle below
// HostIdleFloor, out of the measured seconds (those with a host reading).
func busySeconds(series []load.Second) (busy, measured int) {
	for _, s := range series {
		if s.CPU == nil || math.IsNaN(s.CPU.HostIdle) {
			continue
		}
		measured++
		if s.CPU.HostIdle < HostIdleFloor {
			busy++
		}
	}
	return busy, measured
}

// hostOf returns the host:port of a URL, or the URL itself when it does
// not parse.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return u.Host
}
