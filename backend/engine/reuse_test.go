package engine

import (
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDivergenceNamesChangedToken: a system prompt changed at one token
// reuses the blocks before it, and the usage and the trace name the first
// changed position with both token ids and texts; a prefix that was committed but is
// no longer cached is reported as evicted.
func TestDivergenceNamesChangedToken(t *testing.T) {
	m := tinyModel(t, 16, 1)
	log := &stepLog{}
	e := newEngine(t, m, func(o *Options) { o.OnStep, o.KVBlocks = log.add, 64 })
	system := prompt(90, 120, m.Vocab)
	user := prompt(91, 30, m.Vocab)[1:]
	first := append(append([]int(nil), system...), user...)
	if r := run(t, e, greedy(first, 2)); r.finish.Usage.Divergence != nil {
		t.Fatalf("cold request reports a divergence: %+v", r.finish.Usage.Divergence)
	}
	changed := append([]int(nil), first...)
	changed[70] = 3 + (changed[70]-2)%(m.Vocab-3)
	log.reset()
	r := run(t, e, greedy(changed, 2))
	want := &Divergence{Reason: "changed", Position: 70, Token: changed[70], Was: first[70],
		Text: string(m.Tok.AppendPiece(nil, changed[70], true)), WasText: string(m.Tok.AppendPiece(nil, first[70], true))}
	if want.Text == "" || want.Text == want.WasText {
		t.Fatalf("the synthetic vocabulary spells tokens %d and %d %q and %q", want.Token, want.Was, want.Text, want.WasText)
	}
	if d := cmp.Diff(want, r.finish.Usage.Divergence); d != "" {
		t.Fatalf("divergence (-want +got):\n%s", d)
	}
	if r.finish.Usage.CachedTokens != 64 {
		t.Fatalf("reused %d tokens before the change, want 64", r.finish.Usage.CachedTokens)
	}
	var traced []Divergence
	for _, s := range log.all() {
		traced = append(traced, s.Diverged...)
	}
	want.Req = 2
	if d := cmp.Diff([]Divergence{*want}, traced); d != "" {
		t.Fatalf("traced divergence (-want +got):\n%s", d)
	}
	// Evicted: other prompts fill the 64 blocks, then the first comes back.
	for i := 0; i < 8; i++ {
		run(t, e, greedy(prompt(uint64(100+i), 150, m.Vocab), 1))
	}
	r = run(t, e, greedy(first, 2))
	if u := r.finish.Usage; u.Divergence == nil || u.Divergence.Reason != "evicted" || u.Divergence.Position != u.CachedTokens {
		t.Fatalf("after eviction: usage %+v, divergence %+v", u, u.Divergence)
	}
	waitIdle(t, e)
}

// TestReuseBoundIsBounded: the reuse bound remembers what the pool caches
// plus a fixed multiple of its blocks, however many requests pass.
func TestReuseBoundIsBounded(t *testing.T) {
	m := tinyModel(t, 16, 1)
	e := newEngine(t, m, func(o *Options) { o.KVBlocks = 32 })
	const requests, workers = 10000, 4
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < requests; i += workers {
				run(t, e, greedy(prompt(uint64(5000+i), 40, m.Vocab), 1))
			}
		}(w)
	}
	wg.Wait()
	e.Close() // the loop has stopped: its maps can be read
	hashes, children := e.cache.ever.size()
	if limit := reuseMemory * 32; hashes > limit || children > limit {
		t.Fatalf("after %d requests the reuse bound holds %d hashes and %d children, want ≤ %d", requests, hashes, children, limit)
	}
}
