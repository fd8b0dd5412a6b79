package load

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"
)

// The accounting of 4 shards, merged, is exactly the accounting of one
// generator that recorded the union of their requests: the same
// histograms (bucket for bucket), counters and series, per-second
// percentiles included.
func TestMerge_ShardsEqualOneGenerator(t *testing.T) {
	const shards, seconds, perSecond = 4, 5, 997
	fresh := func() *recorder {
		r := newRecorder(time.Second)
		r.keepSec = true
		r.windowEnd = time.Now().Add(time.Hour)
		return r
	}
	whole := fresh()
	parts := make([]*recorder, shards)
	for i := range parts {
		parts[i] = fresh()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var planned [shards]uint64
	statuses := []int{200, 200, 200, 204, 302, 503, 404, 0, 0}
	for s := range seconds {
		for k := range perSecond {
			lag := time.Duration(rng.IntN(5000)) * time.Microsecond
			lat := time.Duration(1+rng.IntN(3_000_000)) * time.Microsecond
			out := outcome{status: statuses[rng.IntN(len(statuses))], gotConn: true, connWait: time.Duration(rng.IntN(3000)) * time.Microsecond, capBound: rng.IntN(2) == 0}
			if out.status == 0 {
				out.err, out.timeout, out.gotConn = errors.New("no answer"), rng.IntN(2) == 0, false
			}
			if rng.IntN(50) == 0 {
				lat = 70 * time.Second // clamped
			}
			planned[(s*perSecond+k)%shards]++
			for _, r := range []*recorder{whole, parts[(s*perSecond+k)%shards]} {
				r.sent(lag, true)
				r.done(lat, out)
			}
		}
		whole.closeSecond(nil)
		for _, p := range parts {
			p.closeSecond(nil)
		}
	}
	want := whole.result()
	want.Model, want.Duration, want.Planned, want.TargetRate = ModelOpen, seconds*time.Second, seconds*perSecond, perSecond
	var results []*Result
	for i, p := range parts {
		r := p.result()
		r.Model, r.Duration, r.Planned = ModelOpen, seconds*time.Second, planned[i]
		r.TargetRate = float64(r.Planned) / r.Duration.Seconds()
		results = append(results, r)
	}
	got, err := Merge(results)
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string][2]interface{ TotalCount() int64 }{
		"success": {want.Histogram, got.Histogram}, "pessimistic": {want.Pessimistic, got.Pessimistic},
		"sendlag": {want.SendLag, got.SendLag}, "connwait": {want.ConnWait, got.ConnWait},
	} {
		if h[0].TotalCount() == 0 {
			t.Fatalf("%s: the test recorded nothing", name)
		}
	}
	if !want.Histogram.Equals(got.Histogram) || !want.Pessimistic.Equals(got.Pessimistic) ||
		!want.SendLag.Equals(got.SendLag) || !want.ConnWait.Equals(got.ConnWait) {
		t.Error("merged histograms differ from the one generator's")
	}
	if ws, gs := want.Summary(), got.Summary(); !reflect.DeepEqual(ws, gs) {
		t.Errorf("summary:\n got %+v\nwant %+v", gs, ws)
	}
	if len(got.Series) != seconds {
		t.Fatalf("series has %d rows, want %d", len(got.Series), seconds)
	}
	for i := range want.Series {
		w, g := want.Series[i], got.Series[i]
		if !w.Histogram.Equals(g.Histogram) {
			t.Errorf("second %d: histograms differ", i)
		}
		w.Histogram, g.Histogram = nil, nil
		if w != g {
			t.Errorf("second %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

// Without the rows' histograms, per-second percentiles of several
// generators cannot be merged exactly, and Merge says so.
func TestMerge_RefusesRowsWithoutHistograms(t *testing.T) {
	a := &Result{Model: ModelOpen, Series: []Second{{Succeeded: 3, P50: time.Millisecond}}}
	b := &Result{Model: ModelOpen, Series: []Second{{Succeeded: 2, P50: 2 * time.Millisecond}}}
	if _, err := Merge([]*Result{a, b}); err == nil {
		t.Error("merged per-second percentiles without histograms")
	}
	if _, err := Merge([]*Result{a, {Model: ModelClosed}}); err == nil {
		t.Error("merged an open loop with a closed one")
	}
}

// Four shards of one open-loop schedule, run one after the other against
// a loopback server, send exactly the requests (count and targets) one
// generator sends, and their merged counters equal its counters.
func TestShards_SendTheWholeScheduleOnce(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path]++
		mu.Unlock()
	}))
	defer srv.Close()
	cfg := Config{
		Targets: []Target{{URL: srv.URL + "/a", Weight: 3}, {URL: srv.URL + "/b", Weight: 1}, {URL: srv.URL + "/c", Weight: 1}},
		Open:    []Phase{{Kind: KindConstant, Rate: 200, Duration: 500 * time.Millisecond}, {Kind: KindRamp, From: 200, To: 400, Duration: 500 * time.Millisecond}},
		Warmup:  200 * time.Millisecond, WarmupRate: 100, Seed: 7, SecondHistograms: true,
	}
	run := func(c Config) (*Result, map[string]int) {
		mu.Lock()
		seen = map[string]int{}
		mu.Unlock()
		res, err := Run(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return res, seen
	}
	one, oneSeen := run(cfg)
	var parts []*Result
	union := map[string]int{}
	for i := range 4 {
		c := cfg
		c.Shard, c.Shards = i, 4
		r, s := run(c)
		if r.Sent == 0 || r.Sent >= one.Sent {
			t.Errorf("shard %d sent %d of %d", i, r.Sent, one.Sent)
		}
		parts = append(parts, r)
		for k, v := range s {
			union[k] += v
		}
	}
	if !reflect.DeepEqual(union, oneSeen) {
		t.Errorf("requests per path: shards %v, one generator %v", union, oneSeen)
	}
	m, err := Merge(parts)
	if err != nil {
		t.Fatal(err)
	}
	if m.Sent != one.Sent || m.Succeeded != one.Succeeded || m.Completed != one.Completed || m.Histogram.TotalCount() != one.Histogram.TotalCount() {
		t.Errorf("merged sent %d succeeded %d completed %d hist %d; one generator %d %d %d %d",
			m.Sent, m.Succeeded, m.Completed, m.Histogram.TotalCount(), one.Sent, one.Succeeded, one.Completed, one.Histogram.TotalCount())
	}
	if m.TargetRate != one.TargetRate || m.Planned != one.Planned {
		t.Errorf("merged target rate %v (%d planned), one generator %v (%d)", m.TargetRate, m.Planned, one.TargetRate, one.Planned)
	}
}

// With sends dropped (every worker stuck past the window plus the
// timeout), the merged target rate is still exactly one generator's: the
// shards report what the schedule planned for them, not what they got
// to offer (which left the drops out, so the merge read low).
func TestMerge_TargetRateWithDrops(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	cfg := Config{
		Targets: []Target{{URL: srv.URL + "/x"}},
		Open:    []Phase{{Kind: KindConstant, Rate: 50, Duration: time.Second}},
		Timeout: 200 * time.Millisecond, MaxWorkers: 2, Seed: 1,
	}
	one, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var parts []*Result
	for i := range 2 {
		c := cfg
		c.MaxWorkers = 1 // each shard's part of the 2
		c.Shard, c.Shards = i, 2
		r, err := Run(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, r)
	}
	m, err := Merge(parts)
	if err != nil {
		t.Fatal(err)
	}
	if one.Dropped == 0 || m.Dropped == 0 {
		t.Fatalf("nothing dropped (one generator %d, shards %d): the test needs drops", one.Dropped, m.Dropped)
	}
	if one.Planned != 50 || one.TargetRate != 50 {
		t.Errorf("one generator: planned %d, target %v/s; want 50, 50", one.Planned, one.TargetRate)
	}
	if m.TargetRate != one.TargetRate || m.Planned != one.Planned {
		t.Errorf("merged target %v/s (%d planned, %d dropped), one generator %v/s (%d planned, %d dropped)",
			m.TargetRate, m.Planned, m.Dropped, one.TargetRate, one.Planned, one.Dropped)
	}
}
