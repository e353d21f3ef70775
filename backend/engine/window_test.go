package engine

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"jspark/backend/model"
)

// gemmaGroups is gemma3's paged layout at one layer a group: a full
// attention group, then five sliding ones of window w.
func gemmaGroups(w int) []model.KVGroup {
	gs := []model.KVGroup{{Kind: model.FullAttention, Layers: []int{5}}}
	for l := range 5 {
		gs = append(gs, model.KVGroup{Kind: model.SlidingWindow, Window: w, Layers: []int{l}})
	}
	return gs
}

// TestSlidingMemoryAt32K: a sequence of gemma3's layout prefilled to 32K
// tokens in 2K chunks, then decoding, holds at every step at most its
// window plus a block of each sliding layer (1024 + 16 tokens: 65 pages
// of 16) besides every block of the full layer, as the pool counts them;
// the blocks it freed stay cached, so the same prompt resumes at its last
// block boundary; and it gives every page back.
func TestSlidingMemoryAt32K(t *testing.T) {
	const bs, w, n = 16, 1024, 32 << 10
	c := newKVCache(2*n/bs, bs, gemmaGroups(w), nil)
	s := &seq{slot: -1, tokens: prompt(7, n, 1000)}
	c.take(s)
	check := func(at string) {
		t.Helper()
		if got, most := c.pool.InUse(pageSliding), 5*(w+bs)/bs; got > most {
			t.Fatalf("%s: %d sliding pages in use, want at most %d", at, got, most)
		}
		if got, want := c.pool.InUse(pageFull), (s.computed+bs-1)/bs; got != want {
			t.Fatalf("%s: %d full pages in use, want %d", at, got, want)
		}
	}
	for s.computed < n-1 {
		chunk := min(2048, n-1-s.computed)
		if !c.grow(s, s.computed+chunk) {
			t.Fatalf("at %d: no room for a chunk of %d", s.computed, chunk)
		}
		s.computed += chunk
		c.commit(s, true)
		check("prefill")
	}
	for range 100 {
		s.tokens = append(s.tokens, 5)
		if !c.grow(s, s.computed+1) {
			t.Fatal("no room to decode")
		}
		s.computed++
		c.commit(s, false)
		check("decode")
	}
	t.Logf("at %d tokens: %d full and %d sliding pages in use", s.computed, c.pool.InUse(pageFull), c.pool.InUse(pageSliding))
	c.free(s)
	if c.pool.Free() != c.pool.Capacity() || c.pool.InUse(pageFull)+c.pool.InUse(pageSliding) != 0 {
		t.Fatalf("%d of %d pages free after the sequence", c.pool.Free(), c.pool.Capacity())
	}
	again := &seq{slot: -1, tokens: s.tokens[:n]}
	if hit, _, _, _, ck := c.take(again); hit != (n-1)/bs*bs || ck == nil || ck.Kind != "window" {
		t.Fatalf("the same prompt resumed at %d (%+v), want %d from its window", hit, ck, (n-1)/bs*bs)
	}
	c.free(again)
}

// TestSlidingMemoryEngine: gemma3 prefilling 3,000 tokens and decoding
// holds, after every step, at most the blocks of its window (20
// positions: 3 blocks) in each of its five sliding layers, and the same
// ids as Generate; a second request with the same prompt resumes from the
// cached blocks of its last window.
func TestSlidingMemoryEngine(t *testing.T) {
	m := hybridModel(t, "gemma3")
	p := prompt(3, 3000, m.Vocab)
	want := hybridWant(t, m, [][]int{p})[0]
	var most atomic.Int64 // set by the engine's loop
	var e *Engine
	e = newEngine(t, m, func(o *Options) {
		o.PrefillSolo, o.MaxStepMs = 512, 0
		o.OnStep = func(StepTrace) { most.Store(max(most.Load(), int64(e.pool.InUse(pageSliding)))) }
	})
	r := run(t, e, greedy(p, 40))
	if d := cmp.Diff(want, r.ids[:len(want)]); d != "" {
		t.Fatalf("(-generate +engine):\n%s", d)
	}
	if worst, bound := int(most.Load()), 5*windowBlocks(20, 16); worst > bound || worst == 0 {
		t.Fatalf("%d sliding pages in use after a step, want at most %d", worst, bound)
	}
	t.Logf("at most %d sliding pages in use", most.Load())
	ch, err := e.Submit(context.Background(), greedy(p, 40))
	if err != nil {
		t.Fatal(err)
	}
	again := collect(ch)
	if d := cmp.Diff(r.ids, again.ids); d != "" {
		t.Fatalf("from the cache (-first +again):\n%s", d)
	}
	if u := again.finish.Usage; u.ReusedTokens != (len(p)-1)/16*16 || u.Checkpoint == nil || u.Checkpoint.Kind != "window" {
		t.Fatalf("the same prompt again reused %d tokens (%+v)", u.ReusedTokens, u.Checkpoint)
	}
	waitIdle(t, e)
}

// TestCapacityByKind: /metrics says at start what each layer kind holds:
// gemma3's sliding layers a sequence's window of blocks (20 positions:
// 3 blocks of 16), qwen35's recurrent layers a state slot per running
// sequence, and neither the other's.
func TestCapacityByKind(t *testing.T) {
	for _, c := range []struct {
		arch          string
		window, slots float64
	}{{"gemma3", 48, 0}, {"qwen35", 0, 64}} {
		t.Run(c.arch, func(t *testing.T) {
			e := newEngine(t, hybridModel(t, c.arch), nil)
			got := gauges(t, e.Metrics().Registry)
			if got["jspark_kv_window_tokens"] != c.window || got["jspark_state_slots"] != c.slots {
				t.Fatalf("window %v tokens, %v state slots; want %v and %v", got["jspark_kv_window_tokens"], got["jspark_state_slots"], c.window, c.slots)
			}
			if got["jspark_kv_pages"] != float64(e.pool.Capacity()) || got["jspark_kv_capacity_tokens"] != float64(e.CapacityTokens()) {
				t.Fatalf("pages %v of %d, capacity %v of %d", got["jspark_kv_pages"], e.pool.Capacity(), got["jspark_kv_capacity_tokens"], e.CapacityTokens())
			}
		})
	}
}

// gauges is the value of each gauge of reg with one series, by name.
func gauges(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if ms := f.GetMetric(); f.GetType() == dto.MetricType_GAUGE && len(ms) == 1 {
			got[f.GetName()] = ms[0].GetGauge().GetValue()
		}
	}
	return got
}
