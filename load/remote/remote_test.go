package remote

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/load"
)

// A report survives its log line: every counter, histogram and row
// comes back as measured, so merging what the logs carry is merging
// the generators' own accounting.
func TestReportRoundTrip(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bad" {
			w.WriteHeader(503)
		}
	}))
	defer srv.Close()
	spec := NewSpec(load.Config{
		Targets: []load.Target{{URL: srv.URL + "/ok", Weight: 3}, {URL: srv.URL + "/bad", Weight: 1}},
		Open:    []load.Phase{{Kind: load.KindConstant, Rate: 200, Duration: 1500 * time.Millisecond}}, Seed: 9,
	}, 0, 1, time.Time{})
	res, err := load.Run(context.Background(), spec.Config())
	if err != nil {
		t.Fatal(err)
	}
	w, err := Encode(res)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	log.WriteString("loadgen: starting\n")
	if err := WriteReport(&log, Report{Shard: 0, Shards: 1, Result: w}); err != nil {
		t.Fatal(err)
	}
	_, got, err := ReadReport(&log)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed5xx == 0 || res.Succeeded == 0 {
		t.Fatalf("the test measured no mix: %+v", res.Summary())
	}
	if !reflect.DeepEqual(got.Summary(), res.Summary()) || !got.Histogram.Equals(res.Histogram) || !got.Pessimistic.Equals(res.Pessimistic) {
		t.Errorf("decoded %+v\nmeasured %+v", got.Summary(), res.Summary())
	}
	if len(got.Series) != len(res.Series) {
		t.Fatalf("%d rows, measured %d", len(got.Series), len(res.Series))
	}
	for i := range res.Series {
		a, b := res.Series[i], got.Series[i]
		if !a.Histogram.Equals(b.Histogram) {
			t.Errorf("row %d: histogram differs", i)
		}
		a.Histogram, b.Histogram = nil, nil
		if a != b {
			t.Errorf("row %d: %+v, measured %+v", i, b, a)
		}
	}
}

func TestReadReportWithoutReport(t *testing.T) {
	if _, _, err := ReadReport(strings.NewReader("panic: something\n")); err == nil {
		t.Error("a log without a report was read as one")
	}
}

// The shards' worker and connection bounds add up to the run's (each at
// least 1), so N generators do not open N times the connections.
func TestNewSpecSplitsTheBounds(t *testing.T) {
	cfg := load.Config{MaxWorkers: 10, Connections: 3, MaxConnections: 7}
	var workers, conns, maxConns []int
	for i := range 4 {
		s := NewSpec(cfg, i, 4, time.Time{})
		workers, conns, maxConns = append(workers, s.MaxWorkers), append(conns, s.Connections), append(maxConns, s.MaxConnections)
	}
	for _, c := range []struct {
		name  string
		got   []int
		total int
	}{{"max workers", workers, 10}, {"connections", conns, 4}, {"max connections", maxConns, 7}} { // idle connections: at least 1 each
		sum := 0
		for _, n := range c.got {
			sum += n
			if n < 1 {
				t.Errorf("%s: a shard got %d", c.name, n)
			}
		}
		if sum != c.total {
			t.Errorf("%s: shards get %v (sum %d), want a total of %d", c.name, c.got, sum, c.total)
		}
	}
	// The engine's defaults are the run's totals, not each shard's: 4
	// generators with MaxWorkers 0 ran 4 x 10 000 workers.
	workers, conns = nil, nil
	for i := range 4 {
		s := NewSpec(load.Config{}, i, 4, time.Time{})
		workers, conns = append(workers, s.MaxWorkers), append(conns, s.Connections)
		if s.MaxConnections != 0 {
			t.Errorf("no cap became %d", s.MaxConnections)
		}
	}
	if !slices.Equal(workers, []int{2500, 2500, 2500, 2500}) || !slices.Equal(conns, []int{2500, 2500, 2500, 2500}) {
		t.Errorf("defaults split into workers %v, idle connections %v; want 4 x 2500 of the 10 000 each", workers, conns)
	}
	if s := NewSpec(load.Config{}, 0, 1, time.Time{}); s.MaxWorkers != 0 || s.Connections != 0 {
		t.Errorf("one generator's defaults became %+v", s)
	}
}

// More generators than connections under the cap (or than workers)
// cannot split the bound without giving some none or, at one each,
// exceeding it: refused, naming the field.
func TestCheckSplit(t *testing.T) {
	for _, c := range []struct {
		cfg    load.Config
		shards int
		want   string
	}{
		{load.Config{MaxConnections: 4}, 4, ""},
		{load.Config{MaxConnections: 4}, 5, "cannot split a cap of 4 connections (load.maxConnections"},
		{load.Config{MaxWorkers: 3}, 4, "cannot split 3 load workers (load.maxWorkers)"},
		{load.Config{}, 1000, ""},
		{load.Config{MaxConnections: 1}, 1, ""},
	} {
		err := CheckSplit(c.cfg, c.shards)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v over %d: %v, want %q", c.cfg, c.shards, err, c.want)
		}
	}
}

// bigReport is a report of an hour of seconds: many chunks long.
func bigReport() Report {
	w := &Wire{Model: "open", StatusCodes: map[string]uint64{"200": 3600}, Sent: 3600}
	for i := range 3600 {
		w.Series = append(w.Series, WireSecond{Second: i, Sent: 1, Completed: 1, Succeeded: 1, P50: time.Millisecond})
	}
	return Report{Shard: 1, Shards: 2, Result: w}
}

// A report many chunks long comes back whole from a log that interleaves
// other lines with its chunks, and a log that lost a chunk (rotated),
// had one altered or lost its end line is an error saying so, never a
// shorter result.
func TestReportChunks(t *testing.T) {
	var log bytes.Buffer
	if err := WriteReport(&log, bigReport()); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(log.String(), "\n")
	lines = lines[:len(lines)-1] // the empty tail
	if len(lines) < 5 {
		t.Fatalf("%d lines: the test report is not several chunks long", len(lines))
	}
	for i, l := range lines {
		if len(l) > ChunkBytes+64 {
			t.Errorf("line %d is %d bytes, more than a chunk", i, len(l))
		}
	}
	interleaved := "loadgen: starting\n" + strings.Join(lines[:2], "") + "warning: something\n" + strings.Join(lines[2:], "")
	rep, res, err := ReadReport(strings.NewReader(interleaved))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Shard != 1 || rep.Shards != 2 || len(res.Series) != 3600 || res.Sent != 3600 || res.Series[3599].Second != 3599 {
		t.Errorf("reassembled shard %d/%d, %d rows, sent %d", rep.Shard, rep.Shards, len(res.Series), res.Sent)
	}

	// CRLF line ends and a line the log repeated (a runtime re-sending
	// after a rotation) leave the report whole.
	crlf := strings.ReplaceAll(interleaved, "\n", "\r\n")
	if _, res, err := ReadReport(strings.NewReader(crlf)); err != nil || len(res.Series) != 3600 {
		t.Errorf("report with CRLF line ends: %v", err)
	}
	repeated := strings.Join(lines[:3], "") + lines[2] + strings.Join(lines[3:], "") + lines[len(lines)-1]
	if _, res, err := ReadReport(strings.NewReader(repeated)); err != nil || len(res.Series) != 3600 {
		t.Errorf("report with a repeated chunk and end line: %v", err)
	}

	cases := map[string]struct {
		log  string
		want string
	}{
		"first chunk rotated away": {strings.Join(lines[1:], ""), "containerLogMaxSize"},
		"altered":                  {strings.Join(lines[:2], "") + strings.Replace(lines[2], "\"sent\":1", "\"sent\":2", 1) + strings.Join(lines[3:], ""), "SHA-256"},
		"no end line":              {strings.Join(lines[:len(lines)-1], ""), "end line is missing"},
	}
	for name, c := range cases {
		if _, _, err := ReadReport(strings.NewReader(c.log)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}
