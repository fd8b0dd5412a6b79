package campaign

import (
	"fmt"
	"math"
	"net/url"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/load"
	"github.com/prequalbench/prequalbench/stats"
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
	// OwnFloor is the share of the host (percent of all CPUs) the
	// campaign's own processes (the generator, the ingress replicas and
	// the backends) must take in a busy second for it to be charged to
	// them: their share alone leaves less than HostIdleFloor idle. That
	// is the campaign's cost on this host, reported rather than
	// discarded. Below it, outside processes pushed the idle share under
	// the floor, and the second counts against the run.
	OwnFloor = artifacts.HostOwnFloor
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

// judge checks one run's measurement: the host had headroom left by
// processes outside the campaign, the generator kept its schedule and the
// connection cap did not queue the load. Each failed check adds a reason.
// inFlightBound is the most requests the load can have in flight while
// each ends within the timeout (scenario.Load.InFlightBound; 0 = unknown):
// a cap at or above it binds only when requests are failing by the
// timeout anyway, as in an overload scenario, which measures exactly
// those failures. Its binding is then reported (the report's warnings),
// not a reason to discard the run.
//
// A second without host headroom is attributed: when the campaign's own
// processes (cpus is the host's CPU count, to put their per-CPU readings
// on the host's scale) used at least OwnFloor of the host, the run stays
// valid and Validity.Saturation says so; otherwise an outside process
// took the headroom and the run is invalid. hostBound (scenario
// protocol.hostBound) skips the host check: the scenario measures the
// saturated host's throughput itself.
func judge(l artifacts.LoadResult, series []load.Second, inFlightBound float64, hostBound bool, cpus int) artifacts.Validity {
	var reasons []string
	h := attribute(series, cpus)
	check := artifacts.HostCheckPassed
	var saturation string
	switch {
	case h.measured == 0:
		check = artifacts.HostCheckNotMeasured
	case hostBound:
		check = artifacts.HostCheckSkipped
	default:
		allowed := min(HostBusySeconds, int(math.Ceil(HostBusyShare*float64(h.measured))))
		if h.unattributed > 0 && h.outside+h.unattributed > allowed {
			// Whose CPU it was is unknown (a cluster whose pods' CPU could
			// not be read): the host had no headroom, and that alone
			// makes the measurement one of a saturated host.
			check = artifacts.HostCheckUnattributed
			reasons = append(reasons, fmt.Sprintf("host idle below %g%% for %d s of the window's %d (at most %d s allowed), and the campaign's own share of it could not be read (see the host check note): the host, not the system, may have set the pace",
				HostIdleFloor, h.outside+h.unattributed, h.measured, allowed))
		} else if h.outside > allowed {
			check = artifacts.HostCheckOutside
			reasons = append(reasons, fmt.Sprintf("host idle below %g%% for %d s of the window's %d (at most %d s allowed), with processes outside the campaign using up to %.0f%% of the host: outside interference, not the system, set the pace",
				HostIdleFloor, h.outside, h.measured, allowed, h.outsidePeak))
		} else if h.own > allowed {
			check = artifacts.HostCheckSaturated
			// The policy runs in the ingress (with its probes): it is
			// named only when the ingress alone took the host.
			whose, served := "this campaign's own processes (generator, ingress, backends)", "by this campaign's own processes"
			if h.ingress >= OwnFloor {
				whose, served = "the ingress, where the policy runs,", "with this policy"
			}
			saturation = fmt.Sprintf("%s used %.0f%% of the host (generator %.0f%%, ingress %.0f%%, backends %.0f%%; median of the %d s of the window's %d without headroom): this load cannot be served %s on this host",
				whose, h.ownMedian, h.gen, h.ingress, h.backends, h.own, h.measured, served)
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
	return artifacts.Validity{Valid: len(reasons) == 0, Reasons: reasons, HostCheck: check, Saturation: saturation}
}

// hostUse is a window's busy seconds, attributed.
type hostUse struct {
	// measured seconds had a host reading; outside and own count those
	// below HostIdleFloor, by whose CPU it was, unattributed those
	// without a reading of the ingress and the backends.
	measured, outside, own, unattributed int
	// outsidePeak is the most outside processes took of the host in an
	// outside-busy second; ownMedian and the groups the median share of
	// the host of the campaign's processes over the own-busy seconds.
	outsidePeak                       float64
	ownMedian, gen, ingress, backends float64
}

// attribute sorts the window's seconds without host headroom into those
// an outside process caused and those the campaign's own processes did.
// A process group without a reading counts as using nothing; an
// environment that cannot list its processes is not sampled at all
// (hostCheckPlan).
func attribute(series []load.Second, cpus int) hostUse {
	var h hostUse
	cpus = max(cpus, 1)
	share := func(v float64) float64 {
		if math.IsNaN(v) {
			return 0
		}
		return v / float64(cpus)
	}
	var own, gen, in, be []float64
	for _, s := range series {
		if s.CPU == nil || math.IsNaN(s.CPU.HostIdle) {
			continue
		}
		h.measured++
		if s.CPU.HostIdle >= HostIdleFloor {
			continue
		}
		if math.IsNaN(s.CPU.Ingress) && math.IsNaN(s.CPU.Backends) {
			h.unattributed++
			continue
		}
		g, i, b := share(s.CPU.Generator), share(s.CPU.Ingress), share(s.CPU.Backends)
		outside := 100 - s.CPU.HostIdle - (g + i + b)
		if g+i+b < OwnFloor {
			h.outside++
			h.outsidePeak = max(h.outsidePeak, outside)
			continue
		}
		h.own++
		own, gen, in, be = append(own, g+i+b), append(gen, g), append(in, i), append(be, b)
	}
	h.ownMedian, h.gen, h.ingress, h.backends = stats.Median(own), stats.Median(gen), stats.Median(in), stats.Median(be)
	return h
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
