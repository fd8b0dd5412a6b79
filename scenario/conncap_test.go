package scenario

import "testing"

func TestConnectionCap_SizedFromPeakRateAndTimeout(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    Load
		want int
	}{
		{"rate × timeout", Load{Open: []Phase{{Kind: PhaseConstant, Rate: 440}}, Timeout: "10s"}, 4400},
		{"peak of a ramp", Load{Open: []Phase{{Kind: PhaseConstant, Rate: 50}, {Kind: PhaseRamp, From: 100, To: 300}}, Timeout: "2s"}, 600},
		{"burst high", Load{Open: []Phase{{Kind: PhaseBurst, High: 900, Low: 10}}, Timeout: "1s"}, 900},
		{"default timeout", Load{Open: []Phase{{Kind: PhaseConstant, Rate: 100}}}, 1000},
		{"lower bound", Load{Open: []Phase{{Kind: PhaseConstant, Rate: 1}}, Timeout: "1s"}, MinConnectionCap},
		{"upper bound", Load{Open: []Phase{{Kind: PhaseConstant, Rate: 5000}}, Timeout: "10s"}, MaxConnectionCap},
		{"closed loop: the users", Load{Users: 500}, 500},
		{"explicit", Load{Open: []Phase{{Kind: PhaseConstant, Rate: 440}}, MaxConnections: 256}, 256},
	} {
		if got := tc.l.ConnectionCap(); got != tc.want {
			t.Errorf("%s: cap %d, want %d", tc.name, got, tc.want)
		}
	}
}
