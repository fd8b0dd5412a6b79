package ingress

import (
	"fmt"
	"testing"
	"time"
)

var o0 = time.Unix(1_700_000_000, 0)

func oat(ms int) time.Time { return o0.Add(time.Duration(ms) * time.Millisecond) }

func newOutliersT(t *testing.T, n int, mod func(*OutlierConfig)) (*outliers, []string) {
	t.Helper()
	var cfg OutlierConfig
	if mod != nil {
		mod(&cfg)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	o := newOutliers(cfg)
	eps := make([]string, n)
	for i := range eps {
		eps[i] = fmt.Sprintf("127.0.0.1:%d", 4001+i)
	}
	o.setEndpoints(eps)
	return o, eps
}

func TestOutliers_ConsecutiveFailuresEject(t *testing.T) {
	o, eps := newOutliersT(t, 4, nil)
	var ej []ejection
	for ms := range 4 {
		ej = o.observe(oat(ms), eps[0], 502, ej)
	}
	ej = o.observe(oat(4), eps[0], 200, ej) // a success breaks the run
	for ms := 5; ms < 9; ms++ {
		ej = o.observe(oat(ms), eps[0], 0, ej)
	}
	if len(ej) != 0 {
		t.Fatalf("ejected after 4 failures in a row: %+v", ej)
	}
	ej = o.observe(oat(9), eps[0], 504, ej)
	if len(ej) != 1 || ej[0].addr != eps[0] || ej[0].reason != ejectConsecutive || !ej[0].until.Equal(oat(9).Add(time.Second)) {
		t.Fatalf("after 5 failures in a row: %+v, want %s ejected for 1 s", ej, eps[0])
	}
	// 499 is the client's doing: it neither counts nor breaks a run.
	o2, eps2 := newOutliersT(t, 4, nil)
	var ej2 []ejection
	for ms := range 20 {
		ej2 = o2.observe(oat(ms), eps2[1], 499, ej2)
	}
	if len(ej2) != 0 {
		t.Fatalf("499s ejected an endpoint")
	}
}

func TestOutliers_NeverMoreThanMaxFraction(t *testing.T) {
	o, eps := newOutliersT(t, 4, nil) // 50%: at most 2 of 4
	var ej []ejection
	for _, ep := range eps {
		for ms := range 5 {
			ej = o.observe(oat(ms), ep, 0, ej)
		}
	}
	if len(ej) != 2 {
		t.Fatalf("%d of 4 endpoints ejected, want 2 (50%%)", len(ej))
	}
	one, one1 := newOutliersT(t, 1, nil)
	var ej1 []ejection
	for ms := range 10 {
		ej1 = one.observe(oat(ms), one1[0], 0, ej1)
	}
	if len(ej1) != 0 {
		t.Fatalf("the only endpoint of a route was ejected")
	}
}

func TestOutliers_ReturnAndGrowingTime(t *testing.T) {
	o, eps := newOutliersT(t, 3, func(c *OutlierConfig) { c.MaxEjection = 3 * time.Second })
	now := 0
	var want []time.Duration
	var got []time.Duration
	for round := range 4 {
		var ej []ejection
		for range 5 {
			ej = o.observe(oat(now), eps[0], 500, ej)
			now++
		}
		if len(ej) != 1 {
			t.Fatalf("round %d: %d ejections", round, len(ej))
		}
		got = append(got, ej[0].until.Sub(oat(now-1)))
		want = append(want, min(time.Second<<round, 3*time.Second))
		// Not back before its time, back at it.
		o.tick(ej[0].until.Add(-time.Millisecond), nil)
		if !o.eps[eps[0]].ejected {
			t.Fatalf("round %d: returned before its time", round)
		}
		o.tick(ej[0].until, nil)
		if o.eps[eps[0]].ejected {
			t.Fatalf("round %d: not returned at its time", round)
		}
		if o.returns != uint64(round+1) {
			t.Fatalf("round %d: returns = %d", round, o.returns)
		}
		now = int(ej[0].until.Sub(o0) / time.Millisecond)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ejection times %v, want %v (doubling, capped)", got, want)
	}
	// Healthy for longer than MaxEjection: the next ejection is short again.
	now += 4000
	var ej []ejection
	for range 5 {
		ej = o.observe(oat(now), eps[0], 500, ej)
	}
	if d := ej[0].until.Sub(oat(now)); d != time.Second {
		t.Fatalf("after a long healthy spell the ejection lasts %v, want the base 1 s", d)
	}
}

func TestOutliers_SuccessRateOutlier(t *testing.T) {
	o, eps := newOutliersT(t, 10, nil)
	var ej []ejection
	// One interval: 40 requests each; eps[9] fails every other one (never
	// 5 in a row), the others never.
	for k := range 40 {
		for i, ep := range eps {
			status := 200
			if i == 9 && k%2 == 0 {
				status = 500
			}
			ej = o.observe(oat(k), ep, status, ej)
		}
	}
	if len(ej) != 0 {
		t.Fatalf("ejected before the interval ended: %+v", ej)
	}
	ej = o.tick(oat(1000), ej)
	if len(ej) != 1 || ej[0].addr != eps[9] || ej[0].reason != ejectSuccessRate {
		t.Fatalf("success-rate ejections %+v, want %s", ej, eps[9])
	}
	// Too few hosts with enough requests: no verdict. (A low factor, since
	// with 1.9 no host of fewer than 5 can be an outlier: the largest
	// z-score among n is √(n−1).)
	o2, eps2 := newOutliersT(t, 10, func(c *OutlierConfig) { c.StdevFactor = 0.5 })
	var ej2 []ejection
	for k := range 40 {
		for i, ep := range eps2[:2] {
			status := 200
			if i == 1 && k%2 == 0 {
				status = 500
			}
			ej2 = o2.observe(oat(k), ep, status, ej2)
		}
	}
	if ej2 = o2.tick(oat(1000), ej2); len(ej2) != 0 {
		t.Fatalf("ejected with 2 hosts of enough volume (MinHosts 3): %+v", ej2)
	}
}

func TestOutliers_DisabledAndBadConfig(t *testing.T) {
	o, eps := newOutliersT(t, 4, func(c *OutlierConfig) { c.Disabled = true })
	var ej []ejection
	for ms := range 20 {
		ej = o.observe(oat(ms), eps[0], 0, ej)
	}
	if len(ej) != 0 {
		t.Fatal("disabled detection ejected")
	}
	for _, c := range []OutlierConfig{{Consecutive: -1}, {MaxEjectedFraction: 2}, {BaseEjection: time.Minute}, {StdevFactor: -1}} {
		if _, err := c.withDefaults(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// 503 is a backend shedding load: no run of them ejects (in overload that
// would idle half the fleet's capacity), and they do not break a run of
// real failures either.
func TestOutliers_ServiceUnavailableDoesNotEject(t *testing.T) {
	o, eps := newOutliersT(t, 4, nil)
	var ej []ejection
	for ms := range 20 {
		ej = o.observe(oat(ms), eps[0], 503, ej)
	}
	if len(ej) != 0 {
		t.Fatalf("20 503s in a row ejected: %+v", ej)
	}
	for ms := 20; ms < 25; ms++ {
		ej = o.observe(oat(ms), eps[0], 500, ej)
		ej = o.observe(oat(ms), eps[0], 503, ej)
	}
	if len(ej) != 1 {
		t.Fatalf("5 500s with 503s between: %d ejections, want 1", len(ej))
	}
}

// On a route of 4, even a host failing every other request is no
// success-rate outlier at the default factor (the largest z-score of 4
// rates is √3 = 1.73 < 1.9); on 5 it is (2.0). Small routes rely on
// Consecutive.
func TestOutliers_SuccessRateNeedsFiveHosts(t *testing.T) {
	for _, n := range []int{4, 5} {
		o, eps := newOutliersT(t, n, nil)
		var ej []ejection
		for k := range 40 {
			for i, ep := range eps {
				status := 200
				if i == 0 && k%2 == 0 {
					status = 500
				}
				ej = o.observe(oat(k), ep, status, ej)
			}
		}
		ej = o.tick(oat(1000), ej)
		if want := n >= 5; (len(ej) == 1) != want {
			t.Errorf("%d hosts: success-rate ejections %+v, want one: %v", n, ej, want)
		}
	}
}
