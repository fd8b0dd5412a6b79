package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/loadbalancer"
)

// picksAfterWarmup runs cfg's world for a 2 s warmup and then l, and
// returns each replica's picks (all clients) made during l, and the
// fallbacks and picks of l.
func picksAfterWarmup(t *testing.T, cfg Config, l Load) (map[string]uint64, uint64, uint64) {
	t.Helper()
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	count := func() (map[string]uint64, uint64, uint64) {
		by := map[string]uint64{}
		var fb, picks uint64
		for _, c := range w.Snapshot() {
			for _, r := range c.Routes {
				for _, e := range r.Stats.Endpoints {
					by[e.Address] += e.Picks
				}
				fb += r.Stats.Fallbacks
				picks += r.Stats.Picks
			}
		}
		return by, fb, picks
	}
	warm := l
	warm.Open = []Phase{{Kind: KindConstant, Duration: 2 * time.Second, Rate: l.Open[0].Rate}}
	if _, err := w.Run(t.Context(), warm); err != nil {
		t.Fatal(err)
	}
	before, fb0, p0 := count()
	if _, err := w.Run(t.Context(), l); err != nil {
		t.Fatal(err)
	}
	after, fb1, p1 := count()
	for a := range after {
		after[a] -= before[a]
	}
	return after, fb1 - fb0, p1 - p0
}

// TestPrequal_IdenticalReplicasNotHerded: an early prequal sent 35 to 3,354
// picks to 14 identical replicas; ties broken at random, one pool entry
// per replica and reuse compensation keep the spread within 1.5x when the
// estimates are equal (fixed work).
func TestPrequal_IdenticalReplicasNotHerded(t *testing.T) {
	for _, dist := range []string{"fixed"} {
		t.Run(dist, func(t *testing.T) {
			cfg := Config{
				Seed: 2, Clients: 1, Algorithm: loadbalancer.NamePrequal, Policy: loadbalancer.DefaultConfig(), Network: DefaultNetwork,
				Routes: []Route{{Name: "r", Groups: []Group{{Name: "s", Replicas: 14, Mode: "io", ServiceTime: 50 * time.Millisecond, Distribution: dist, QueueLimit: 1024}}}},
			}
			l := Load{Open: []Phase{{Kind: KindConstant, Duration: 20 * time.Second, Rate: 500}}, Timeout: 10 * time.Second, Targets: evenTargets(1), Seed: 1}
			picks, fb, all := picksAfterWarmup(t, cfg, l)
			lo, hi := ^uint64(0), uint64(0)
			for _, c := range picks {
				lo, hi = min(lo, c), max(hi, c)
			}
			t.Logf("picks per replica: %v; fallbacks %d of %d", picks, fb, all)
			if len(picks) != 14 || lo == 0 || float64(hi)/float64(lo) > 1.5 {
				t.Errorf("max/min picks = %d/%d over %d replicas, want <= 1.5 over 14", hi, lo, len(picks))
			}
			if fb > all/100 {
				t.Errorf("fallbacks = %d of %d picks, want <= 1%%", fb, all)
			}
		})
	}
}

// TestPrequal_SlowGroupGetsLessNotZero: 7 fast and 7 half-speed replicas
// (4 slots each) at 70% of capacity: the slow group gets less than the
// fast one, but every slow replica still gets traffic.
func TestPrequal_SlowGroupGetsLessNotZero(t *testing.T) {
	cfg := Config{
		Seed: 2, Clients: 1, Algorithm: loadbalancer.NamePrequal, Policy: loadbalancer.DefaultConfig(), Network: DefaultNetwork,
		Routes: []Route{{Name: "r", Groups: []Group{
			{Name: "fast", Replicas: 7, Mode: "io", ServiceTime: 20 * time.Millisecond, Distribution: "fixed", Concurrency: 4, QueueLimit: 1024},
			{Name: "slow", Replicas: 7, Mode: "io", ServiceTime: 40 * time.Millisecond, Distribution: "fixed", Concurrency: 4, QueueLimit: 1024},
		}}},
	}
	// Capacity: 7×200 + 7×100 = 2100 rps.
	l := Load{Open: []Phase{{Kind: KindConstant, Duration: 10 * time.Second, Rate: 0.7 * 2100}}, Timeout: 10 * time.Second, Targets: evenTargets(1), Seed: 1}
	picks, _, _ := picksAfterWarmup(t, cfg, l)
	var fast, slow uint64
	for a, c := range picks {
		if strings.HasPrefix(a, "slow-") {
			slow += c
			if c == 0 {
				t.Errorf("slow replica %s got no traffic", a)
			}
		} else {
			fast += c
		}
	}
	share := float64(slow) / float64(slow+fast)
	t.Logf("picks per replica: %v; slow share %.3f", picks, share)
	if share <= 0.02 || share >= 0.5 {
		t.Errorf("slow group share = %.3f, want less than the fast group's but above 2%%", share)
	}
}
