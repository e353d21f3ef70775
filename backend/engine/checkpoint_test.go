package engine

import (
	"context"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCheckpointsEvictWithBlocks: on qwen35 with a pool of 64 pages, a
// dozen prompts one after another: their state checkpoints take pages
// from the one pool and go in its LRU order, so the latest prompt's are
// kept and the earliest's are gone; every kept checkpoint's pages still
// hold it; the earliest prompt, asked again, recomputes what it lost and
// gives the same ids, and the latest resumes from its checkpoint.
func TestCheckpointsEvictWithBlocks(t *testing.T) {
	m := hybridModel(t, "qwen35")
	e := newEngine(t, m, func(o *Options) { o.KVBlocks, o.MaxStepMs = 64, 0 })
	var prompts [][]int
	var first []result
	for i := range 12 {
		prompts = append(prompts, prompt(uint64(300+i), 50, m.Vocab))
		first = append(first, run(t, e, greedy(prompts[i], 20)))
	}
	waitIdle(t, e)
	st := e.cache.states
	if st.size() == 0 || st.size()*st.pages > e.pool.Capacity() {
		t.Fatalf("%d checkpoints of %d pages kept in a pool of %d", st.size(), st.pages, e.pool.Capacity())
	}
	for key, ck := range st.byKey {
		for i, id := range ck.pages {
			if b := e.pool.blocks[id]; !b.hashed || b.hash != pageKey(key, stateGroup, i) || st.page[id] != ck {
				t.Fatalf("checkpoint of request %d at %d: page %d no longer holds it", ck.req, ck.pos, id)
			}
		}
	}
	if len(st.page) != st.size()*st.pages {
		t.Fatalf("%d pages indexed for %d checkpoints", len(st.page), st.size())
	}
	stored := e.Metrics().Snapshot().CheckpointsStored
	t.Logf("%d checkpoints stored, %d kept", stored, st.size())
	if int(stored) <= st.size() {
		t.Fatal("no checkpoint was evicted: the pool was not pressed")
	}
	// The last prompt was computed last: its blocks and checkpoints are
	// the most recently released.
	last := run(t, e, greedy(prompts[11], 20))
	if d := cmp.Diff(first[11].ids, last.ids); d != "" {
		t.Fatalf("the last prompt again (-first +again):\n%s", d)
	}
	if u := last.finish.Usage; u.ReusedTokens != 48 || u.Checkpoint == nil || u.Checkpoint.At != "prompt" {
		t.Fatalf("the last prompt again reused %d tokens from %+v, want 48 from its prompt's checkpoint", u.ReusedTokens, u.Checkpoint)
	}
	again := run(t, e, greedy(prompts[0], 20))
	if d := cmp.Diff(first[0].ids, again.ids); d != "" {
		t.Fatalf("the first prompt again (-first +again):\n%s", d)
	}
	if u := again.finish.Usage; u.ReusedTokens != 0 || u.Divergence == nil || u.Divergence.Reason != "evicted" {
		t.Fatalf("the first prompt again reused %d tokens (%+v), want none: evicted", u.ReusedTokens, u.Divergence)
	}
	waitIdle(t, e)
}

// TestStateSlotsFitMemory: a recurrent model whose states would not all
// fit gets state slots for half its memory, and runs at most that many
// sequences at once, each with its ids alone.
func TestStateSlotsFitMemory(t *testing.T) {
	m := hybridModel(t, "qwen35")
	state := int64(m.StateBytes())
	var prompts [][]int
	for i := range 8 {
		prompts = append(prompts, prompt(uint64(400+i), 30, m.Vocab))
	}
	want := hybridWant(t, m, prompts)
	var most atomic.Int64 // set by the engine's loop
	var e *Engine
	e = newEngine(t, m, func(o *Options) {
		o.KVBlocks, o.KVMemory, o.MaxStepMs = 0, 10*state, 0
		o.OnStep = func(StepTrace) { most.Store(max(most.Load(), int64(len(e.running)))) }
	})
	if e.mem.slots != 5 || e.opt.MaxSeqs != 64 {
		t.Fatalf("%d state slots for a memory of 10 states, MaxSeqs %d", e.mem.slots, e.opt.MaxSeqs)
	}
	var chans []<-chan Event
	for _, p := range prompts {
		ch, err := e.Submit(context.Background(), greedy(p, 8))
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	for i, ch := range chans {
		r := collect(ch)
		if d := cmp.Diff(want[i][:min(8, len(want[i]))], r.ids[:min(8, len(want[i]))]); d != "" {
			t.Fatalf("request %d (-alone +under the slot limit):\n%s", i, d)
		}
	}
	if n := most.Load(); n > 5 || n < 2 {
		t.Fatalf("%d sequences ran at once with 5 state slots", n)
	}
	waitIdle(t, e)
}

// TestCheckpointPlaces: on qwen35, where a prompt keeps checkpoints and
// where a later one resumes: the second of two prompts sharing a
// 100-token prefix stops its prefill at the end of the blocks they share
// (a branch point), so a third resumes there; a 400-token prompt
// prefilled 128 tokens a step keeps one at each chunk end (a quarter of
// it apart) and at its end, so a prompt sharing its first 300 tokens
// resumes after 256. Each gets Generate's ids.
func TestCheckpointPlaces(t *testing.T) {
	m := hybridModel(t, "qwen35")
	shared := prompt(500, 100, m.Vocab)
	long := prompt(501, 400, m.Vocab)
	ps := [][]int{
		append(slices.Clone(shared), prompt(502, 31, m.Vocab)[1:]...),
		append(slices.Clone(shared), prompt(503, 31, m.Vocab)[1:]...),
		append(slices.Clone(shared), prompt(504, 31, m.Vocab)[1:]...),
		long,
		append(slices.Clone(long[:300]), prompt(505, 21, m.Vocab)[1:]...),
	}
	want := hybridWant(t, m, ps)
	e := newEngine(t, m, func(o *Options) { o.PrefillSolo, o.MaxStepMs = 128, 0 })
	for i, tc := range []struct {
		at       string
		position int
	}{{"", 0}, {"", 0}, {"branch", 96}, {"", 0}, {"chunk", 256}} {
		r := run(t, e, greedy(ps[i], 8))
		if d := cmp.Diff(want[i][:min(8, len(want[i]))], r.ids[:min(8, len(want[i]))]); d != "" {
			t.Fatalf("prompt %d (-generate +engine):\n%s", i, d)
		}
		u := r.finish.Usage
		if got := u.Checkpoint; tc.at != "" && (got == nil || got.At != tc.at || got.Position != tc.position || u.ReusedTokens != tc.position) {
			t.Errorf("prompt %d resumed from %+v after %d tokens, want %s at %d", i, got, u.ReusedTokens, tc.at, tc.position)
		}
		t.Logf("prompt %d: %d tokens, resumed from %+v", i, len(ps[i]), u.Checkpoint)
	}
	var long4 []int
	for _, ck := range e.cache.states.byKey {
		if ck.req == 4 && ck.at != "decode" {
			long4 = append(long4, ck.pos)
		}
	}
	slices.Sort(long4)
	if d := cmp.Diff([]int{128, 256, 384, 400}, long4); d != "" {
		t.Errorf("the long prompt's checkpoints (-want +got):\n%s", d)
	}
	waitIdle(t, e)
}

// TestRecurrentBudgetsHoldABlock: a recurrent model's prefill goes a
// block at a time, so New refuses a prefill budget under a block (it
// would never prefill) and, with budgets of exactly a block, a prompt
// still gets Generate's ids.
func TestRecurrentBudgetsHoldABlock(t *testing.T) {
	m := hybridModel(t, "qwen35")
	o := DefaultOptions()
	o.Log, o.KVBlocks, o.PrefillMixed = io.Discard, 256, 8
	if e, err := New(m, o); err == nil || !strings.Contains(err.Error(), "PrefillMixed 8") {
		if e != nil {
			e.Close()
		}
		t.Fatalf("New took a prefill budget of 8 tokens with blocks of 16: %v", err)
	}
	p := prompt(11, 70, m.Vocab)
	want := hybridWant(t, m, [][]int{p})[0]
	e := newEngine(t, m, func(o *Options) { o.PrefillMixed, o.PrefillSolo, o.MaxStepMs = 16, 16, 0 })
	r := run(t, e, greedy(p, 8))
	if d := cmp.Diff(want[:8], r.ids); d != "" {
		t.Fatalf("a block a step (-generate +engine):\n%s", d)
	}
	waitIdle(t, e)
}

// TestLastCheckpointOutlivesItsTail: when a qwen35 request ends, its last
// checkpoint (its decode's, at 128 of 139 tokens) goes to the free queue
// after its partial block past it and before the eight blocks it needs,
// which go last, the first block at the tail: under pressure the cache
// drops what no prompt can resume into, then the checkpoint, and never
// keeps blocks that only a dropped checkpoint made useful.
func TestLastCheckpointOutlivesItsTail(t *testing.T) {
	m := hybridModel(t, "qwen35")
	e := newEngine(t, m, func(o *Options) { o.KVBlocks, o.MaxStepMs = 256, 0 })
	p := prompt(21, 100, m.Vocab)
	r := run(t, e, greedy(p, 40))
	waitIdle(t, e)
	s := &seq{tokens: append(slices.Clone(p), r.ids[:39]...)}
	e.cache.hashUpTo(s, 8)
	ck := e.cache.states.find(s.hashes[7])
	if ck == nil || ck.at != "decode" {
		t.Fatalf("no decode checkpoint at 128: %+v", ck)
	}
	var fromTail []BlockID
	for id := e.pool.lru.tail; id >= 0 && len(fromTail) < 8+len(ck.pages)+1; id = e.pool.blocks[id].prev {
		fromTail = append(fromTail, id)
	}
	var want []BlockID
	for b := range 8 {
		id, ok := e.pool.Lookup(pageKey(s.hashes[b], 0, 0))
		if !ok {
			t.Fatalf("block %d is not cached", b)
		}
		want = append(want, id)
	}
	want = append(want, ck.pages...) // released last page first: the first at the tail
	if d := cmp.Diff(want, fromTail[:len(want)]); d != "" {
		t.Fatalf("the free queue from its tail (-want +got):\n%s", d)
	}
	if b := e.pool.blocks[fromTail[len(want)]]; b.hashed {
		t.Fatal("before the checkpoint in the free queue: a cached page, not the request's partial block")
	}
}
