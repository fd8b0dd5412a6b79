package sim

import (
	"math/rand/v2"
	"testing"
)

// Pushes and pops in any interleaving come out in order of key, and equal
// keys in the order they were pushed: events by time then by when they
// were scheduled, finish tags smallest first.
func TestMinHeap_PopsByKeyThenPushOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q eventQueue
	var tags minHeap[float64, int32]
	lastAt, lastA := int64(-1), int32(-1)
	lastTag, lastReq := -1.0, int32(-1)
	for i := range int32(20000) {
		if rng.IntN(3) > 0 || q.len() == 0 {
			// Keys only move forward from the last pop, as in a run; few
			// values, so many are equal.
			q.push(event{at: max(lastAt, 0) + int64(rng.IntN(8)), a: i})
			tags.push(max(lastTag, 0)+float64(rng.IntN(8)), i)
			continue
		}
		if at := q.peek(); at != q.heap.h[0].key {
			t.Fatalf("peek %d, want %d", at, q.heap.h[0].key)
		}
		e := q.pop()
		if e.at < lastAt || (e.at == lastAt && e.a < lastA) {
			t.Fatalf("pop %d: event (at %d, pushed %d) after (at %d, pushed %d)", i, e.at, e.a, lastAt, lastA)
		}
		lastAt, lastA = e.at, e.a
		tag, req := tags.pop()
		if tag < lastTag || (tag == lastTag && req < lastReq) {
			t.Fatalf("pop %d: tag %v of request %d after tag %v of request %d", i, tag, req, lastTag, lastReq)
		}
		lastTag, lastReq = tag, req
	}
}
