package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/load"
	"github.com/prequalbench/prequalbench/load/remote"
)

// `loadgen` runs its shard from the common start time and prints a
// report line that decodes to its whole accounting.
func TestLoadgenCommandReport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	cfg := load.Config{Targets: []load.Target{{URL: srv.URL + "/work"}}, Open: []load.Phase{{Kind: load.KindConstant, Rate: 100, Duration: time.Second}}, Seed: 3}
	spec := remote.NewSpec(cfg, 1, 2, time.Now().Add(300*time.Millisecond))
	b, _ := json.Marshal(spec)
	var out bytes.Buffer
	root := newRootCommand()
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	// While it runs, the generator answers its clock.
	clocks := make(chan error, 1)
	clockListening = func(addr string) {
		resp, err := http.Get("http://" + addr + remote.ClockPath)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var at time.Time
			if at, err = remote.ParseClock(b); err == nil && time.Since(at).Abs() > time.Minute {
				err = fmt.Errorf("clock %v", at)
			}
		}
		clocks <- err
	}
	defer func() { clockListening = nil }()
	root.SetArgs([]string{"loadgen", "--spec", string(b), "--clock-addr", "127.0.0.1:0"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-clocks; err != nil {
		t.Errorf("the generator's clock endpoint: %v", err)
	}
	rep, res, err := remote.ReadReport(strings.NewReader("some log line\n" + out.String()))
	if err != nil {
		t.Fatal(err)
	}
	// Shard 1 of 2 sends the odd hits of 100: 50.
	if rep.Shard != 1 || rep.Shards != 2 || res.Sent != 50 || res.Succeeded != 50 || res.Histogram.TotalCount() != 50 {
		t.Errorf("report shard %d/%d: sent %d, succeeded %d, histogram %d", rep.Shard, rep.Shards, res.Sent, res.Succeeded, res.Histogram.TotalCount())
	}
	var inRows int64
	for _, s := range res.Series {
		if s.Histogram != nil {
			inRows += s.Histogram.TotalCount()
		}
	}
	if inRows != 50 {
		t.Errorf("per-second histograms hold %d successes, want 50", inRows)
	}
}

// A generator that cannot run reports its error in the line the
// campaign reads, and the campaign's reader fails with it.
func TestLoadgenCommandReportsError(t *testing.T) {
	var out bytes.Buffer
	root := newRootCommand()
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"loadgen", "--spec", `{"shard":0,"shards":1,"targets":[]}`})
	if err := root.ExecuteContext(context.Background()); err == nil {
		t.Fatal("an empty spec ran")
	}
	if _, _, err := remote.ReadReport(&out); err == nil || !strings.Contains(err.Error(), "targets") {
		t.Errorf("read report: %v, want the generator's error", err)
	}
}
