package engine

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestChunkingKeepsGreedyIDs: time-bounded steps make chunk sizes depend on
// timing, so greedy ids must not depend on how a prompt is chunked.
func TestChunkingKeepsGreedyIDs(t *testing.T) {
	m := tinyModel(t, 32, 2)
	p := prompt(60, 300, m.Vocab)
	// Token budgets only (no step bound): the reference is one chunk, and
	// each subtest's chunks are exactly its budget.
	want := run(t, newEngine(t, m, func(o *Options) { o.MaxStepMs = 0 }), greedy(p, 30)).ids
	for _, solo := range []int{7, 16, 100} {
		t.Run(fmt.Sprintf("solo=%d", solo), func(t *testing.T) {
			got := run(t, newEngine(t, m, func(o *Options) { o.PrefillSolo, o.MaxStepMs = solo, 0 }), greedy(p, 30)).ids
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("chunks of %d changed greedy ids (-one chunk +chunked):\n%s", solo, d)
			}
		})
	}
	// Timed steps: chunks sized by the clock.
	got := run(t, newEngine(t, m, func(o *Options) { o.MaxStepMs = 1 }), greedy(p, 30)).ids
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("timed chunks changed greedy ids:\n%s", d)
	}
}
