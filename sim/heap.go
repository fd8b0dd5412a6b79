package sim

import "cmp"

// minHeap is a binary min-heap of values by key, for the event queue and
// processor sharing's finish tags. Values with equal keys come out in the
// order they went in, so a run is a pure function of its seed. Written out
// rather than container/heap so that pushing and popping neither allocates
// once grown nor boxes values in interfaces, and with the order on a key
// of an ordered type so that comparing compiles to plain instructions.
type minHeap[K cmp.Ordered, V any] struct {
	h   []heapEntry[K, V]
	seq uint64 // pushes so far: breaks ties between equal keys
}

type heapEntry[K cmp.Ordered, V any] struct {
	key K
	seq uint64
	val V
}

func (q *minHeap[K, V]) len() int { return len(q.h) }

// min returns the smallest key and its value; the heap must not be empty.
func (q *minHeap[K, V]) min() (K, *V) { return q.h[0].key, &q.h[0].val }

func (q *minHeap[K, V]) push(key K, val V) {
	q.h = append(q.h, heapEntry[K, V]{key: key, seq: q.seq, val: val})
	q.seq++
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

// pop removes the smallest key and returns it with its value; the heap
// must not be empty.
func (q *minHeap[K, V]) pop() (K, V) {
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
	return top.key, top.val
}

func (e *heapEntry[K, V]) before(o *heapEntry[K, V]) bool {
	return e.key < o.key || (e.key == o.key && e.seq < o.seq)
}
