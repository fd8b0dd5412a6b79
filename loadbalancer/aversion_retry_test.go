package loadbalancer

import (
	"testing"
	"time"
)

// TestAversion_RetriesSpacedByOwnPicks: a fail-fast endpoint (every
// request there a 500 at once) among 20 gets under its fair share 1/20 of
// a policy instance's picks, whether the instance sends 5 or 500 requests
// a second: after the error rate first avoids it, a failed retry keeps it
// out for 2n of the instance's own picks (and 446 ms), not only for a
// fixed time. Healthy endpoints answer in 20 ms.
func TestAversion_RetriesSpacedByOwnPicks(t *testing.T) {
	const n = 20
	for _, name := range Names() {
		for _, rps := range []int{5, 500} {
			p := newPolicy(t, name, n, nil)
			bad := addrs(n)[n-1]
			rng := newRNG()
			step := time.Second / time.Duration(rps)
			now := t0
			var badPicks, picks int
			type flight struct {
				pk  Picked
				end time.Time
			}
			var inFlight []flight
			for q := range 60 * rps { // 60 s
				now = t0.Add(time.Duration(q) * step)
				kept := inFlight[:0]
				for _, f := range inFlight {
					if f.end.After(now) {
						kept = append(kept, f)
						continue
					}
					p.Done(f.end, f.pk, 20*time.Millisecond, 200)
				}
				inFlight = kept
				for _, a := range p.ProbesDue(now, rng, nil) {
					// Probes are healthy everywhere: the bad one looks idle and fast.
					lat := 20 * time.Millisecond
					if a == bad {
						lat = time.Millisecond
					}
					p.ProbeResult(now, a, known(0, lat))
				}
				pk := mustPick(t, p, now, rng)
				if sp, ok := p.(SyncPicker); ok {
					plan := sp.PlanSync(now, rng, nil)
					ans := make([]SyncAnswer, 0, len(plan))
					for _, a := range plan {
						lat := 20 * time.Millisecond
						if a == bad {
							lat = time.Millisecond
						}
						ans = append(ans, SyncAnswer{Endpoint: a, Reply: known(0, lat), OK: true})
					}
					p.Done(now, pk, 0, 499) // the plain Pick above is not used
					pk, _ = sp.PickSync(now, rng, ans)
				}
				if q >= 10*rps { // after a 10 s warmup
					picks++
				}
				if pk.Endpoint == bad {
					if q >= 10*rps {
						badPicks++
					}
					p.Done(now.Add(time.Millisecond), pk, time.Millisecond, 500)
					continue
				}
				inFlight = append(inFlight, flight{pk, now.Add(20 * time.Millisecond)})
			}
			if share := float64(badPicks) / float64(picks); share > 1.0/n {
				t.Errorf("%s at %d rps: the fail-fast endpoint got %.2f%% of the picks, fair share %.2f%%", name, rps, 100*share, 100.0/n)
			}
		}
	}
}
