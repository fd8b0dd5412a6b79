package scenario

import (
	"fmt"
	"strings"
	"testing"
)

func TestWarnings_WRRBlackoutLongerThanTheWarmup(t *testing.T) {
	base := `name: w
workload:
  routes:
    - name: work
      backends: [{name: a, replicas: 2}]
load:
  open: [{kind: constant, duration: 30s, rate: 10}]
protocol:
  algorithms: [prequal, "%s"]
  warmup: %s
`
	for _, tc := range []struct {
		alg, warmup string
		want        string // "" for no warning
	}{
		{"wrr", "5s", "wrr: its weights come into force up to 11s after each reset (blackout 10s, then the next weight update, every 1s) but protocol.warmup is 5s: the first 6s of each measured window runs as round-robin"},
		{"wrr", "11s", ""},
		{"wrr", "15s", ""},
		{"wrr{blackout=1s}", "5s", ""},
		{"wrr{period=500ms}", "10s", "the first 500ms of each measured window"},
		{"wrr{blackout=1m}", "10s", "the whole measured window runs as round-robin"},
		{"round-robin", "0s", ""},
	} {
		s, err := Parse([]byte(fmt.Sprintf(base, tc.alg, tc.warmup)))
		if err != nil {
			t.Fatalf("%s: %v", tc.alg, err)
		}
		ws := s.Warnings()
		switch {
		case tc.want == "" && len(ws) != 0:
			t.Errorf("%s, warmup %s: warnings %q, want none", tc.alg, tc.warmup, ws)
		case tc.want != "" && (len(ws) != 1 || !strings.Contains(ws[0], tc.want)):
			t.Errorf("%s, warmup %s: warnings %q, want one containing %q", tc.alg, tc.warmup, ws, tc.want)
		}
	}
}

// The catalogue's scenarios warm up long enough at full length; a short
// look (--duration-scale) at one that compares wrr warns.
func TestWarnings_CatalogueAtFullLengthAndScaled(t *testing.T) {
	for _, n := range Names() {
		s, err := Catalogue(n)
		if err != nil {
			t.Fatal(err)
		}
		if ws := s.Warnings(); len(ws) != 0 {
			t.Errorf("%s at full length warns: %q", n, ws)
		}
	}
	s, err := Catalogue("hetero16-90")
	if err != nil {
		t.Fatal(err)
	}
	s.Scale(0.3)
	if ws := s.Warnings(); len(ws) != 1 || !strings.Contains(ws[0], "protocol.warmup is 4.5s") {
		t.Errorf("hetero16-90 at --duration-scale 0.3: warnings %q, want wrr's", ws)
	}
}
