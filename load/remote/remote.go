// Package remote is the contract between the campaign and a load
// generator running elsewhere (a pod of a generator Job): the Spec it
// runs, handed over as JSON, and the Report it prints to its log in
// numbered chunks with a checksum (WriteReport), which carries the whole accounting of load.Result (counters and
// every HDR histogram, V2-encoded, per-second rows with their
// histograms), so the campaign merges the generators' shares exactly
// (load.Merge) after reading their logs through the API server.
package remote

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/load"
)

// Spec is what one generator runs: one shard of a run's load, starting
// at StartAt (every shard the same), so the shards' seconds line up.
type Spec struct {
	StartAt time.Time    `json:"start_at"`
	Shard   int          `json:"shard"`
	Shards  int          `json:"shards"`
	Targets []Target     `json:"targets"`
	Open    []load.Phase `json:"open,omitempty"`
	// Closed loop.
	Users     int           `json:"users,omitempty"`
	Duration  time.Duration `json:"duration_ns,omitempty"`
	ThinkTime time.Duration `json:"think_time_ns,omitempty"`

	Timeout        time.Duration `json:"timeout_ns,omitempty"`
	MaxWorkers     int           `json:"max_workers,omitempty"`
	Connections    int           `json:"connections,omitempty"`
	MaxConnections int           `json:"max_connections,omitempty"`
	Seed           uint64        `json:"seed"`
	Warmup         time.Duration `json:"warmup_ns,omitempty"`
	WarmupRate     float64       `json:"warmup_rate,omitempty"`
}

// Target is load.Target without the body and headers (the scenarios
// send GETs).
type Target struct {
	URL    string  `json:"url"`
	Host   string  `json:"host,omitempty"`
	Weight float64 `json:"weight"`
}

// NewSpec is shard of shards of cfg, starting at start. Callbacks and
// the client are not carried; the shard keeps its per-second histograms.
// The bounds on workers and connections are cfg's totals (a 0 is the
// engine's default, load.DefaultMaxWorkers and DefaultConnections, not
// each shard's), split between the shards (each offers its share of the
// load): N generators run the workers and open the connections one
// would, not N times as many. CheckSplit says whether the bounds split
// at all; a shard's idle-connection pool gets at least 1.
func NewSpec(cfg load.Config, shard, shards int, start time.Time) Spec {
	workers, idle := cfg.MaxWorkers, cfg.Connections
	if shards > 1 && workers <= 0 {
		workers = load.DefaultMaxWorkers
	}
	if shards > 1 && idle <= 0 {
		idle = load.DefaultConnections
	}
	s := Spec{
		StartAt: start.UTC(), Shard: shard, Shards: shards, Open: cfg.Open,
		Users: cfg.Users, Duration: cfg.Duration, ThinkTime: cfg.ThinkTime, Timeout: cfg.Timeout,
		MaxWorkers: share(workers, shard, shards), Connections: max(share(idle, shard, shards), min(idle, 1)),
		MaxConnections: share(cfg.MaxConnections, shard, shards),
		Seed:           cfg.Seed, Warmup: cfg.Warmup, WarmupRate: cfg.WarmupRate,
	}
	for _, t := range cfg.Targets {
		s.Targets = append(s.Targets, Target{URL: t.URL, Host: t.Host, Weight: t.Weight})
	}
	return s
}

// share is shard's part of total split over shards (the first total %
// shards get one more), so the parts add up to total; 0 (none) stays 0.
func share(total, shard, shards int) int {
	if total <= 0 || shards <= 1 {
		return total
	}
	n := total / shards
	if shard < total%shards {
		n++
	}
	return n
}

// CheckSplit reports whether cfg's bounds split over shards generators:
// each needs at least one worker and, under a connection cap, one
// connection, and a cap (or a worker bound) smaller than the number of
// generators would give some none, or, rounded up to one each, a merged
// bound above the run's.
func CheckSplit(cfg load.Config, shards int) error {
	if shards <= 1 {
		return nil
	}
	workers := cfg.MaxWorkers
	if workers <= 0 {
		workers = load.DefaultMaxWorkers
	}
	var errs []error
	if workers < shards {
		errs = append(errs, fmt.Errorf("%d generators cannot split %d load workers (load.maxWorkers): use at most %d generators", shards, workers, workers))
	}
	if c := cfg.MaxConnections; c > 0 && c < shards {
		errs = append(errs, fmt.Errorf("%d generators cannot split a cap of %d connections (load.maxConnections, or the one sized from the peak rate and timeout): use at most %d generators or a larger cap", shards, c, c))
	}
	if len(errs) > 0 {
		return fmt.Errorf("loadgen: %w", errors.Join(errs...))
	}
	return nil
}

// Config is the load.Config of s.
func (s Spec) Config() load.Config {
	c := load.Config{
		Open: s.Open, Users: s.Users, Duration: s.Duration, ThinkTime: s.ThinkTime, Timeout: s.Timeout,
		MaxWorkers: s.MaxWorkers, Connections: s.Connections, MaxConnections: s.MaxConnections,
		Seed: s.Seed, Warmup: s.Warmup, WarmupRate: s.WarmupRate,
		Shard: s.Shard, Shards: s.Shards, SecondHistograms: true, Start: s.StartAt,
	}
	for _, t := range s.Targets {
		c.Targets = append(c.Targets, load.Target{URL: t.URL, Host: t.Host, Weight: t.Weight})
	}
	return c
}

// Report is a generator's outcome: its shard and its whole accounting,
// or the error that stopped it.
type Report struct {
	Version int    `json:"prequalbench_loadgen_report"`
	Shard   int    `json:"shard"`
	Shards  int    `json:"shards"`
	Error   string `json:"error,omitempty"`
	Result  *Wire  `json:"result,omitempty"`
}

// Wire is load.Result in JSON, histograms V2-encoded (base64 text).
type Wire struct {
	Model             string            `json:"model"`
	Users             int               `json:"users,omitempty"`
	Histogram         string            `json:"histogram"`
	Pessimistic       string            `json:"pessimistic"`
	SendLag           string            `json:"send_lag"`
	ConnWait          string            `json:"conn_wait"`
	Series            []WireSecond      `json:"series"`
	StatusCodes       map[string]uint64 `json:"status_codes"`
	Sent              uint64            `json:"sent"`
	Completed         uint64            `json:"completed"`
	CompletedInWindow uint64            `json:"completed_in_window"`
	Succeeded         uint64            `json:"succeeded"`
	Failed4xx         uint64            `json:"failed_4xx"`
	Failed5xx         uint64            `json:"failed_5xx"`
	Timeouts          uint64            `json:"timeouts"`
	ConnErrors        uint64            `json:"conn_errors"`
	Errors            uint64            `json:"errors"`
	Outstanding       uint64            `json:"outstanding"`
	Clamped           uint64            `json:"clamped"`
	Late              uint64            `json:"late"`
	Dropped           uint64            `json:"dropped"`
	ConnCap           int               `json:"conn_cap"`
	ConnCapBound      uint64            `json:"conn_cap_bound"`
	Duration          time.Duration     `json:"duration_ns"`
	Planned           uint64            `json:"planned"`
	TargetRate        float64           `json:"target_rate"`
}

// WireSecond is one row of the series with its success histogram.
type WireSecond struct {
	Second    int           `json:"second"`
	Sent      uint64        `json:"sent"`
	Completed uint64        `json:"completed"`
	Succeeded uint64        `json:"succeeded"`
	Errors    uint64        `json:"errors"`
	Late      uint64        `json:"late"`
	P50       time.Duration `json:"p50_ns"`
	P99       time.Duration `json:"p99_ns"`
	Histogram string        `json:"histogram,omitempty"`
}

// Encode turns r into its wire form.
func Encode(r *load.Result) (*Wire, error) {
	w := &Wire{
		Model: r.Model, Users: r.Users, StatusCodes: map[string]uint64{},
		Sent: r.Sent, Completed: r.Completed, CompletedInWindow: r.CompletedInWindow, Succeeded: r.Succeeded,
		Failed4xx: r.Failed4xx, Failed5xx: r.Failed5xx, Timeouts: r.Timeouts, ConnErrors: r.ConnErrors,
		Errors: r.Errors, Outstanding: r.Outstanding, Clamped: r.Clamped, Late: r.Late, Dropped: r.Dropped,
		ConnCap: r.ConnCap, ConnCapBound: r.ConnCapBound, Duration: r.Duration, Planned: r.Planned, TargetRate: r.TargetRate,
	}
	for code, n := range r.StatusCodes {
		w.StatusCodes[strconv.Itoa(code)] = n
	}
	var err error
	for _, h := range []struct {
		dst *string
		src *hdrhistogram.Histogram
	}{{&w.Histogram, r.Histogram}, {&w.Pessimistic, r.Pessimistic}, {&w.SendLag, r.SendLag}, {&w.ConnWait, r.ConnWait}} {
		if *h.dst, err = encode(h.src); err != nil {
			return nil, err
		}
	}
	for _, s := range r.Series {
		ws := WireSecond{Second: s.Second, Sent: s.Sent, Completed: s.Completed, Succeeded: s.Succeeded, Errors: s.Errors, Late: s.Late, P50: s.P50, P99: s.P99}
		if s.Histogram != nil {
			if ws.Histogram, err = encode(s.Histogram); err != nil {
				return nil, err
			}
		}
		w.Series = append(w.Series, ws)
	}
	return w, nil
}

func encode(h *hdrhistogram.Histogram) (string, error) {
	if h == nil {
		return "", nil
	}
	b, err := artifacts.EncodeHistogram(h)
	return string(b), err
}

func decode(s string) (*hdrhistogram.Histogram, error) {
	if s == "" {
		return nil, nil
	}
	return artifacts.DecodeHistogram([]byte(s))
}

// Decode reverses Encode.
func (w *Wire) Decode() (*load.Result, error) {
	r := &load.Result{
		Model: w.Model, Users: w.Users, StatusCodes: map[int]uint64{},
		Sent: w.Sent, Completed: w.Completed, CompletedInWindow: w.CompletedInWindow, Succeeded: w.Succeeded,
		Failed4xx: w.Failed4xx, Failed5xx: w.Failed5xx, Timeouts: w.Timeouts, ConnErrors: w.ConnErrors,
		Errors: w.Errors, Outstanding: w.Outstanding, Clamped: w.Clamped, Late: w.Late, Dropped: w.Dropped,
		ConnCap: w.ConnCap, ConnCapBound: w.ConnCapBound, Duration: w.Duration, Planned: w.Planned, TargetRate: w.TargetRate,
	}
	for code, n := range w.StatusCodes {
		c, err := strconv.Atoi(code)
		if err != nil {
			return nil, fmt.Errorf("loadgen: status code %q", code)
		}
		r.StatusCodes[c] = n
	}
	var err error
	for _, h := range []struct {
		dst **hdrhistogram.Histogram
		src string
	}{{&r.Histogram, w.Histogram}, {&r.Pessimistic, w.Pessimistic}, {&r.SendLag, w.SendLag}, {&r.ConnWait, w.ConnWait}} {
		if *h.dst, err = decode(h.src); err != nil {
			return nil, err
		}
	}
	for _, ws := range w.Series {
		s := load.Second{Second: ws.Second, Sent: ws.Sent, Completed: ws.Completed, Succeeded: ws.Succeeded, Errors: ws.Errors, Late: ws.Late, P50: ws.P50, P99: ws.P99}
		if s.Histogram, err = decode(ws.Histogram); err != nil {
			return nil, err
		}
		r.Series = append(r.Series, s)
	}
	return r, nil
}

// Log lines of a report. The report's JSON is cut into chunks of at
// most ChunkBytes, each printed as one line
//
//	prequalbench-loadgen-chunk SEQ/COUNT DATA
//
// (SEQ from 1; DATA a piece of the JSON, which holds no newline), then
// one line
//
//	prequalbench-loadgen-end COUNT BYTES SHA256
//
// so a log cut short (the kubelet rotates a container's log at
// containerLogMaxSize, 10 MiB by default, and the API server serves the
// current file only) or mangled is an error naming what is missing,
// never a truncated result. An hour at 2,000 rps is about 8 MB.
const (
	ChunkPrefix = "prequalbench-loadgen-chunk "
	EndPrefix   = "prequalbench-loadgen-end "
	// ChunkBytes keeps each line under the container runtime's 16 KiB
	// log-line limit, above which lines are split into partial entries.
	ChunkBytes = 12 << 10
	// KubeletLogLimit is the kubelet's default containerLogMaxSize, the
	// size at which a container's log rotates.
	KubeletLogLimit = 10 << 20
)

// WriteReport writes rep as its chunk lines and the end line.
func WriteReport(w io.Writer, rep Report) error {
	rep.Version = 1
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	var chunks [][]byte
	for rest := b; len(rest) > 0; {
		n := min(len(rest), ChunkBytes)
		for n < len(rest) && n > 0 && !utf8.RuneStart(rest[n]) {
			n-- // keep each line valid UTF-8
		}
		chunks = append(chunks, rest[:n])
		rest = rest[n:]
	}
	bw := bufio.NewWriter(w)
	for i, c := range chunks {
		fmt.Fprintf(bw, "%s%d/%d ", ChunkPrefix, i+1, len(chunks))
		bw.Write(c)
		bw.WriteByte('\n')
	}
	sum := sha256.Sum256(b)
	fmt.Fprintf(bw, "%s%d %d %s\n", EndPrefix, len(chunks), len(b), hex.EncodeToString(sum[:]))
	return bw.Flush()
}

// ReadReport reassembles the report from a generator's log (other lines
// are skipped), checks it against the end line's count, size and
// SHA-256, and returns its result; a report of a failed generator, a log
// without a report, or one missing chunks is an error.
func ReadReport(r io.Reader) (Report, *load.Result, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var (
		rep                Report
		chunks             = map[int][]byte{}
		count              = -1
		endCount, endBytes int
		endSum             string
		ended              bool
	)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, ChunkPrefix); ok {
			var seq, of int
			pos, data, _ := strings.Cut(rest, " ")
			if _, err := fmt.Sscanf(pos, "%d/%d", &seq, &of); err != nil || seq < 1 || seq > of {
				return rep, nil, fmt.Errorf("loadgen: bad report chunk header %q", pos)
			}
			if count >= 0 && of != count {
				return rep, nil, fmt.Errorf("loadgen: report chunk %d says %d chunks, an earlier one %d (two reports in one log?)", seq, of, count)
			}
			count = of
			chunks[seq] = []byte(data)
			continue
		}
		if rest, ok := strings.CutPrefix(line, EndPrefix); ok {
			if _, err := fmt.Sscanf(rest, "%d %d %s", &endCount, &endBytes, &endSum); err != nil {
				return rep, nil, fmt.Errorf("loadgen: bad report end line %q: %w", line, err)
			}
			ended = true
		}
	}
	if err := sc.Err(); err != nil {
		return rep, nil, fmt.Errorf("loadgen: read log: %w", err)
	}
	switch {
	case !ended && count < 0:
		return rep, nil, errors.New("loadgen: no report in the log")
	case !ended:
		return rep, nil, fmt.Errorf("loadgen: the report's end line is missing (%d of %d chunks read): the generator died while writing it, or the log was cut", len(chunks), count)
	case count >= 0 && count != endCount:
		return rep, nil, fmt.Errorf("loadgen: the report has %d chunks, its end line says %d", count, endCount)
	}
	var b []byte
	var missing []string
	for seq := 1; seq <= endCount; seq++ {
		c, ok := chunks[seq]
		if !ok {
			missing = append(missing, strconv.Itoa(seq))
			continue
		}
		b = append(b, c...)
	}
	if len(missing) > 0 {
		return rep, nil, fmt.Errorf("loadgen: report chunk(s) %s of %d missing from the log (%d bytes in all): the kubelet rotates a container's log at containerLogMaxSize (10 MiB by default) and the API server serves only the current file; shorten the window or use more generators",
			abbreviate(missing), endCount, endBytes)
	}
	sum := sha256.Sum256(b)
	if len(b) != endBytes || hex.EncodeToString(sum[:]) != endSum {
		return rep, nil, fmt.Errorf("loadgen: the report's %d chunks hold %d bytes with SHA-256 %x, its end line says %d bytes, %s: the log was altered", endCount, len(b), sum, endBytes, endSum)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return rep, nil, fmt.Errorf("loadgen: report: %w", err)
	}
	switch {
	case rep.Error != "":
		return rep, nil, fmt.Errorf("loadgen: shard %d of %d failed: %s", rep.Shard, rep.Shards, rep.Error)
	case rep.Result == nil:
		return rep, nil, fmt.Errorf("loadgen: shard %d of %d reported no result", rep.Shard, rep.Shards)
	}
	res, err := rep.Result.Decode()
	return rep, res, err
}

// abbreviate lists at most five items, then how many more.
func abbreviate(items []string) string {
	if len(items) <= 5 {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:5], ", "), len(items)-5)
}
