package env

import (
	"os"
	"regexp"
	"testing"
)

// The host is recorded as a short hash of its name, so that report
// --compare can tell two hosts apart, and the name is not published.
func TestHostFacts_HostIDHashesTheHostName(t *testing.T) {
	name, err := os.Hostname()
	if err != nil || name == "" {
		t.Skip("no host name here")
	}
	id := HostFacts("").HostID
	if !regexp.MustCompile(`^[0-9a-f]{12}$`).MatchString(id) || id == name {
		t.Errorf("host id %q, want 12 hex digits, not the name", id)
	}
}
