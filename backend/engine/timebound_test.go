//go:build !race

package engine

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestShortBehindLongBoundedInTime: a 20-token request that arrives a
// twentieth of the way into a long cold prefill gets its first token within
// a tenth of the long one's cold TTFT, because steps are bounded in time
// (MaxStepMs) and shortest-remaining-first admits it at the next step.
// Both TTFTs are measured side by side in one run, best of three; the test is skipped
// under the race detector, which slows the model tenfold.
func TestShortBehindLongBoundedInTime(t *testing.T) {
	m := tinyModel(t, 256, 8)
	long := prompt(50, 4000, m.Vocab)
	ttft := func(e *Engine, r Request, at time.Time) (time.Duration, <-chan Event) {
		ch, err := e.Submit(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		ev := <-ch
		return ev.Time.Sub(at), ch
	}
	// Cold: the long prompt alone, on a fresh engine.
	cold := newEngine(t, m, func(o *Options) { o.MaxStepMs, o.KVBlocks = 25, 1024 })
	t0 := time.Now()
	coldTTFT, ch := ttft(cold, greedy(long, 1), t0)
	collect(ch)
	cold.Close()

	// Best of three: one step that a loaded machine stretches (the first
	// step of a fresh engine once took 222 ms of a 25 ms bound) must not
	// decide it.
	best := 1.0
	for try := range 3 {
		log := &stepLog{}
		e := newEngine(t, m, func(o *Options) { o.MaxStepMs, o.KVBlocks, o.OnStep = 25, 1024, log.add })
		lch, err := e.Submit(context.Background(), greedy(prompt(51+uint64(try)*10, 4000, m.Vocab), 1))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(coldTTFT / 20)
		shortTTFT, sch := ttft(e, greedy(prompt(52+uint64(try)*10, 20, m.Vocab), 4), time.Now())
		collect(sch)
		collect(lch)
		e.Close()
		ratio := shortTTFT.Seconds() / coldTTFT.Seconds()
		t.Logf("long cold TTFT %v, short TTFT %v behind it: ratio %.3f (%d steps)", coldTTFT, shortTTFT, ratio, len(log.all()))
		if best = min(best, ratio); best <= 0.10 {
			return
		}
	}
	t.Fatalf("short/long-cold TTFT = %.3f at best of three, want ≤ 0.10", best)
}

// TestExactRepeatTTFTIsADecodeStep: an exact repeat of a long prompt gets
// its first token in about one decode step (its cached partial block is
// copied, one token is computed), measured against its own decode steps.
func TestExactRepeatTTFTIsADecodeStep(t *testing.T) {
	m := tinyModel(t, 256, 8)
	e := newEngine(t, m, func(o *Options) { o.MaxStepMs, o.KVBlocks = 200, 1024 })
	p := prompt(53, 2007, m.Vocab)
	run(t, e, greedy(p, 1))
	waitIdle(t, e)
	// Best of three repeats: a decode step here is a few milliseconds, so
	// one scheduling hiccup of a shared machine can be several steps.
	best := -1.0
	for range 3 {
		t0 := time.Now()
		ch, err := e.Submit(context.Background(), greedy(p, 9))
		if err != nil {
			t.Fatal(err)
		}
		var times []time.Time
		for ev := range ch {
			if ev.Finish == "" {
				times = append(times, ev.Time)
			}
		}
		ttft := times[0].Sub(t0)
		var gaps []time.Duration
		for i := 1; i < len(times); i++ {
			gaps = append(gaps, times[i].Sub(times[i-1]))
		}
		slices.Sort(gaps)
		step := gaps[len(gaps)/2]
		ratio := ttft.Seconds() / step.Seconds()
		t.Logf("exact repeat TTFT %v, median decode step %v: ratio %.2f", ttft, step, ratio)
		if best < 0 || ratio < best {
			best = ratio
		}
		waitIdle(t, e)
	}
	if best > 2 {
		t.Fatalf("exact repeat TTFT = %.2f decode steps at best of three, want ≤ 2", best)
	}
}
