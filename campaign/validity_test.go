package campaign

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prequalbench/prequalbench/campaign/artifacts"
	"github.com/prequalbench/prequalbench/campaign/hostcpu"
	"github.com/prequalbench/prequalbench/campaign/load"
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
	v := judge(healthyLoad(), seriesFromProcStat(t, busy4))
	if v.Valid || len(v.Reasons) != 1 || !strings.Contains(v.Reasons[0], "host idle below 10% for 4 s") {
		t.Errorf("4 busy seconds: %+v; want invalid, host idle below 10%% for 4 s", v)
	}
	if v := judge(healthyLoad(), seriesFromProcStat(t, busy3)); !v.Valid {
		t.Errorf("3 busy seconds (the allowance): %+v, want valid", v)
	}
	// No host readings (kube env, simulator): nothing to judge the host by.
	if v := judge(healthyLoad(), []load.Second{{Second: 0}, {Second: 1}}); !v.Valid {
		t.Errorf("no CPU readings: %+v, want valid", v)
	}
}

func TestJudge_GeneratorBehindAndCapBinding(t *testing.T) {
	if v := judge(healthyLoad(), nil); !v.Valid || len(v.Reasons) != 0 {
		t.Errorf("healthy: %+v, want valid without reasons", v)
	}
	for _, tc := range []struct {
		name string
		edit func(*artifacts.LoadResult)
		want string
	}{
		{"lag over 5 ms", func(l *artifacts.LoadResult) { l.SendLag.P99 = 38 }, "send-lag p99 38.0 ms > max(5 ms, 1% of p50 20.0 ms)"},
		{"lag over 1% of a long p50", func(l *artifacts.LoadResult) { l.Success.P50 = 1200; l.SendLag.P99 = 13 }, "send-lag p99 13.0 ms > max(5 ms, 1% of p50 1200.0 ms)"},
		{"cap bound", func(l *artifacts.LoadResult) { l.ConnCapBound = 11 }, "11 of 10000 requests (0.11%) waited for a connection at the cap of 4400"},
		{"dropped", func(l *artifacts.LoadResult) { l.Dropped = 3 }, "3 scheduled sends were dropped"},
		{"outstanding", func(l *artifacts.LoadResult) { l.Outstanding = 2 }, "2 requests of the window were still unanswered"},
	} {
		l := healthyLoad()
		tc.edit(&l)
		v := judge(l, nil)
		if v.Valid || len(v.Reasons) != 1 || !strings.Contains(v.Reasons[0], tc.want) {
			t.Errorf("%s: %+v, want invalid: %q", tc.name, v, tc.want)
		}
	}
	// Under the limits: 12 ms lag at a 1.2 s p50, a trace (10 of 10000)
	// of cap waits.
	l := healthyLoad()
	l.Success.P50, l.SendLag.P99, l.ConnCapBound = 1200, 12, 10
	if v := judge(l, nil); !v.Valid {
		t.Errorf("within limits: %+v, want valid", v)
	}
}
