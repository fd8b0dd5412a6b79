package promlocal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func requirePrometheus(t *testing.T) {
	t.Helper()
	if _, err := binary(""); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v: hack/setup.sh installs it; CI must have it", err)
		}
		t.Skipf("skipping: %v", err)
	}
}

func TestConfigListsTargets(t *testing.T) {
	got := string(Config([]string{"127.0.0.1:9001", "127.0.0.1:9002"}, 2*time.Second))
	for _, want := range []string{`- "127.0.0.1:9001"`, `- "127.0.0.1:9002"`, "scrape_interval: 2s", "rules/*.yml"} {
		if !strings.Contains(got, want) {
			t.Errorf("config lacks %q:\n%s", want, got)
		}
	}
}

func TestStartRejectsBadTargets(t *testing.T) {
	for _, targets := range [][]string{nil, {"127.0.0.1"}, {"10.1.2.3:80"}, {"example.com:80"}} {
		_, err := StartInstance(context.Background(), t.TempDir(), targets, Options{Binary: "true"})
		if err == nil || !strings.Contains(err.Error(), "target") {
			t.Errorf("targets %q: err = %v, want an error naming the target", targets, err)
		}
	}
}

func TestStartWithoutBinary(t *testing.T) {
	_, err := StartInstance(context.Background(), t.TempDir(), []string{"127.0.0.1:1"}, Options{Binary: "/nonexistent/prometheus"})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
}

// TestScrapesAndKeepsData runs the real Prometheus against a fake
// /metrics on loopback, waits until the target is up and the rules are
// loaded, stops it and checks the data directory stays behind.
func TestScrapesAndKeepsData(t *testing.T) {
	requirePrometheus(t)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "# TYPE prequal_probe_queue_depth gauge")
		fmt.Fprintln(w, "prequal_probe_queue_depth 3")
	}))
	defer target.Close()

	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in, err := StartInstance(ctx, dir, []string{strings.TrimPrefix(target.URL, "http://")}, Options{ScrapeInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			in.Stop()
		}
	}()

	poll(t, ctx, "target up with the fake gauge", func() (bool, error) {
		v, err := query(in.URL, "prequal_probe_queue_depth")
		return v == "3", err
	})
	poll(t, ctx, "rules loaded", func() (bool, error) {
		resp, err := http.Get(in.URL + "/api/v1/rules")
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		var body struct {
			Data struct {
				Groups []struct{ Name string } `json:"groups"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			return false, err
		}
		return len(body.Data.Groups) > 0, nil
	})

	if err := in.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	stopped = true
	if err := in.Stop(); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	for _, p := range []string{"prometheus.yml", "rules/prequalbench.rules.yml", "data/wal", "prometheus.log"} {
		if _, err := os.Stat(filepath.Join(dir, "prometheus", p)); err != nil {
			t.Errorf("after stop: %v", err)
		}
	}
}

func query(base, q string) (string, error) {
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return "", err
	}
	if len(body.Data.Result) == 0 {
		return "", nil
	}
	s, _ := body.Data.Result[0].Value[1].(string)
	return s, nil
}

func poll(t *testing.T, ctx context.Context, what string, cond func() (bool, error)) {
	t.Helper()
	var last error
	for {
		ok, err := cond()
		if ok {
			return
		}
		last = err
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v (last error: %v)", what, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
