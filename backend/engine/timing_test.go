package engine

import (
	"context"
	"math"
	"testing"
	"time"
)

// TestTimingSumsToWallTime: the queued, prefill, decode and preempted times
// of each request add up to its wall time (from before Submit to the
// finish event) within 5%, under enough pressure that requests queue and are preempted.
func TestTimingSumsToWallTime(t *testing.T) {
	// A model large enough that a request takes a good part of a second:
	// at tens of milliseconds, 5 % is one late wake-up of a loaded machine.
	m := tinyModel(t, 256, 4)
	e := newEngine(t, m, func(o *Options) { o.KVBlocks, o.MaxSeqs = 60, 3 })
	type out struct {
		wall time.Duration
		u    Usage
	}
	results := make(chan out, 5)
	for i := 0; i < 5; i++ {
		t0 := time.Now()
		ch, err := e.Submit(context.Background(), greedy(prompt(uint64(30+i), 100, m.Vocab), 300))
		if err != nil {
			t.Fatal(err)
		}
		// Up to the finish event's time: a loaded machine may take
		// milliseconds more to wake the reader, which is not the engine's.
		go func() {
			r := collect(ch)
			results <- out{r.finish.Time.Sub(t0), r.finish.Usage}
		}()
	}
	var queued, preempted, computed, reused int
	for i := 0; i < 5; i++ {
		r := <-results
		tm := r.u.Timing
		sum := tm.QueuedSec + tm.PrefillSec + tm.DecodeSec + tm.PreemptedSec
		if math.Abs(sum-r.wall.Seconds()) > 0.05*r.wall.Seconds() {
			t.Fatalf("timing %+v sums to %.4fs, wall %.4fs", tm, sum, r.wall.Seconds())
		}
		t.Logf("timing sums to %.4fs, wall %.4fs", sum, r.wall.Seconds())
		if tm.PrefillSec <= 0 || tm.DecodeSec <= 0 {
			t.Fatalf("timing %+v: no prefill or decode time", tm)
		}
		if tm.QueuedSec > tm.PrefillSec {
			queued++
		}
		if r.u.Preemptions > 0 {
			if tm.PreemptedSec <= 0 {
				t.Fatalf("preempted %d times with no time lost: %+v", r.u.Preemptions, tm)
			}
			preempted++
		}
		computed += r.u.ComputedTokens
		reused += r.u.ReusedTokens
	}
	t.Logf("%d requests queued longer than they prefilled, %d preempted; %d tokens computed, %d reused", queued, preempted, computed, reused)
	if preempted == 0 {
		t.Fatal("no request was preempted: the test lost its pressure")
	}
	if computed < 5*100 {
		t.Fatalf("%d prefill tokens computed for five 100-token prompts", computed)
	}
	waitIdle(t, e)
}
