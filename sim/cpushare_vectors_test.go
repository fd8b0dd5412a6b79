package sim

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/loadbalancer"
)

// cpuShareVectorsFile is shared with the backend's model
// (backend/src/cpushare.rs, replayed by backend/tests/cpushare_vectors.rs):
// machine settings, arrivals, and when each must finish.
// backend/testdata/cpushare-vectors.md describes the format.
var cpuShareVectorsFile = filepath.Join("..", "backend", "testdata", "cpushare-vectors.json")

type cpuShareVector struct {
	Name     string       `json:"name"`
	Share    float64      `json:"share"`
	Replicas int          `json:"replicas"`
	Hard     bool         `json:"hard"`
	Cores    int          `json:"cores"`
	Threads  int          `json:"threads"`
	Levels   []float64    `json:"levels"`
	HoldMS   []float64    `json:"hold_ms"`
	Machine  int          `json:"machine"`
	Machines int          `json:"machines"`
	Arrivals [][4]float64 `json:"arrivals"` // t_ms, replica, work_ms, finish_us
}

// TestCPUShare_SharedVectors drives sim's own cpu-share code with the
// vectors' arrivals, bypassing clients and policies: each arrival is put
// straight into its replica at its virtual time with its work (a fixed
// draw of that mean), and the time it is answered is compared, to the µs,
// with the finish time the backend's model must also give.
func TestCPUShare_SharedVectors(t *testing.T) {
	text, err := os.ReadFile(cpuShareVectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []cpuShareVector `json:"cases"`
	}
	if err := json.Unmarshal(text, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Cases) < 10 {
		t.Fatalf("only %d cases", len(file.Cases))
	}
	for _, c := range file.Cases {
		t.Run(c.Name, func(t *testing.T) {
			got := replayCPUShare(t, c)
			for k, a := range c.Arrivals {
				if want := int64(a[3]); got[k] != want {
					t.Errorf("arrival %d %v: finished at %d µs, want %d", k, a, got[k], want)
				}
			}
		})
	}
}

// replayCPUShare returns each arrival's finish time in µs (rounded).
func replayCPUShare(t *testing.T, c cpuShareVector) []int64 {
	t.Helper()
	machines := max(c.Machines, 1)
	load := MachineLoad{Levels: c.Levels}
	for _, h := range c.HoldMS {
		load.Hold = append(load.Hold, time.Duration(h*1e6))
	}
	// Machine m of n holds servers m·replicas ...: the case's machine is
	// placed, and its antagonist phased, as in a fleet of n.
	w, err := New(Config{
		Seed: 1, Clients: 1, Algorithm: loadbalancer.NameRoundRobin, Policy: loadbalancer.DefaultConfig(),
		Routes: []Route{{Name: "r", Groups: []Group{{
			Name: "s", Replicas: c.Replicas * machines, Mode: "cpu-share", ServiceTime: time.Millisecond,
			Distribution: "fixed", QueueLimit: 1 << 20,
			CPUShare: &CPUShare{Share: c.Share, PerMachine: c.Replicas, Hard: c.Hard, Threads: c.Threads,
				Cores: c.Cores, Antagonist: load},
		}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	finish := make([]int64, len(c.Arrivals))
	reqOf := make([]int32, len(c.Arrivals))
	pending := map[int]bool{}
	work := map[int32]float64{} // request → its work, ns
	// step fires the next event and notes the arrivals it answered. A
	// queued request draws its work when it starts (as the backend's
	// does): each queue's head is given its own as the mean beforehand.
	step := func() {
		for _, s := range w.servers {
			if s.queue.len() > 0 {
				s.meanNS = work[s.queue.buf[s.queue.head]]
			}
		}
		w.step()
		for k := range pending {
			if w.reqs[reqOf[k]].where == wDone {
				finish[k] = int64(math.Round(float64(w.now) / 1e3))
				delete(pending, k)
			}
		}
	}
	for k, a := range c.Arrivals {
		at := int64(a[0] * 1e6)
		for w.q.len() > 0 && w.q.peek() <= at {
			step()
		}
		w.now = at
		si := int32(c.Machine*c.Replicas + int(a[1]))
		s := w.servers[si]
		s.meanNS = a[2] * 1e6 // fixed: the draw is the mean
		i := w.alloc()
		// Settled: the answer frees the request instead of travelling to
		// a client.
		w.reqs[i] = request{server: si, user: -1, holds: 1, gen: w.reqs[i].gen, settled: true,
			arrived: at, rifAt: uint64(s.rif)}
		s.rif++
		switch w.psArrive(si, i) {
		case admitServe:
		case admitQueued:
			w.reqs[i].where = wQueued
		default:
			t.Fatalf("arrival %d not admitted", k)
		}
		reqOf[k] = i
		work[i] = a[2] * 1e6
		pending[k] = true
	}
	for len(pending) > 0 {
		if w.q.len() == 0 {
			t.Fatalf("arrivals %v never finish", pending)
		}
		step()
	}
	return finish
}
