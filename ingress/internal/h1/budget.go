package h1

import "sync/atomic"

// BodyBudget bounds the body bytes all exchanges hold in memory at once, so
// a few clients sending (or asking for) large bodies cannot take the
// memory every other request needs. A buffer is charged as it grows, so a
// body is refused once the budget is spent, not for what it declared.
type BodyBudget struct {
	limit int64
	used  atomic.Int64
}

// NewBodyBudget returns a budget of limit bytes.
func NewBodyBudget(limit int64) *BodyBudget { return &BodyBudget{limit: limit} }

// InUse is the number of bytes charged now.
func (g *BodyBudget) InUse() int64 { return g.used.Load() }

func (g *BodyBudget) take(n int64) bool {
	for {
		u := g.used.Load()
		if u+n > g.limit {
			return false
		}
		if g.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// ErrBodyBudget is a body that would overrun the BodyBudget: the request
// is answered 503 (the ingress is short of memory, not the client at
// fault).
var ErrBodyBudget = &Error{Status: 503, Reason: "body memory budget spent"}

// Charge is what one exchange holds of a budget. Its zero value charges
// nothing.
type Charge struct {
	budget *BodyBudget
	held   int64
}

// Use makes c charge g (nil: nothing).
func (c *Charge) Use(g *BodyBudget) { c.Release(); c.budget = g }

func (c *Charge) take(n int) bool {
	if c == nil || c.budget == nil {
		return true
	}
	if !c.budget.take(int64(n)) {
		return false
	}
	c.held += int64(n)
	return true
}

// Release gives back all c holds; called once the exchange's answer is out
// (a buffer the connection keeps for the next request is at most
// retainLimit and is not charged).
func (c *Charge) Release() {
	if c.budget != nil && c.held > 0 {
		c.budget.used.Add(-c.held)
	}
	c.held = 0
}
