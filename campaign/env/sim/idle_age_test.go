package sim

import (
	"strings"
	"testing"
	"time"
)

// TestConfig_MapsTheLatencyIdleMaxAge: a group's latencyIdleMaxAge reaches
// the simulated replicas; 0s is off (negative in the simulator, whose 0 is
// the backend's default), and without it the default applies.
func TestConfig_MapsTheLatencyIdleMaxAge(t *testing.T) {
	y := strings.Replace(tiny, "        - name: slow\n", "          latencyIdleMaxAge: 10s\n        - name: slow\n", 1)
	y = strings.Replace(y, "          slow: 2\n", "          slow: 2\n          latencyIdleMaxAge: 0s\n", 1)
	for _, c := range []struct {
		yaml       string
		fast, slow time.Duration
	}{{tiny, 0, 0}, {y, 10 * time.Second, -1}} {
		gs := newEnv(t, c.yaml).cfg.Routes[0].Groups
		if gs[0].LatencyIdleMaxAge != c.fast || gs[1].LatencyIdleMaxAge != c.slow {
			t.Errorf("idle max ages %v, %v; want %v, %v", gs[0].LatencyIdleMaxAge, gs[1].LatencyIdleMaxAge, c.fast, c.slow)
		}
	}
}
