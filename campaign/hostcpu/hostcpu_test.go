package hostcpu

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"
)

// stat is a /proc/stat text whose aggregate line has the given idle and
// busy ticks (split over user and system, iowait counted as idle).
func stat(idle, iowait, busy uint64) string {
	return fmt.Sprintf("cpu  %d 0 %d %d %d 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1\n", busy/2, busy-busy/2, idle, iowait)
}

func TestParseStat(t *testing.T) {
	got, err := ParseStat([]byte(stat(300, 20, 680)))
	if err != nil || got != (HostTimes{Idle: 320, Total: 1000}) {
		t.Errorf("ParseStat = %+v, %v; want idle 320 of 1000", got, err)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4\n", "cpu 1 2\n", "cpu 1 x 3 4 5\n"} {
		if _, err := ParseStat([]byte(bad)); err == nil {
			t.Errorf("ParseStat(%q) accepted", bad)
		}
	}
}

func TestCountCPUs_PerCPULinesNotTheAffinity(t *testing.T) {
	// Four CPUs on the host, whatever this process is pinned to: the
	// aggregate idle covers all four.
	text := "cpu  1 2 3 4 5 0 0 0 0 0\ncpu0 1 2 3 4\ncpu1 1 2 3 4\ncpu2 1 2 3 4\ncpu3 1 2 3 4\nintr 1\nctxt 5\ncpufreq 1\n"
	if got := CountCPUs([]byte(text)); got != 4 {
		t.Errorf("CountCPUs = %d, want 4", got)
	}
	if got := CountCPUs([]byte("intr 1\n")); got != 0 {
		t.Errorf("CountCPUs without cpu lines = %d, want 0", got)
	}
}

func TestIdlePercent(t *testing.T) {
	a, _ := ParseStat([]byte(stat(1000, 0, 1000)))
	b, _ := ParseStat([]byte(stat(1005, 0, 1195))) // 5 idle of 200 ticks
	if got := IdlePercent(a, b); got != 2.5 {
		t.Errorf("idle %v%%, want 2.5%%", got)
	}
	if got := IdlePercent(b, b); !math.IsNaN(got) {
		t.Errorf("no time passed: %v, want NaN", got)
	}
}

func TestParseProcStat_CommandWithSpacesAndParens(t *testing.T) {
	line := "42 (my (odd) cmd) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 100 1000 10 18446744073709551615"
	got, err := ParseProcStat([]byte(line))
	if err != nil || got != 300 {
		t.Errorf("ParseProcStat = %d, %v; want utime 250 + stime 50", got, err)
	}
	if _, err := ParseProcStat([]byte("42 cmd S 1")); err == nil {
		t.Error("accepted a line without the command's parentheses")
	}
}

// fakeProc serves /proc files from a map the test changes between samples.
type fakeProc struct {
	files map[string]string
	now   time.Time
}

func (f *fakeProc) read(path string) ([]byte, error) {
	s, ok := f.files[path]
	if !ok {
		return nil, errors.New("no such file")
	}
	return []byte(s), nil
}

func procStat(pid int, ticks uint64) string {
	return fmt.Sprintf("%d (x) S 1 1 1 0 -1 0 0 0 0 0 %d 0 0 0 20 0 1 0 1 1 1", pid, ticks)
}

func TestSampler_GroupsAndHost(t *testing.T) {
	f := &fakeProc{now: time.Unix(1000, 0), files: map[string]string{
		"/proc/stat":    stat(1000, 0, 1000),
		"/proc/10/stat": procStat(10, 100),
		"/proc/20/stat": procStat(20, 0),
		"/proc/21/stat": procStat(21, 0),
	}}
	s := NewSampler([]int{10}, []int{20, 21}, nil)
	s.read, s.now = f.read, func() time.Time { return f.now }
	first := s.Sample()
	if !math.IsNaN(first.HostIdle) || !math.IsNaN(first.Generator) {
		t.Errorf("first sample %+v, want all NaN (priming)", first)
	}
	// One second later: the host was 5% idle, the generator used 50
	// ticks (half a core), the two ingress replicas 100 ticks each.
	f.now = f.now.Add(time.Second)
	f.files["/proc/stat"] = stat(1010, 0, 1190)
	f.files["/proc/10/stat"] = procStat(10, 150)
	f.files["/proc/20/stat"] = procStat(20, 100)
	f.files["/proc/21/stat"] = procStat(21, 100)
	u := s.Sample()
	if u.HostIdle != 5 || u.Generator != 50 || u.Ingress != 200 || !math.IsNaN(u.Backends) {
		t.Errorf("sample %+v; want idle 5%%, generator 50%%, ingress 200%%, backends NaN (none listed)", u)
	}
	// A replica that went away is left out, not read as zero.
	f.now = f.now.Add(time.Second)
	delete(f.files, "/proc/21/stat")
	f.files["/proc/20/stat"] = procStat(20, 150)
	if u := s.Sample(); u.Ingress != 50 {
		t.Errorf("ingress %v%% with one replica gone, want the other's 50%%", u.Ingress)
	}
}
