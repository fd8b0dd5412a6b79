// Package hostcpu samples processor use from /proc: the host's idle share
// (/proc/stat) and the CPU time of given processes (/proc/PID/stat), so a
// run can tell whether it measured the system or a saturated host.
package hostcpu

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// ClockTicks is the kernel's USER_HZ, the unit of /proc CPU times. It is
// 100 on every Linux architecture Go supports (sysconf(_SC_CLK_TCK) would
// need cgo to ask).
const ClockTicks = 100

// HostTimes is the aggregate "cpu" line of /proc/stat, in clock ticks.
type HostTimes struct {
	// Idle is idle plus iowait: time no CPU had work to run.
	Idle  uint64
	Total uint64
}

// ParseStat reads the aggregate cpu line of a /proc/stat text.
func ParseStat(b []byte) (HostTimes, error) {
	for line := range bytes.Lines(b) {
		f := strings.Fields(string(line))
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		if len(f) < 5 {
			return HostTimes{}, fmt.Errorf("hostcpu: /proc/stat: cpu line has %d fields, want at least 5", len(f))
		}
		var t HostTimes
		// user nice system idle iowait irq softirq steal (guest and
		// guest_nice are already inside user and nice).
		for i, s := range f[1:min(len(f), 9)] {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return HostTimes{}, fmt.Errorf("hostcpu: /proc/stat: cpu field %d: %w", i+1, err)
			}
			t.Total += v
			if i == 3 || i == 4 {
				t.Idle += v
			}
		}
		return t, nil
	}
	return HostTimes{}, errors.New("hostcpu: /proc/stat: no aggregate cpu line")
}

// CountCPUs is the number of per-CPU lines (cpu0, cpu1, …) of a
// /proc/stat text: the CPUs its aggregate idle covers, which under
// taskset or a cpuset are more than runtime.NumCPU (the CPUs this process
// may run on). 0 when there is none.
func CountCPUs(b []byte) int {
	n := 0
	for line := range bytes.Lines(b) {
		name, _, _ := strings.Cut(string(line), " ")
		if rest, ok := strings.CutPrefix(name, "cpu"); ok && rest != "" {
			if _, err := strconv.Atoi(rest); err == nil {
				n++
			}
		}
	}
	return n
}

// HostCPUs is CountCPUs of this host's /proc/stat, or 0 when it cannot
// be read.
func HostCPUs() int {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	return CountCPUs(b)
}

// IdlePercent is the idle share of all CPUs between two readings, or NaN
// when no time passed.
func IdlePercent(prev, cur HostTimes) float64 {
	if cur.Total <= prev.Total || cur.Idle < prev.Idle {
		return math.NaN()
	}
	return 100 * float64(cur.Idle-prev.Idle) / float64(cur.Total-prev.Total)
}

// ParseProcStat returns utime+stime (clock ticks) from a /proc/PID/stat
// text. The command name (field 2) may hold spaces and parentheses, so
// fields are counted from its last ')'.
func ParseProcStat(b []byte) (uint64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("hostcpu: /proc/PID/stat: no ')' after the command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("hostcpu: /proc/PID/stat: %d fields after the command name, want at least 13", len(f))
	}
	var sum uint64
	for _, s := range f[11:13] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("hostcpu: /proc/PID/stat: utime/stime: %w", err)
		}
		sum += v
	}
	return sum, nil
}

// Usage is the CPU use over one interval, in percent: HostIdle of all CPUs,
// the groups of one CPU (150 = one and a half cores). NaN = not measured.
type Usage struct {
	HostIdle, Generator, Ingress, Backends float64
}

// Sampler turns successive /proc readings into Usage. The zero value is
// not usable; see NewSampler.
type Sampler struct {
	read      func(path string) ([]byte, error)
	now       func() time.Time
	generator []int
	ingress   []int
	backends  []int

	primed    bool
	lastAt    time.Time
	lastHost  HostTimes
	hostOK    bool
	lastTicks map[int]uint64
}

// NewSampler watches the host and the given processes (any group may be
// empty: its column is then NaN).
func NewSampler(generator, ingress, backends []int) *Sampler {
	return &Sampler{read: os.ReadFile, now: time.Now, generator: generator, ingress: ingress, backends: backends}
}

// Sample returns the use since the previous call; the first call only
// primes the sampler and returns all NaN.
func (s *Sampler) Sample() Usage {
	now := s.now()
	u := Usage{HostIdle: math.NaN(), Generator: math.NaN(), Ingress: math.NaN(), Backends: math.NaN()}
	host, hostErr := s.hostTimes()
	ticks := map[int]uint64{}
	for _, group := range [][]int{s.generator, s.ingress, s.backends} {
		for _, pid := range group {
			b, err := s.read("/proc/" + strconv.Itoa(pid) + "/stat")
			if err != nil {
				continue // gone (or never ours): not counted
			}
			if t, err := ParseProcStat(b); err == nil {
				ticks[pid] = t
			}
		}
	}
	if s.primed {
		if hostErr == nil && s.hostOK {
			u.HostIdle = IdlePercent(s.lastHost, host)
		}
		secs := now.Sub(s.lastAt).Seconds()
		group := func(pids []int) float64 {
			var d uint64
			n := 0
			for _, pid := range pids {
				cur, ok1 := ticks[pid]
				prev, ok2 := s.lastTicks[pid]
				if ok1 && ok2 && cur >= prev {
					d += cur - prev
					n++
				}
			}
			if n == 0 || secs <= 0 {
				return math.NaN()
			}
			return 100 * float64(d) / ClockTicks / secs
		}
		u.Generator, u.Ingress, u.Backends = group(s.generator), group(s.ingress), group(s.backends)
	}
	s.primed, s.lastAt, s.lastTicks = true, now, ticks
	s.lastHost, s.hostOK = host, hostErr == nil
	return u
}

func (s *Sampler) hostTimes() (HostTimes, error) {
	b, err := s.read("/proc/stat")
	if err != nil {
		return HostTimes{}, err
	}
	return ParseStat(b)
}
