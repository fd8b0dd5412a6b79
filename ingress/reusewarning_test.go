package ingress

import (
	"bytes"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prequalbench/prequalbench/ingress/route"
)

// lockedBuffer is a log sink safe for the ingress's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// TestUpdate_WarnsOnceWhenEq1HasNoBudget: a Prequal route of 3 replicas is
// below Eq. 1's pole at the defaults ((1 − 16/3)·3 < 1), so the ingress
// says so once; a repeated update does not repeat it, a round-robin route
// never warns, and a fleet above the pole (n = 100) does not warn.
func TestUpdate_WarnsOnceWhenEq1HasNoBudget(t *testing.T) {
	var logs lockedBuffer
	ing, err := New(Options{Seed: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	small := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}
	specs := []route.Spec{
		{Key: "p", Host: "p.test", Path: "/", Endpoints: small},
		{Key: "rr", Host: "rr.test", Path: "/", Algorithm: "round-robin", Endpoints: small},
	}
	ing.Update(specs)
	ing.Update(specs)
	const msg = "prequal reuse budget outside Eq. 1"
	if n := logs.count(msg); n != 1 {
		t.Fatalf("%d warnings after two identical updates, want 1; log:\n%s", n, logs.b.String())
	}
	if logs.count("route=rr") != 0 {
		t.Fatalf("round-robin route warned:\n%s", logs.b.String())
	}
	var large []string
	for i := range 100 {
		large = append(large, "127.0.1."+strconv.Itoa(i+1)+":80")
	}
	ing.Update([]route.Spec{{Key: "p", Host: "p.test", Path: "/", Endpoints: large}})
	if n := logs.count(msg); n != 1 {
		t.Fatalf("a 100-replica fleet warned (%d warnings):\n%s", n, logs.b.String())
	}
	ing.Update([]route.Spec{{Key: "p", Host: "p.test", Path: "/", Endpoints: small}})
	if n := logs.count(msg); n != 2 {
		t.Fatalf("shrinking back below the pole gave %d warnings in all, want 2", n)
	}
}

// A variant's own parameters decide: 100 replicas are above the pole at
// the defaults, but with one probe per query (1 − 16/100)·1 < 1 they are
// not, and the route named prequal{probes=1} says so.
func TestUpdate_ReuseWarningReadsTheVariant(t *testing.T) {
	var logs lockedBuffer
	ing, err := New(Options{Seed: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var large []string
	for i := range 100 {
		large = append(large, "127.0.1."+strconv.Itoa(i+1)+":80")
	}
	ing.Update([]route.Spec{
		{Key: "default", Host: "d.test", Path: "/", Algorithm: "prequal", Endpoints: large},
		{Key: "one", Host: "o.test", Path: "/", Algorithm: "prequal{probes=1}", Endpoints: large},
	})
	const msg = "prequal reuse budget outside Eq. 1"
	if n := logs.count(msg); n != 1 || logs.count("route=one") != 1 {
		t.Fatalf("%d warnings, want 1 for route one; log:\n%s", n, logs.b.String())
	}
}
