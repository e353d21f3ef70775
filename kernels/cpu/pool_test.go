package cpu

import (
	"sync/atomic"
	"testing"
	"time"
)

// Calls that follow each other closely (helpers spinning), after a pause
// (helpers parked) and at the edge between the two each run every piece
// exactly once and return only when all are done.
func TestPoolParkAndSpin(t *testing.T) {
	for _, workers := range []int{2, 3, 5} {
		p := newPool(workers)
		const pieces = 37
		var hits [pieces]atomic.Int32
		var inside atomic.Int32
		run := funcRunner(func(w, i int) {
			if w < 0 || w >= workers {
				t.Errorf("worker %d of %d", w, workers)
			}
			inside.Add(1)
			hits[i].Add(1)
			inside.Add(-1)
		})
		pauses := []time.Duration{0, 0, spinHelper / 2, spinHelper, 2 * spinHelper, time.Millisecond, 0}
		for call := range 300 {
			time.Sleep(pauses[call%len(pauses)])
			p.runSized(pieces, minParallelWork, run)
			if n := inside.Load(); n != 0 {
				t.Fatalf("workers=%d call %d: returned with %d pieces running", workers, call, n)
			}
			for i := range hits {
				if n := hits[i].Swap(0); n != 1 {
					t.Fatalf("workers=%d call %d: piece %d ran %d times", workers, call, i, n)
				}
			}
		}
	}
}

// A helper held up between finishing one call and signalling its caller
// (descheduled on a busy machine) must not end the next call early: the
// caller of that call has blocked, and the late signal is not for it.
func TestPoolLateSignal(t *testing.T) {
	var held atomic.Int32
	p := startPool(2, func(at pausePoint) {
		if at == pauseBeforeSignal && held.Add(1)%2 == 1 {
			time.Sleep(3 * spinCaller)
		}
	})
	const pieces = 8
	var hits [pieces]atomic.Int32
	var inside atomic.Int32
	run := funcRunner(func(w, i int) {
		inside.Add(1)
		if w != 0 {
			time.Sleep(20 * time.Microsecond) // the helper's pieces end late
		}
		hits[i].Add(1)
		inside.Add(-1)
	})
	for call := range 200 {
		p.runSized(pieces, minParallelWork, run)
		if n := inside.Load(); n != 0 {
			t.Fatalf("call %d: returned with %d pieces running", call, n)
		}
		for i := range hits {
			if n := hits[i].Swap(0); n != 1 {
				t.Fatalf("call %d: piece %d ran %d times", call, i, n)
			}
		}
	}
}

// A caller that sees a helper parked, then is held up while that helper
// notices the call on its own, runs it and parks again, must not wake it:
// the wake would make the helper run the same call twice (counted twice,
// so a later call's caller waited forever: a hang seen under -race).
func TestPoolWakeIsForOneCall(t *testing.T) {
	atWake, reparked := make(chan struct{}), make(chan struct{})
	var parks atomic.Int32
	p := startPool(2, func(at pausePoint) {
		switch at {
		case pauseAfterPark:
			switch parks.Add(1) {
			case 1: // parked before the first call: let the caller see it
				<-atWake
			case 2: // parked again after running it
				close(reparked)
			}
		case pauseBeforeWake:
			atWake <- struct{}{}
			<-reparked
		}
	})
	time.Sleep(3 * spinHelper) // the helper parks
	var hits atomic.Int32
	run := funcRunner(func(w, i int) { hits.Add(1) })
	done := make(chan struct{})
	go func() {
		p.runSized(4, minParallelWork, run)
		time.Sleep(3 * spinHelper) // a second run of the call would show now
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not end")
	}
	if n, g := p.pending.Load(), p.gen.Load(); n != 0 || g != 1 || hits.Load() != 4 {
		t.Fatalf("after one call: pending %d (want 0), generation %d, %d of 4 pieces run", n, g, hits.Load())
	}
}
