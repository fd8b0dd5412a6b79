package sim

// eventKind says what an event does when it fires.
type eventKind uint8

const (
	evSend              eventKind = iota // the next open-loop send is due
	evUserSend                           // closed-loop user a sends
	evReqAtServer                        // request a reaches its server
	evServiceDone                        // request a finishes service
	evRespAtClient                       // the answer to request a reaches its client
	evDeadline                           // the oldest outstanding requests may have timed out
	evProbeAtServer                      // probe from policy a reaches server b (sent at x)
	evProbeReply                         // probe answer reaches policy a: server b, RIF c, latency x (-1 unknown)
	evProbeFail                          // probe from policy a to server b failed; c is the outcome
	evIdleTick                           // policy a's idle-probe ticker
	evCapacity                           // server a's antagonist schedule may change its capacity
	evSecond                             // a whole second has passed (x = 1: of the warmup)
	evWindowStart                        // the measured window starts
	evWindowEnd                          // the measured window has ended
	evSyncProbeAtServer                  // sync probe of query a reaches server b (sent at x)
	evSyncReply                          // sync answer for query a from server b: RIF c, latency x (-1 unknown; c = -1 failed)
	evSyncTimeout                        // query a's wait for sync answers ends
	evPSDone                             // cpu-share replica a's next request may be done (generation x)
	evMachine                            // machine a's antagonist moves to its next level
)

// event is one scheduled happening. Events at the same instant fire in the
// order they were scheduled (seq), so a run is a pure function of its seed.
type event struct {
	at      int64 // virtual ns
	seq     uint64
	x       int64
	a, b, c int32
	kind    eventKind
}

// eventQueue is a binary min-heap on (at, seq), written out by hand so that
// pushing and popping neither allocates (once grown) nor goes through an
// interface.
type eventQueue struct {
	h   []event
	seq uint64
}

func (q *eventQueue) len() int { return len(q.h) }

func (q *eventQueue) push(e event) {
	e.seq = q.seq
	q.seq++
	q.h = append(q.h, e)
	i := len(q.h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.h[i].before(&q.h[p]) {
			break
		}
		q.h[i], q.h[p] = q.h[p], q.h[i]
		i = p
	}
}

// peek returns the earliest event's time; the queue must not be empty.
func (q *eventQueue) peek() int64 { return q.h[0].at }

func (q *eventQueue) pop() event {
	top := q.h[0]
	n := len(q.h) - 1
	q.h[0] = q.h[n]
	q.h = q.h[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q.h[r].before(&q.h[l]) {
			m = r
		}
		if !q.h[m].before(&q.h[i]) {
			break
		}
		q.h[i], q.h[m] = q.h[m], q.h[i]
		i = m
	}
	return top
}

func (e *event) before(o *event) bool {
	return e.at < o.at || (e.at == o.at && e.seq < o.seq)
}
