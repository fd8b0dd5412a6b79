package campaign

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/campaign/hostcpu"
	"github.com/prequalbench/prequalbench/load"
	"github.com/prequalbench/prequalbench/scenario"
)

// seriesFromProcStat turns successive synthetic /proc/stat readings (idle
// and busy ticks per second) into a window's series, as the sampler would.
func seriesFromProcStat(t *testing.T, idlePerSec []uint64) []load.Second {
	t.Helper()
	text := func(idle, busy uint64) []byte {
		return []byte(fmt.Sprintf("cpu  %d 0 0 %d 0 0 0 0 0 0\n", busy, idle))
	}
	var idle, busy uint64 = 1000, 1000
	prev, err := hostcpu.ParseStat(text(idle, busy))
	if err != nil {
		t.Fatal(err)
	}
	var series []load.Second
	for i, d := range idlePerSec {
		idle, busy = idle+d, busy+200-d // 2 CPUs × 100 ticks per second
		cur, err := hostcpu.ParseStat(text(idle, busy))
		if err != nil {
			t.Fatal(err)
		}
		series = append(series, load.Second{Second: i, CPU: &load.CPU{HostIdle: hostcpu.IdlePercent(prev, cur)}})
		prev = cur
	}
	return series
}

func healthyLoad() artifacts.LoadResult {
	return artifacts.LoadResult{
		Sent:    10000,
		Success: artifacts.Percentiles{P50: 20},
		SendLag: artifacts.Percentiles{P99: 1.5, Count: 10000},
		ConnCap: 4400,
	}
}

func TestJudge_HostWithoutHeadroomIsInvalid(t *testing.T) {
	// 10 s window, 2 CPUs: idle ticks per second out of 200. 19 ticks is
	// 9.5% idle (below the 10% floor), 40 is 20%.
	busy4 := []uint64{40, 19, 19, 40, 19, 40, 19, 40, 40, 40}
	busy3 := []uint64{40, 19, 19, 40, 19, 40, 40, 40, 40, 40}
	v := judge(healthyLoad(), seriesFromProcStat(t, busy4), 4400, false, 2)
	if v.Valid || len(v.Reasons) != 1 || !strings.Contains(v.Reasons[0], "host idle below 10% for 4 s of the window's 10") {
		t.Errorf("4 busy seconds: %+v; want invalid, host idle below 10%% for 4 s", v)
	}
	// A host-bound scenario saturates the host by design: the busy
	// seconds are what it measures, not a reason to discard the run.
	if v := judge(healthyLoad(), seriesFromProcStat(t, busy4), 4400, true, 2); !v.Valid {
		t.Errorf("4 busy seconds in a host-bound scenario: %+v, want valid", v)
	}
	if v := judge(healthyLoad(), seriesFromProcStat(t, busy3), 4400, false, 2); !v.Valid {
		t.Errorf("3 busy seconds (the allowance): %+v, want valid", v)
	}
	// A short window may have at most a quarter of its seconds busy: 2 of
	// 4 is saturation, 1 of 4 the odd burst.
	if v := judge(healthyLoad(), seriesFromProcStat(t, []uint64{19, 40, 19, 40}), 4400, false, 2); v.Valid || !strings.Contains(v.Reasons[0], "2 s of the window's 4 (at most 1 s allowed)") {
		t.Errorf("2 busy seconds of 4: %+v, want invalid", v)
	}
	if v := judge(healthyLoad(), seriesFromProcStat(t, []uint64{19, 40, 40, 40}), 4400, false, 2); !v.Valid {
		t.Errorf("1 busy second of 4: %+v, want valid", v)
	}
	// No host readings (kube env, simulator): nothing to judge the host by.
	if v := judge(healthyLoad(), []load.Second{{Second: 0}, {Second: 1}}, 4400, false, 2); !v.Valid {
		t.Errorf("no CPU readings: %+v, want valid", v)
	}
}

func TestJudge_GeneratorBehindAndCapBinding(t *testing.T) {
	if v := judge(healthyLoad(), nil, 4400, false, 2); !v.Valid || len(v.Reasons) != 0 {
		t.Errorf("healthy: %+v, want valid without reasons", v)
	}
	for _, tc := range []struct {
		name string
		edit func(*artifacts.LoadResult)
		want string
	}{
		{"lag over 5 ms", func(l *artifacts.LoadResult) { l.SendLag.P99 = 38 }, "send-lag p99 38.0 ms > max(5 ms, 1% of p50 20.0 ms)"},
		{"lag over 1% of a long p50", func(l *artifacts.LoadResult) { l.Success.P50 = 1200; l.SendLag.P99 = 13 }, "send-lag p99 13.0 ms > max(5 ms, 1% of p50 1200.0 ms)"},
		{"cap bound below rate × timeout", func(l *artifacts.LoadResult) { l.ConnCapBound = 11; l.ConnCap = 256 }, "11 of 10000 requests (0.11%) waited for a connection at the cap of 256, below the 4400 in flight"},
		{"dropped", func(l *artifacts.LoadResult) { l.Dropped = 3 }, "3 scheduled sends were dropped"},
		{"outstanding", func(l *artifacts.LoadResult) { l.Outstanding = 2 }, "2 requests of the window were still unanswered"},
	} {
		l := healthyLoad()
		tc.edit(&l)
		v := judge(l, nil, 4400, false, 2)
		if v.Valid || len(v.Reasons) != 1 || !strings.Contains(v.Reasons[0], tc.want) {
			t.Errorf("%s: %+v, want invalid: %q", tc.name, v, tc.want)
		}
	}
	// Under the limits: 12 ms lag at a 1.2 s p50, a trace (10 of 10000)
	// of cap waits.
	l := healthyLoad()
	l.Success.P50, l.SendLag.P99, l.ConnCapBound = 1200, 12, 10
	if v := judge(l, nil, 4400, false, 2); !v.Valid {
		t.Errorf("within limits: %+v, want valid", v)
	}
}

// A cap at or above peak rate × timeout holds back only requests that
// time out anyway (an overload scenario measures those failures): its
// binding is reported, not a reason to discard the run. Below that bound,
// or with the bound unknown, it invalidates the run.
func TestJudge_CapAtTheInFlightBoundDoesNotInvalidateAnOverload(t *testing.T) {
	overload := healthyLoad()
	overload.Timeouts, overload.Errors, overload.ErrorRate = 6000, 6000, 0.6
	overload.ConnCapBound = 900 // 9% waited: the run is at its timeouts
	if v := judge(overload, nil, 4400, false, 2); !v.Valid {
		t.Errorf("cap 4400 = rate × timeout: %+v, want valid", v)
	}
	if v := judge(overload, nil, 4401, false, 2); v.Valid || !strings.Contains(v.Reasons[0], "below the 4401 in flight") {
		t.Errorf("cap 4400 < bound 4401: %+v, want invalid", v)
	}
	if v := judge(overload, nil, 0, false, 2); v.Valid || strings.Contains(v.Reasons[0], "below the") {
		t.Errorf("bound unknown: %+v, want invalid without a bound in the reason", v)
	}
}

// An open loop against a server that never answers: every request of the
// window times out, is counted as a timeout (none outstanding, none
// dropped), and the run stays valid with the default-sized cap, while a
// cap below rate × timeout queues the load and invalidates it.
func TestJudge_EveryRequestTimingOutIsAValidMeasurement(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer srv.Close()
	l := scenario.Load{Open: []scenario.Phase{{Kind: scenario.PhaseConstant, Rate: 200}}, Timeout: "100ms"}
	run := func(maxConns int) (artifacts.LoadResult, artifacts.Validity) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := load.Run(ctx, load.Config{
			Targets:        []load.Target{{URL: srv.URL}},
			Open:           []load.Phase{{Kind: load.KindConstant, Duration: time.Second, Rate: 200}},
			Timeout:        100 * time.Millisecond,
			MaxConnections: maxConns,
		})
		if err != nil {
			t.Fatal(err)
		}
		s := res.Summary()
		return s, judge(s, nil, l.InFlightBound(), false, 2)
	}
	s, v := run(int(l.InFlightBound()))
	if s.Sent == 0 || s.Timeouts != s.Sent || s.Outstanding != 0 || s.Dropped != 0 || s.Succeeded != 0 {
		t.Fatalf("sent %d timeouts %d outstanding %d dropped %d succeeded %d: want every request a timeout",
			s.Sent, s.Timeouts, s.Outstanding, s.Dropped, s.Succeeded)
	}
	for _, r := range v.Reasons {
		// Send lag can be real on a loaded host; the accounting and the
		// cap must not invalidate the run.
		if !strings.Contains(r, "send-lag") {
			t.Errorf("cap %v = rate × timeout: invalid by %q", l.InFlightBound(), r)
		}
	}
	s, v = run(5)
	if s.ConnCapBound == 0 || v.Valid || !strings.Contains(strings.Join(v.Reasons, "\n"), "at the cap of 5, below the 20 in flight") {
		t.Errorf("cap 5 < 20: cap bound %d, validity %+v; want invalid by the cap", s.ConnCapBound, v)
	}
}

// withOwn gives each second of a series the campaign's own CPU use, in
// percent of one CPU per group (as the sampler reports it).
func withOwn(series []load.Second, gen, ingress, backends float64) []load.Second {
	for i := range series {
		c := *series[i].CPU
		c.Generator, c.Ingress, c.Backends = gen, ingress, backends
		series[i].CPU = &c
	}
	return series
}

func TestJudge_HostBusyIsAttributed(t *testing.T) {
	busy4 := []uint64{40, 19, 19, 40, 19, 40, 19, 40, 40, 40} // 9.5% idle in 4 s
	// An outside process: the campaign used 40% of one CPU (20% of the
	// host), so others took about 70% of the host.
	v := judge(healthyLoad(), withOwn(seriesFromProcStat(t, busy4), 10, 20, 10), 4400, false, 2)
	if v.Valid || v.HostCheck != artifacts.HostCheckOutside || !strings.Contains(v.Reasons[0], "processes outside the campaign using up to 70% of the host") {
		t.Errorf("outside process: %+v; want invalid for outside interference", v)
	}
	// The campaign's own processes: generator 30%, ingress 100% (the
	// prober), backends 50% of one CPU = 90% of the 2-CPU host.
	v = judge(healthyLoad(), withOwn(seriesFromProcStat(t, busy4), 30, 100, 50), 4400, false, 2)
	if !v.Valid || v.HostCheck != artifacts.HostCheckSaturated ||
		!strings.Contains(v.Saturation, "this campaign's own processes (generator, ingress, backends) used 90% of the host (generator 15%, ingress 50%, backends 25%") ||
		!strings.Contains(v.Saturation, "cannot be served by this campaign's own processes on this host") {
		t.Errorf("own saturation: %+v; want valid with the saturation said", v)
	}
	// The ingress alone (the policy, with its probes) took the host: the
	// policy is named.
	v = judge(healthyLoad(), withOwn(seriesFromProcStat(t, busy4), 0, 182, 0), 4400, false, 2)
	if !v.Valid || v.HostCheck != artifacts.HostCheckSaturated ||
		!strings.Contains(v.Saturation, "the ingress, where the policy runs, used 91% of the host") ||
		!strings.Contains(v.Saturation, "cannot be served with this policy on this host") {
		t.Errorf("ingress saturation: %+v; want valid with the policy named", v)
	}
	// The review's case: own 76% of the host, outside about 15%, idle
	// 9.5%. The campaign alone would have left 24% idle: the outside load
	// took the headroom, so the run is invalid, not charged to the policy.
	v = judge(healthyLoad(), withOwn(seriesFromProcStat(t, busy4), 30, 100, 22), 4400, false, 2)
	if v.Valid || v.HostCheck != artifacts.HostCheckOutside || v.Saturation != "" {
		t.Errorf("own 76%% + outside 15%%: %+v; want invalid for outside interference", v)
	}
	// No reading of the host at all (the simulator): not checked.
	if v := judge(healthyLoad(), []load.Second{{Second: 0}}, 4400, false, 2); !v.Valid || v.HostCheck != artifacts.HostCheckNotMeasured {
		t.Errorf("no readings: %+v; want valid, host check not measured", v)
	}
	if v := judge(healthyLoad(), withOwn(seriesFromProcStat(t, busy4), 0, 0, 0), 4400, true, 2); !v.Valid || v.HostCheck != artifacts.HostCheckSkipped {
		t.Errorf("host-bound: %+v; want the check skipped", v)
	}
	v = judge(healthyLoad(), seriesFromProcStat(t, []uint64{40, 40, 40}), 4400, false, 2)
	if !v.Valid || v.HostCheck != artifacts.HostCheckPassed {
		t.Errorf("headroom: %+v; want passed", v)
	}
}

// Where the environment cannot list its processes (kind, kube, external),
// their CPU would count as outside load: the host is not judged, and the
// run says why.
func TestHostCheckPlan_OnlyWhereProcessesAreListed(t *testing.T) {
	if sample, note := hostCheckPlan(false, true); !sample || note != "" {
		t.Errorf("local: sample %v note %q; want the host sampled", sample, note)
	}
	if sample, note := hostCheckPlan(false, false); sample || !strings.Contains(note, "not on this host's process list") {
		t.Errorf("unlisted processes: sample %v note %q; want not checked, with the reason", sample, note)
	}
	if sample, note := hostCheckPlan(true, true); sample || note == "" {
		t.Errorf("load driven by the environment: sample %v note %q; want not checked, with the reason", sample, note)
	}
}
