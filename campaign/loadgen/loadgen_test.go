package loadgen

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/campaign/load"
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
	}{{"max workers", workers, 10}, {"connections", conns, 4}, {"max connections", maxConns, 7}} {
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
	if s := NewSpec(load.Config{}, 1, 4, time.Time{}); s.MaxWorkers != 0 || s.Connections != 0 || s.MaxConnections != 0 {
		t.Errorf("defaults (0) became %+v", s)
	}
}
