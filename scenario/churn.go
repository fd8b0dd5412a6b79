package scenario

import (
	"fmt"
	"strings"
)

// Churn patterns.
const (
	// ChurnAlternate jumps between the bounds: min, max, min, ...
	ChurnAlternate = "alternate"
	// ChurnDoubling doubles the replicas up to max, then halves them down
	// to min, and again.
	ChurnDoubling = "doubling"
)

// ChurnPatterns are the allowed churn patterns, in the order error
// messages list them.
var ChurnPatterns = []string{ChurnAlternate, ChurnDoubling}

// Churn scales one backend group during the measured window: every Every
// the group's replicas change to the pattern's next count between Min and
// Max. The group starts each run at its replicas and is scaled back to
// them after the window.
type Churn struct {
	// Group names the backend group to scale.
	Group string `json:"group"`
	Min   int    `json:"min"`
	Max   int    `json:"max"`
	// Every is the time between two scaling steps; the first step is
	// Every after the window starts.
	Every Duration `json:"every"`
	// Pattern is alternate (default) or doubling.
	Pattern string `json:"pattern,omitempty"`
}

func (c *Churn) applyDefaults() {
	if c.Pattern == "" {
		c.Pattern = ChurnAlternate
	}
}

// Next is the replica count after current: the step's target. up says
// whether a doubling pattern is on its way up; Next returns the direction
// for the following step.
func (c Churn) Next(current int, up bool) (next int, stillUp bool) {
	if c.Pattern == ChurnDoubling {
		if up && current < c.Max {
			return min(current*2, c.Max), true
		}
		if current > c.Min {
			return max(current/2, c.Min), false
		}
		return min(current*2, c.Max), true
	}
	if current < c.Max {
		return c.Max, true
	}
	return c.Min, false
}

// Steps is the sequence of targets of n steps from start.
func (c Churn) Steps(start, n int) []int {
	out := make([]int, 0, n)
	cur, up := start, true
	for range n {
		cur, up = c.Next(cur, up)
		out = append(out, cur)
	}
	return out
}

// churn validates the block against the workload: the group must exist
// and start within [min, max].
func (v *validator) churn(c *Churn, w *Workload) {
	if c == nil {
		return
	}
	var group *BackendGroup
	var names []string
	for i := range w.Routes {
		for j := range w.Routes[i].Backends {
			g := &w.Routes[i].Backends[j]
			names = append(names, g.Name)
			if g.Name == c.Group {
				group = g
			}
		}
	}
	if group == nil {
		v.add("churn.group", "got %q, want the name of a backend group: %s", c.Group, strings.Join(names, ", "))
	}
	if c.Min < 1 {
		v.add("churn.min", "got %d, want a whole number >= 1 (a route without replicas answers 503)", c.Min)
	}
	if c.Max <= c.Min {
		v.add("churn.max", "got %d, want more than min (%d)", c.Max, c.Min)
	}
	v.duration("churn.every", c.Every, true, false)
	v.oneOf("churn.pattern", c.Pattern, ChurnPatterns)
	if group != nil && group.Mode == "cpu-share" {
		v.add("churn.group", "group %q is cpu-share: its replicas are placed on machines when the environment starts, want a group of another mode", c.Group)
	}
	if group != nil && c.Min >= 1 && c.Max > c.Min && (group.Replicas < c.Min || group.Replicas > c.Max) {
		v.add("churn.group", "group %q starts with %d replicas, want between min (%d) and max (%d)", c.Group, group.Replicas, c.Min, c.Max)
	}
}

// ChurnString is a one-line description, for logs.
func (c Churn) String() string {
	return fmt.Sprintf("%s %d..%d every %s (%s)", c.Group, c.Min, c.Max, c.Every, c.Pattern)
}
