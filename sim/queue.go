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
// order they were scheduled, so a run is a pure function of its seed.
type event struct {
	at      int64 // virtual ns
	x       int64
	a, b, c int32
	kind    eventKind
}

// eventQueue orders events by time, then by when they were scheduled.
type eventQueue struct{ heap minHeap[int64, event] }

func (q *eventQueue) len() int { return q.heap.len() }

func (q *eventQueue) push(e event) { q.heap.push(e.at, e) }

// peek returns the earliest event's time; the queue must not be empty.
func (q *eventQueue) peek() int64 { at, _ := q.heap.min(); return at }

func (q *eventQueue) pop() event { _, e := q.heap.pop(); return e }
