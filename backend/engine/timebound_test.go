//go:build !race

package engine

import (
	"context"
	"testing"
	"time"
)

// TestShortBehindLongBoundedInTime: a 20-token request that arrives a
// twentieth of the way into a long cold prefill gets its first token within
// a tenth of the long one's cold TTFT, because steps are bounded in time
// (MaxStepMs) and shortest-remaining-first admits it at the next step.
// Both TTFTs are measured side by side in one run; the test is skipped
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
	cold := newEngine(t, m, Options{MaxStepMs: 100, KVBlocks: 1024})
	t0 := time.Now()
	coldTTFT, ch := ttft(cold, greedy(long, 1), t0)
	collect(ch)
	cold.Close()

	log := &stepLog{}
	e := newEngine(t, m, Options{MaxStepMs: 100, KVBlocks: 1024, OnStep: log.add})
	lch, err := e.Submit(context.Background(), greedy(prompt(51, 4000, m.Vocab), 1))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(coldTTFT / 20)
	shortTTFT, sch := ttft(e, greedy(prompt(52, 20, m.Vocab), 4), time.Now())
	collect(sch)
	collect(lch)
	ratio := shortTTFT.Seconds() / coldTTFT.Seconds()
	t.Logf("long cold TTFT %v, short TTFT %v behind it: ratio %.3f (%d steps)", coldTTFT, shortTTFT, ratio, len(log.all()))
	if ratio > 0.10 {
		t.Fatalf("short/long-cold TTFT = %.3f, want ≤ 0.10", ratio)
	}
}
