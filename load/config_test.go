package load

import (
	"math"
	"strings"
	"testing"
	"time"
)

func validOpen() Config {
	return Config{
		Targets: []Target{{URL: "http://127.0.0.1:1/"}},
		Open:    []Phase{{Kind: KindConstant, Rate: 10, Duration: time.Second}},
	}
}

func TestValidate_Accepts(t *testing.T) {
	for name, c := range map[string]Config{
		"open": validOpen(),
		"closed": {
			Targets: []Target{{URL: "https://127.0.0.1:8443/x", Method: "POST", Body: []byte("b"), Weight: 2}},
			Users:   4, Duration: time.Second, ThinkTime: time.Millisecond,
		},
		"all kinds": {
			Targets: []Target{{URL: "http://127.0.0.1/", Host: "a.example:80"}},
			Open: []Phase{
				{Kind: KindConstant, Rate: 0.5, Duration: time.Second},
				{Kind: KindRamp, From: 1, To: 100, Duration: time.Second},
				{Kind: KindSteps, From: 1, To: 10, Steps: 4, Duration: time.Second},
				{Kind: KindBurst, High: 100, Low: 0, HighFor: time.Second, LowFor: time.Second, Duration: 4 * time.Second},
			},
		},
	} {
		if err := c.Validate(); err != nil {
			t.Errorf("%s: unexpected error: %v", name, err)
		}
	}
}

func TestValidate_NamesTheField(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no targets", func(c *Config) { c.Targets = nil }, "load: targets: must list at least one target"},
		{"empty url", func(c *Config) { c.Targets[0].URL = "" }, "targets[0].url: must be set"},
		{"bad scheme", func(c *Config) { c.Targets[0].URL = "ftp://127.0.0.1/" }, "targets[0].url: scheme must be http or https"},
		{"no host", func(c *Config) { c.Targets[0].URL = "http:///x" }, "targets[0].url: must name a host"},
		{"unparsable url", func(c *Config) { c.Targets[0].URL = "http://[::1" }, "targets[0].url: must be a valid URL"},
		{"method", func(c *Config) { c.Targets[0].Method = "GE T" }, "targets[0].method: must be an HTTP method token"},
		{"host", func(c *Config) { c.Targets[0].Host = "a b" }, "targets[0].host: must be a host[:port]"},
		{"negative weight", func(c *Config) { c.Targets[0].Weight = -1 }, "targets[0].weight: must be a finite number >= 0"},
		{"nan weight", func(c *Config) { c.Targets[0].Weight = math.NaN() }, "targets[0].weight"},
		{"neither loop", func(c *Config) { c.Open = nil }, "open: must list phases, or set users > 0"},
		{"both loops", func(c *Config) { c.Users = 2 }, "users: must be 0 with open-loop phases"},
		{"negative users", func(c *Config) { c.Open = nil; c.Users = -1 }, "users: must be >= 0"},
		{"closed no duration", func(c *Config) { c.Open = nil; c.Users = 1 }, "duration: must be > 0 for a closed loop"},
		{"closed negative think", func(c *Config) { c.Open = nil; c.Users = 1; c.Duration = time.Second; c.ThinkTime = -1 }, "think_time: must be >= 0"},
		{"open with duration", func(c *Config) { c.Duration = time.Second }, "duration: only for a closed loop"},
		{"timeout near the histogram ceiling", func(c *Config) { c.Timeout = 45 * time.Second }, "timeout: must be <= 30s (half the 1m0s latency histogram ceiling"},
		{"negative warmup", func(c *Config) { c.Warmup = -1 }, "warmup: must be >= 0"},
		{"warmup without rate", func(c *Config) { c.Warmup = time.Second }, "warmup_rate: must be > 0"},
		{"warmup rate without warmup", func(c *Config) { c.WarmupRate = 5 }, "warmup_rate: must be 0 without a warmup"},
		{"closed warmup rate", func(c *Config) { c.Open = nil; c.Users = 1; c.Duration = time.Second; c.WarmupRate = 5 }, "warmup_rate: only for an open loop"},
		{"open with think", func(c *Config) { c.ThinkTime = time.Second }, "think_time: only for a closed loop"},
		{"kind", func(c *Config) { c.Open[0].Kind = "sine" }, `open[0].kind: must be one of constant, ramp, steps, burst; got "sine"`},
		{"phase duration", func(c *Config) { c.Open[0].Duration = 0 }, "open[0].duration: must be > 0"},
		{"rate zero", func(c *Config) { c.Open[0].Rate = 0 }, "open[0].rate: must be > 0"},
		{"rate too high", func(c *Config) { c.Open[0].Rate = 2e6 }, "open[0].rate: must be <= 1e+06"},
		{"rate inf", func(c *Config) { c.Open[0].Rate = math.Inf(1) }, "open[0].rate: must be a finite rate"},
		{"unused field", func(c *Config) { c.Open[0].From = 3 }, `open[0].from: not used by kind "constant"`},
		{"second phase", func(c *Config) {
			c.Open = append(c.Open, Phase{Kind: KindConstant, Rate: -5, Duration: time.Second})
		}, "open[1].rate: must be > 0"},
		{"ramp from", func(c *Config) { c.Open[0] = Phase{Kind: KindRamp, To: 5, Duration: time.Second} }, "open[0].from: must be > 0"},
		{"ramp to", func(c *Config) { c.Open[0] = Phase{Kind: KindRamp, From: 5, Duration: time.Second} }, "open[0].to: must be > 0"},
		{"steps count", func(c *Config) {
			c.Open[0] = Phase{Kind: KindSteps, From: 1, To: 5, Steps: 1, Duration: time.Second}
		}, "open[0].steps: must be >= 2"},
		{"steps too short", func(c *Config) {
			c.Open[0] = Phase{Kind: KindSteps, From: 1, To: 5, Steps: 5000, Duration: time.Second}
		}, "open[0].steps: each step must last at least 1ms"},
		{"burst high", func(c *Config) {
			c.Open[0] = Phase{Kind: KindBurst, Low: 1, HighFor: time.Second, LowFor: time.Second, Duration: time.Second}
		}, "open[0].high: must be > 0"},
		{"burst low", func(c *Config) {
			c.Open[0] = Phase{Kind: KindBurst, High: 5, Low: -1, HighFor: time.Second, LowFor: time.Second, Duration: time.Second}
		}, "open[0].low: must be >= 0"},
		{"burst high_for", func(c *Config) {
			c.Open[0] = Phase{Kind: KindBurst, High: 5, LowFor: time.Second, Duration: time.Second}
		}, "open[0].high_for: must be > 0"},
		{"burst low_for", func(c *Config) {
			c.Open[0] = Phase{Kind: KindBurst, High: 5, HighFor: time.Second, Duration: time.Second}
		}, "open[0].low_for: must be > 0"},
		{"timeout", func(c *Config) { c.Timeout = -1 }, "timeout: must be >= 0"},
		{"max workers", func(c *Config) { c.MaxWorkers = -1 }, "max_workers: must be >= 0"},
		{"connections", func(c *Config) { c.Connections = -1 }, "connections: must be >= 0"},
		{"max connections", func(c *Config) { c.MaxConnections = -1 }, "max_connections: must be >= 0"},
	} {
		c := validOpen()
		tc.edit(&c)
		err := c.Validate()
		if err == nil {
			t.Errorf("%s: no error, want %q", tc.name, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q does not contain %q", tc.name, err, tc.want)
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			if !strings.HasPrefix(line, "load: ") {
				t.Errorf("%s: error line %q lacks the component prefix", tc.name, line)
			}
		}
	}
}

func TestValidate_ReportsEveryProblem(t *testing.T) {
	c := validOpen()
	c.Targets[0].URL = ""
	c.Open[0].Rate = 0
	c.Timeout = -1
	err := c.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	if n := len(strings.Split(err.Error(), "\n")); n != 3 {
		t.Errorf("got %d errors, want 3: %v", n, err)
	}
}

func TestConfigWindow(t *testing.T) {
	c := validOpen()
	c.Open = append(c.Open, Phase{Kind: KindConstant, Rate: 1, Duration: 2 * time.Second})
	if w := c.Window(); w != 3*time.Second {
		t.Errorf("open window = %v, want 3s", w)
	}
	closed := Config{Users: 1, Duration: 5 * time.Second}
	if w := closed.Window(); w != 5*time.Second {
		t.Errorf("closed window = %v, want 5s", w)
	}
}
