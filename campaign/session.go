package campaign

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
)

// startSession records this process's session in c. A resume whose
// environment facts differ from the first session's is refused unless
// force, so runs of two binaries, revisions or hosts never mix silently;
// forced, the session keeps its own facts and the differences.
// Environment stays the first session's.
func startSession(c *artifacts.Campaign, facts artifacts.Environment, now time.Time, force bool, warn io.Writer) error {
	if len(c.Sessions) == 0 && c.Environment.Name != "" {
		// Written before sessions were recorded: its facts are session 1.
		c.Sessions = []artifacts.Session{{Started: c.Started, Environment: c.Environment}}
	}
	s := artifacts.Session{Started: now, Environment: facts}
	if len(c.Sessions) > 0 {
		s.Differences = artifacts.FactDifferences(c.Sessions[0].Environment, facts)
		if len(s.Differences) > 0 && !force {
			return fmt.Errorf("campaign: resume: the environment differs from the one %s ran on (%s); its runs would mix with this one's in one report. Resume with the same binaries on the same host, or pass --force to resume anyway (campaign.json then records both)",
				c.ID, strings.Join(s.Differences, "; "))
		}
		if len(s.Differences) > 0 {
			fmt.Fprintf(warn, "warning: --force: this session's environment differs from the campaign's: %s\n", strings.Join(s.Differences, "; "))
		}
	} else {
		c.Environment = facts
	}
	c.Sessions = append(c.Sessions, s)
	return nil
}

// mergeBackends adds the backends of this session to those recorded: a
// resumed local environment listens on new ports, and the runs of earlier
// sessions still name the old addresses.
func mergeBackends(recorded, now []artifacts.Backend) []artifacts.Backend {
	seen := map[string]bool{}
	for _, b := range recorded {
		seen[b.Address] = true
	}
	out := recorded
	for _, b := range now {
		if !seen[b.Address] {
			out = append(out, b)
			seen[b.Address] = true
		}
	}
	return out
}
