package loadbalancer

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestDefaultConfig_IsValidAndMatchesPaper(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	p := c.Prequal
	if p.ProbesPerQuery != 3 || p.PoolSize != 16 || p.MaxAge != time.Second || p.Delta != 1 ||
		p.RemovePerQuery != 1 || p.MinProbes != 2 || p.RIFWindow <= p.PoolSize {
		t.Errorf("defaults differ from the paper's testbed: %+v", p)
	}
	if math.Abs(p.QRIF-0.8409) > 1e-4 {
		t.Errorf("QRIF = %v, want 2^-0.25", p.QRIF)
	}
}

func TestConfigValidate_NamesFieldAndRange(t *testing.T) {
	tests := []struct {
		name  string
		mod   func(*Config)
		field string
	}{
		{"probes zero", func(c *Config) { c.Prequal.ProbesPerQuery = 0 }, "Prequal.ProbesPerQuery"},
		{"probes NaN", func(c *Config) { c.Prequal.ProbesPerQuery = math.NaN() }, "Prequal.ProbesPerQuery"},
		{"pool zero", func(c *Config) { c.Prequal.PoolSize = 0 }, "Prequal.PoolSize"},
		{"age zero", func(c *Config) { c.Prequal.MaxAge = 0 }, "Prequal.MaxAge"},
		{"delta negative", func(c *Config) { c.Prequal.Delta = -1 }, "Prequal.Delta"},
		{"remove negative", func(c *Config) { c.Prequal.RemovePerQuery = -0.5 }, "Prequal.RemovePerQuery"},
		{"qrif above 1", func(c *Config) { c.Prequal.QRIF = 1.1 }, "Prequal.QRIF"},
		{"min probes zero", func(c *Config) { c.Prequal.MinProbes = 0 }, "Prequal.MinProbes"},
		{"min probes above pool", func(c *Config) { c.Prequal.MinProbes = 17 }, "Prequal.MinProbes"},
		{"idle negative", func(c *Config) { c.Prequal.IdleProbeInterval = -time.Second }, "Prequal.IdleProbeInterval"},
		{"window not above pool", func(c *Config) { c.Prequal.RIFWindow = 16 }, "Prequal.RIFWindow"},
		{"max reuse zero", func(c *Config) { c.Prequal.MaxReuse = 0 }, "Prequal.MaxReuse"},
		{"reuse latency negative", func(c *Config) { c.Prequal.ReuseLatency = -1 }, "Prequal.ReuseLatency"},
		{"reuse latency NaN", func(c *Config) { c.Prequal.ReuseLatency = math.NaN() }, "Prequal.ReuseLatency"},
		{"ewma decay", func(c *Config) { c.PeakEWMA.Decay = 0 }, "PeakEWMA.Decay"},
		{"ewma default rtt", func(c *Config) { c.PeakEWMA.DefaultRTT = -1 }, "PeakEWMA.DefaultRTT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.mod(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("Validate() = nil, want an error")
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.field) || !strings.Contains(msg, "must be") || !strings.HasPrefix(msg, "loadbalancer: ") {
				t.Errorf("error %q does not name %s and its range", msg, tt.field)
			}
		})
	}
}

func TestConfigValidate_ReportsEveryError(t *testing.T) {
	c := DefaultConfig()
	c.Prequal.PoolSize = -1
	c.Prequal.QRIF = 2
	c.PeakEWMA.Decay = 0
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate() = nil")
	}
	for _, f := range []string{"Prequal.PoolSize", "Prequal.QRIF", "PeakEWMA.Decay"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q misses %s", err, f)
		}
	}
}

func TestValidate_SyncNeedsTwoProbes(t *testing.T) {
	c := DefaultConfig()
	c.Sync.D = 1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "Sync.D must be in [2, 64] (the pick waits for d - 1 answers), got 1") {
		t.Errorf("Validate with Sync.D = 1: %v", err)
	}
	c.Sync.D = 2
	if err := c.Validate(); err != nil {
		t.Errorf("Validate with Sync.D = 2: %v", err)
	}
}

// TestIdleProbeTick_QuarterOfTheShortestInterval: the idle ticker serves
// the most demanding of Prequal's idle probes, WRR's period and YARP's
// poll, at a quarter of it, never below 5 ms.
func TestIdleProbeTick_QuarterOfTheShortestInterval(t *testing.T) {
	c := DefaultConfig()
	c.WRR.Period, c.YARP.Poll, c.Prequal.IdleProbeInterval = time.Second, 500*time.Millisecond, 0
	if got := IdleProbeTick(c); got != 125*time.Millisecond {
		t.Errorf("no idle interval: %v, want 125ms (YARP's poll / 4)", got)
	}
	c.Prequal.IdleProbeInterval = 40 * time.Millisecond
	if got := IdleProbeTick(c); got != 10*time.Millisecond {
		t.Errorf("idle interval 40ms: %v, want 10ms", got)
	}
	c.Prequal.IdleProbeInterval = time.Millisecond
	if got := IdleProbeTick(c); got != 5*time.Millisecond {
		t.Errorf("idle interval 1ms: %v, want the 5ms floor", got)
	}
}
