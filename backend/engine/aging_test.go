package engine

import (
	"context"
	"sync"
	"testing"
)

// TestLongPrefillNotStarved: shortest-remaining-first under a steady stream
// of short arrivals (two 20-token requests every step, more than the mixed
// budget of 32) leaves a long prefill no budget for as long as the stream
// lasts; aging gives it a share once it has waited, so it finishes while
// the shorts keep coming (counted in steps, not time).
func TestLongPrefillNotStarved(t *testing.T) {
	m := tinyModel(t, 16, 1)
	const streamSteps = 300
	var e *Engine
	var mu sync.Mutex
	var wg sync.WaitGroup
	n := 0
	onStep := func(s StepTrace) {
		if s.Step >= streamSteps {
			return
		}
		for i := 0; i < 2; i++ {
			mu.Lock()
			n++
			seed := uint64(1000 + n)
			mu.Unlock()
			ch, err := e.Submit(context.Background(), greedy(prompt(seed, 20, m.Vocab), 1))
			if err != nil {
				t.Error(err)
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); collect(ch) }()
		}
	}
	// Token budgets only (no step bound): the shares are counted in tokens.
	e = newEngine(t, m, func(o *Options) {
		o.PrefillSolo, o.PrefillMixed, o.KVBlocks, o.MaxWaiting, o.OnStep, o.MaxStepMs = 32, 32, 1024, 4096, onStep, 0
	})
	long := run(t, e, greedy(prompt(80, 400, m.Vocab), 1))
	t.Logf("long prefill done at step %d; the stream ran %d steps", long.finish.Step, streamSteps)
	if long.finish.Step >= streamSteps {
		t.Fatalf("long prefill finished at step %d, after the stream of shorts ended (step %d)", long.finish.Step, streamSteps)
	}
	wg.Wait()
}
