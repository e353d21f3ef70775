package engine

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// prefillOf sums the prefill tokens the trace gives request id.
func prefillOf(steps []StepTrace, id int64) int {
	n := 0
	for _, s := range steps {
		for _, c := range s.Prefill {
			if c.Req == id {
				n += c.Tokens
			}
		}
	}
	return n
}

// TestExactRepeatComputesOneToken: the last, partial block is cached too, so
// an exact repeat copies it and computes only its last token (for the
// logits), with the same greedy ids.
func TestExactRepeatComputesOneToken(t *testing.T) {
	m := tinyModel(t, 32, 2)
	log := &stepLog{}
	e := newEngine(t, m, func(o *Options) { o.OnStep = log.add })
	p := prompt(70, 100, m.Vocab) // 6 full blocks and 4 tokens
	first := run(t, e, greedy(p, 12))
	waitIdle(t, e)
	log.reset()
	again := run(t, e, greedy(p, 12))
	if d := cmp.Diff(first.ids, again.ids); d != "" {
		t.Fatalf("repeat changed greedy ids:\n%s", d)
	}
	if got := prefillOf(log.all(), 2); got != 1 {
		t.Fatalf("exact repeat computed %d prefill tokens, want 1", got)
	}
	u := again.finish.Usage
	if u.ReusedTokens != 99 || u.CachedTokens != 96 {
		t.Fatalf("repeat usage %+v: want 99 reused, 96 in full blocks", u)
	}
	// The next turn extends the first answer: the tail it reuses holds the
	// answer's tokens too, and the ids match a cold engine's.
	turn := append(append(append([]int(nil), p...), first.ids...), prompt(71, 9, m.Vocab)[1:]...)
	log.reset()
	next := run(t, e, greedy(turn, 6))
	if u := next.finish.Usage; u.ReusedTokens < len(p)+len(first.ids)-1 {
		t.Fatalf("next turn reused %d tokens, want ≥ %d", u.ReusedTokens, len(p)+len(first.ids)-1)
	}
	cold := run(t, newEngine(t, m, nil), greedy(turn, 6))
	if d := cmp.Diff(cold.ids, next.ids); d != "" {
		t.Fatalf("turn over a copied tail changed greedy ids:\n%s", d)
	}
	// Two repeats at once each copy the tail: neither writes the cached one.
	a, _ := e.Submit(context.Background(), greedy(p, 12))
	b, _ := e.Submit(context.Background(), greedy(p, 12))
	ra, rb := collect(a), collect(b)
	if !cmp.Equal(ra.ids, first.ids) || !cmp.Equal(rb.ids, first.ids) {
		t.Fatalf("concurrent repeats: %v, %v, want %v", ra.ids, rb.ids, first.ids)
	}
	waitIdle(t, e)
}
