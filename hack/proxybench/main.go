// Command proxybench is hack/bench-proxy.sh's helper: a bounded fixed-rate
// load (open loop, for the latency a proxy adds at a given rate, which wrk's
// closed loop cannot show) and the markdown summary of the script's TSV.
//
//	proxybench rate -url http://127.0.0.1:18180/ -rate 1000 -duration 5s
//	proxybench summary < results.tsv
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "proxybench:", err)
		os.Exit(1)
	}
}

func run(args []string, in io.Reader, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("want a command: rate or summary")
	}
	switch args[0] {
	case "rate":
		return rate(args[1:], out)
	case "summary":
		return summary(in, out)
	}
	return fmt.Errorf("unknown command %q: want rate or summary", args[0])
}

// rate sends GETs at a fixed rate and prints one TSV line: requests sent,
// the rate achieved, errors, p50 and p99 in ms (exact, over every request).
func rate(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("rate", flag.ContinueOnError)
	url := fs.String("url", "", "target URL (loopback only)")
	perSec := fs.Int("rate", 1000, "requests per second")
	dur := fs.Duration("duration", 5*time.Second, "how long to send")
	timeout := fs.Duration("timeout", 2*time.Second, "per request")
	conns := fs.Int("connections", 64, "most connections open at once")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !strings.HasPrefix(*url, "http://127.") && !strings.HasPrefix(*url, "http://[::1]") {
		return fmt.Errorf("rate: -url %q: only loopback targets", *url)
	}
	if *perSec <= 0 || *perSec > 100_000 || *dur <= 0 || *dur > 10*time.Minute {
		return fmt.Errorf("rate: want -rate in (0, 100000] and -duration in (0, 10m]")
	}
	att := vegeta.NewAttacker(vegeta.Timeout(*timeout), vegeta.KeepAlive(true),
		vegeta.Connections(*conns), vegeta.MaxConnections(*conns), vegeta.MaxWorkers(uint64(4**conns)),
		vegeta.Redirects(vegeta.NoFollow))
	tr := vegeta.NewStaticTargeter(vegeta.Target{Method: "GET", URL: *url})
	lat := make([]time.Duration, 0, int(float64(*perSec)*dur.Seconds())+1)
	var errs int
	var first, last time.Time
	for r := range att.Attack(tr, vegeta.Rate{Freq: *perSec, Per: time.Second}, *dur, "bench") {
		if first.IsZero() {
			first = r.Timestamp
		}
		last = r.Timestamp
		if r.Error != "" || r.Code != 200 {
			errs++
			continue
		}
		lat = append(lat, r.Latency)
	}
	n := len(lat) + errs
	achieved := 0.0
	if span := last.Sub(first).Seconds(); n > 1 && span > 0 {
		achieved = float64(n-1) / span
	}
	slices.Sort(lat)
	fmt.Fprintf(out, "%d\t%.0f\t%d\t%.3f\t%.3f\n", n, achieved, errs, ms(quantile(lat, 0.5)), ms(quantile(lat, 0.99)))
	return nil
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(math.Ceil(q*float64(len(sorted))))-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// summary reads the script's TSV (a header line, then one line per round
// and target) and prints a markdown table of the medians over rounds, with
// throughput and CPU as ratios to nginx and latency added over direct.
// minProbesPerReq is the fewest probes per request a CPU-per-probe
// estimate is made from.
const minProbesPerReq = 0.2

func summary(in io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(in)
	if !sc.Scan() {
		return errors.New("summary: no header")
	}
	header := strings.Split(sc.Text(), "\t")
	col := map[string]int{}
	for i, h := range header {
		col[h] = i
	}
	for _, need := range []string{"target", "rps", "p50_ms", "p99_ms", "fr_p50_ms", "fr_p99_ms", "fr_errors", "proxy_cpu_us_req", "backend_cpu_us_req", "probes_per_req"} {
		if _, ok := col[need]; !ok {
			return fmt.Errorf("summary: no column %q", need)
		}
	}
	vals := map[string]map[string][]float64{} // target -> column -> values
	var order []string
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != len(header) {
			continue
		}
		t := f[col["target"]]
		if vals[t] == nil {
			vals[t] = map[string][]float64{}
			order = append(order, t)
		}
		for name, i := range col {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				vals[t][name] = append(vals[t][name], v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	med := func(t, c string) float64 {
		v := slices.Clone(vals[t][c])
		if len(v) == 0 {
			return math.NaN()
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	num := func(format string, v float64) string {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return "–"
		}
		return fmt.Sprintf(format, v)
	}
	fmt.Fprintln(out, "Medians over rounds. Saturation: wrk, closed loop. Fixed rate: open loop; added p50 is over direct at the same rate. CPU: utime+stime from /proc per request.")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| target | rps | × nginx | p50 ms | p99 ms | p50 ms @rate | added p50 ms | p99 ms @rate | errors @rate | proxy CPU µs/req | × nginx | backend CPU µs/req |")
	fmt.Fprintln(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, t := range order {
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", t,
			num("%.0f", med(t, "rps")), num("%.2f", med(t, "rps")/med("nginx", "rps")),
			num("%.2f", med(t, "p50_ms")), num("%.2f", med(t, "p99_ms")),
			num("%.3f", med(t, "fr_p50_ms")), num("%.3f", med(t, "fr_p50_ms")-med("direct", "fr_p50_ms")),
			num("%.3f", med(t, "fr_p99_ms")), num("%.0f", med(t, "fr_errors")),
			num("%.1f", med(t, "proxy_cpu_us_req")), num("%.2f", med(t, "proxy_cpu_us_req")/med("nginx", "proxy_cpu_us_req")),
			num("%.1f", med(t, "backend_cpu_us_req")))
	}
	// Ingress CPU per probe: a prequal ingress's extra CPU per request over
	// round-robin's on the same endpoints (same binary), divided by the
	// probes it sent per request (its prequal_probes_sent_total counter). It
	// also holds prequal's pick. Spreading requests over 16 endpoints costs
	// CPU of its own (more connections, fewer requests per wake-up), so the
	// 16-endpoint route is set against round-robin over the same 16; only
	// without that target is the 1-endpoint round-robin used, and said.
	// Below 0.2 probes per request (one endpoint: probes in flight coalesce)
	// the difference is noise, not a probe's cost, and none is given.
	for _, prefix := range []string{"", "cmp-"} {
		for _, pair := range [][2]string{{"ingress-prequal", "ingress-rr"}, {"ingress-prequal-16", "ingress-rr-16"}} {
			pq, rr := prefix+pair[0], prefix+pair[1]
			spread := ""
			if vals[rr] == nil && pair[1] == "ingress-rr-16" {
				rr, spread = prefix+"ingress-rr", ", and the cost of spreading over 16 endpoints: there is no "+prefix+"ingress-rr-16 to set it against"
			}
			ppr := med(pq, "probes_per_req")
			if vals[pq] == nil || vals[rr] == nil || !(ppr > 0) {
				continue
			}
			extra := med(pq, "proxy_cpu_us_req") - med(rr, "proxy_cpu_us_req")
			if ppr < minProbesPerReq {
				fmt.Fprintf(out, "\n%s sent %s probes per request: too few for a CPU-per-probe estimate (its CPU per request is %s µs over %s's).\n",
					pq, num("%.2f", ppr), num("%.1f", extra), rr)
				continue
			}
			fmt.Fprintf(out, "\n%s CPU per probe ≈ %s µs (%s − %s CPU per request at saturation = %s µs, over %s probes per request from prequal_probes_sent_total; includes prequal's pick%s).\n",
				pq, num("%.1f", extra/ppr), pq, rr, num("%.1f", extra), num("%.2f", ppr), spread)
		}
	}
	return nil
}
