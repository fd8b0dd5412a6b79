package lazydeadline

import (
	"testing"
	"time"
)

func TestRenew(t *testing.T) {
	want := time.Unix(1000, 0)
	slack := 10 * time.Millisecond
	for _, tt := range []struct {
		name  string
		cur   time.Time
		renew bool
	}{
		{"none set", time.Time{}, true},
		{"would fire early", want.Add(-time.Nanosecond), true},
		{"exactly on time", want, false},
		{"within the slack", want.Add(slack), false},
		{"later than the slack", want.Add(slack + time.Nanosecond), true},
	} {
		got, renew := Renew(tt.cur, want, slack)
		if renew != tt.renew {
			t.Errorf("%s: renew %v, want %v", tt.name, renew, tt.renew)
		}
		if renew && !got.Equal(want.Add(slack)) {
			t.Errorf("%s: renewed to %v, want want+slack", tt.name, got)
		}
		if !renew && !got.Equal(tt.cur) {
			t.Errorf("%s: kept %v, want the deadline in force", tt.name, got)
		}
	}
	if Slack(time.Minute) != 250*time.Millisecond || Slack(100*time.Millisecond) != 6250*time.Microsecond {
		t.Fatalf("Slack: %v for a minute, %v for 100 ms", Slack(time.Minute), Slack(100*time.Millisecond))
	}
}
