package prober

// BenchmarkProbe measures one probe against a loopback server in another
// process (this test binary re-run as the server, or the prequal-backend
// named by $PREQUALBENCH_PROBER_BENCH_BACKEND), so the CPU this process uses
// is the prober's own and the server's is reported apart. It uses only the exported API, so the same file
// benchmarks an older version of the package side by side.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/loadbalancer"
)

const benchServerEnv = "PREQUALBENCH_PROBER_BENCH_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(benchServerEnv) == "1" {
		serveBench()
		return
	}
	code := m.Run()
	stopBenchServer()
	os.Exit(code)
}

// serveBench answers every request on 127.0.0.1 with a fixed probe body
// (its timestamp current) until its stdin closes.
func serveBench() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr())
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // EOF when the parent goes
		os.Exit(0)
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		go func() {
			defer c.Close()
			in := make([]byte, 4096)
			var out []byte
			n := 0
			for {
				m, err := c.Read(in[n:])
				if err != nil {
					return
				}
				n += m
				for {
					end := bytes.Index(in[:n], []byte("\r\n\r\n"))
					if end < 0 {
						break
					}
					out = out[:0]
					ts := time.Now().UnixMilli()
					out = append(out, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "...)
					bodyLen := len(`{"rif":3,"latency_median_ms":1.25,"timestamp_ms":,"samples":100}`) + len(strconv.FormatInt(ts, 10))
					out = strconv.AppendInt(out, int64(bodyLen), 10)
					out = append(out, "\r\n\r\n"+`{"rif":3,"latency_median_ms":1.25,"timestamp_ms":`...)
					out = strconv.AppendInt(out, ts, 10)
					out = append(out, `,"samples":100}`...)
					if _, err := c.Write(out); err != nil {
						return
					}
					n = copy(in, in[end+4:n])
				}
				if n == len(in) {
					return
				}
			}
		}()
	}
}

var bench struct {
	once sync.Once
	cmd  *exec.Cmd
	addr string
	err  error
}

// benchBackendEnv names a prequal-backend binary to probe instead of the
// fixed server, for the backend's CPU per probe.
const benchBackendEnv = "PREQUALBENCH_PROBER_BENCH_BACKEND"

func benchServer(b *testing.B) (addr string, pid int) {
	b.Helper()
	bench.once.Do(func() { bench.cmd, bench.addr, bench.err = startBenchServer() })
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return bench.addr, bench.cmd.Process.Pid
}

func startBenchServer() (*exec.Cmd, string, error) {
	if bin := os.Getenv(benchBackendEnv); bin != "" {
		dir, err := os.MkdirTemp("", "prober-bench")
		if err != nil {
			return nil, "", err
		}
		defer os.RemoveAll(dir)
		file := filepath.Join(dir, "addr")
		cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--addr-file", file)
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return nil, "", err
		}
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if a, err := os.ReadFile(file); err == nil && len(bytes.TrimSpace(a)) > 0 {
				return cmd, string(bytes.TrimSpace(a)), nil
			}
		}
		_ = cmd.Process.Kill()
		return nil, "", fmt.Errorf("%s: no address in %s after 10s", bin, file)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), benchServerEnv+"=1")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// The server also exits when this pipe closes.
	if _, err := cmd.StdinPipe(); err != nil {
		return nil, "", err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, "", fmt.Errorf("bench server: %v", err)
	}
	return cmd, strings.TrimSpace(line), nil
}

func stopBenchServer() {
	if bench.cmd != nil {
		_ = bench.cmd.Process.Kill()
		_ = bench.cmd.Wait()
	}
}

// cpuSelf is this process's user+system CPU time.
func cpuSelf() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuOf is another process's user+system CPU time from /proc (10 ms ticks).
func cpuOf(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command: utime and stime are 14 and 15.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

func reportCPU(b *testing.B, self, srv time.Duration) {
	b.ReportMetric(float64(self.Microseconds())/float64(b.N), "cpu-µs/probe")
	b.ReportMetric(float64(srv.Microseconds())/float64(b.N), "srv-cpu-µs/probe")
}

func BenchmarkProbe(b *testing.B) {
	addr, pid := benchServer(b)
	p, err := New(Config{Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if r := p.Probe(ctx, addr); r.Outcome != loadbalancer.ProbeOK {
		b.Fatalf("warm-up probe: %+v", r)
	}
	b.ReportAllocs()
	self, srv := cpuSelf(), cpuOf(pid)
	b.ResetTimer()
	for range b.N {
		if r := p.Probe(ctx, addr); r.Outcome != loadbalancer.ProbeOK {
			b.Fatalf("probe: %+v", r)
		}
	}
	b.StopTimer()
	reportCPU(b, cpuSelf()-self, cpuOf(pid)-srv)
}

// BenchmarkProbeParallel runs probes from 8 goroutines at once, as the
// ingress's workers do.
func BenchmarkProbeParallel(b *testing.B) {
	addr, pid := benchServer(b)
	p, err := New(Config{Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(8 / max(1, runtime.GOMAXPROCS(0)))
	self, srv := cpuSelf(), cpuOf(pid)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if r := p.Probe(ctx, addr); r.Outcome != loadbalancer.ProbeOK {
				b.Errorf("probe: %+v", r)
				return
			}
		}
	})
	b.StopTimer()
	reportCPU(b, cpuSelf()-self, cpuOf(pid)-srv)
}
