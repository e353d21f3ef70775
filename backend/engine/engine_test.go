package engine

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"jspark/backend/gguf"
	"jspark/backend/model"
	"jspark/backend/sample"
	"jspark/kernels/cpu"
	"jspark/kernels/quant"
)

// tinyModel is a random-weight llama small enough for long prompts.
func tinyModel(t testing.TB, dim, layers int) *model.Model {
	t.Helper()
	w, err := model.Synth(model.SynthOptions{Arch: "llama", Layers: layers, Dim: dim, Heads: 2, KVHeads: 1, FF: 2 * dim, Type: quant.F32, Seed: 11, Context: 1 << 17})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := w.Bytes()
	f, err := gguf.Parse("tiny.gguf", b)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(f, cpu.New(2))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func storiesModel(t testing.TB) *model.Model {
	t.Helper()
	m, _, err := model.Open("", cpu.New(2))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// newEngine starts an engine over m with DefaultOptions, quiet and with a
// cache of 2048 blocks, then set's changes (nil: none).
func newEngine(t testing.TB, m *model.Model, set func(*Options)) *Engine {
	t.Helper()
	opt := DefaultOptions()
	opt.Log, opt.KVBlocks = io.Discard, 2048
	if set != nil {
		set(&opt)
	}
	e, err := New(m, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

type result struct {
	ids     []int
	steps   []int64
	arrival int64
	finish  Event
}

func collect(ch <-chan Event) result {
	var r result
	for ev := range ch {
		if ev.Finish != "" {
			r.finish = ev
			continue
		}
		r.ids = append(r.ids, ev.Token)
		r.steps = append(r.steps, ev.Step)
		r.arrival = ev.Arrival
	}
	return r
}

func run(t testing.TB, e *Engine, r Request) result {
	t.Helper()
	ch, err := e.Submit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return collect(ch)
}

func prompt(seed uint64, n, vocab int) []int {
	r := rand.New(rand.NewPCG(seed, 1))
	p := []int{1}
	for len(p) < n {
		p = append(p, 3+r.IntN(vocab-3))
	}
	return p
}

func greedy(p []int, n int) Request {
	return Request{Prompt: p, MaxTokens: n, IgnoreEOS: true}
}

// waitIdle waits until every block is free again: no request holds any.
func waitIdle(t testing.TB, e *Engine) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		s := e.Metrics().Snapshot()
		if s.FreeBlocks == int64(e.pool.Capacity()) && s.Running == 0 && s.Waiting == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("blocks leaked: %+v of %d", e.Metrics().Snapshot(), e.pool.Capacity())
}

type stepLog struct {
	mu    sync.Mutex
	steps []StepTrace
}

func (l *stepLog) add(s StepTrace) { l.mu.Lock(); l.steps = append(l.steps, s); l.mu.Unlock() }
func (l *stepLog) reset()          { l.mu.Lock(); l.steps = nil; l.mu.Unlock() }
func (l *stepLog) all() []StepTrace {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]StepTrace(nil), l.steps...)
}

func TestBudgets(t *testing.T) {
	m := tinyModel(t, 16, 1)
	log := &stepLog{}
	// Token budgets only (no step bound): the test counts chunk tokens.
	e := newEngine(t, m, func(o *Options) { o.OnStep, o.KVBlocks, o.MaxStepMs = log.add, 4096, 0 })
	// Solo: one long prompt alone is prefilled 4096 tokens a step.
	solo := run(t, e, greedy(prompt(1, 9000, m.Vocab), 2))
	if solo.finish.Finish != FinishLength {
		t.Fatalf("solo finish %+v", solo.finish)
	}
	first := log.all()
	var chunks []int
	for _, s := range first {
		for _, c := range s.Prefill {
			chunks = append(chunks, c.Tokens)
		}
	}
	if d := cmp.Diff([]int{4096, 4096, 808}, chunks); d != "" {
		t.Fatalf("solo chunks (-want +got):\n%s", d)
	}
	// Mixed: a decoding stream plus two long prefills share 2048 a step.
	log.reset() // the engine may still be tracing the solo request's last step
	dec, _ := e.Submit(context.Background(), greedy(prompt(2, 20, m.Vocab), 60))
	time.Sleep(20 * time.Millisecond)
	a, _ := e.Submit(context.Background(), greedy(prompt(3, 5000, m.Vocab), 2))
	b, _ := e.Submit(context.Background(), greedy(prompt(4, 6000, m.Vocab), 2))
	collect(a)
	collect(b)
	collect(dec)
	twoPrefills := false
	for _, s := range log.all() {
		sum := 0
		for _, c := range s.Prefill {
			sum += c.Tokens
		}
		if len(s.Prefill) > 1 {
			twoPrefills = true
		}
		if (s.Decode > 0 || len(s.Prefill) > 1) && sum > 2048 {
			t.Fatalf("step %d: %d prefill tokens with %d decoding: %+v", s.Step, sum, s.Decode, s.Prefill)
		}
	}
	if !twoPrefills {
		t.Fatal("the two prefills never shared a step")
	}
}

func TestShortArrivalDuringLongPrefill(t *testing.T) {
	m := tinyModel(t, 16, 1)
	log := &stepLog{}
	// Small budgets make the long prefill 32+ chunks at a modest size.
	// Token budgets only (no step bound): the test counts chunk tokens.
	e := newEngine(t, m, func(o *Options) {
		o.OnStep, o.PrefillSolo, o.PrefillMixed, o.KVBlocks, o.MaxStepMs = log.add, 64, 32, 1024, 0
	})
	long, _ := e.Submit(context.Background(), greedy(prompt(5, 64*40, m.Vocab), 1))
	for len(log.all()) < 5 {
		time.Sleep(time.Millisecond)
	}
	short := run(t, e, greedy(prompt(6, 64, m.Vocab), 4))
	collect(long)
	if short.arrival < 5 {
		t.Fatalf("short request arrived at step %d, before the long prefill was under way", short.arrival)
	}
	if got := short.steps[0] - short.arrival; got > 3 {
		t.Fatalf("short request's first token came %d steps after its arrival", got)
	}
	chunks := 0
	for _, s := range log.all() {
		for _, c := range s.Prefill {
			if c.Req == 1 {
				chunks++
			}
		}
	}
	if chunks < 32 {
		t.Fatalf("long prefill took %d chunks, want ≥ 32", chunks)
	}
}

func TestIncumbentGetsATokenEveryStep(t *testing.T) {
	m := tinyModel(t, 16, 1)
	e := newEngine(t, m, func(o *Options) { o.PrefillMixed, o.KVBlocks = 256, 2048 })
	inc, _ := e.Submit(context.Background(), greedy(prompt(7, 10, m.Vocab), 80))
	ev := <-inc // decoding has begun
	start := ev.Step
	var others []<-chan Event
	for i := 0; i < 3; i++ {
		ch, _ := e.Submit(context.Background(), greedy(prompt(uint64(8+i), 3000, m.Vocab), 1))
		others = append(others, ch)
	}
	r := collect(inc)
	for _, o := range others {
		collect(o)
	}
	prev := start
	for _, s := range r.steps {
		if s != prev+1 {
			t.Fatalf("incumbent token at step %d after step %d: it skipped a step", s, prev)
		}
		prev = s
	}
}

func TestPrefixCache(t *testing.T) {
	m := storiesModel(t)
	e := newEngine(t, m, nil)
	p := m.Tok.Encode("Once upon a time, there was a little dog named Max. Max liked to run in the big green park with his friends.", true, false)
	cold := run(t, e, greedy(p, 20))
	warm := run(t, e, greedy(p, 20))
	if cold.finish.Usage.CachedTokens != 0 {
		t.Fatalf("cold run had %d cached tokens", cold.finish.Usage.CachedTokens)
	}
	if want := len(p) / 16 * 16; warm.finish.Usage.CachedTokens != want || warm.finish.Usage.CommittedTokens != want {
		t.Fatalf("repeat: cached %d committed %d, want %d", warm.finish.Usage.CachedTokens, warm.finish.Usage.CommittedTokens, want)
	}
	if d := cmp.Diff(cold.ids, warm.ids); d != "" {
		t.Fatalf("cached run changed greedy ids:\n%s", d)
	}
	// A changed suffix reuses the common prefix.
	q := append(append([]int(nil), p[:40]...), m.Tok.Encode(" The cat sat on a mat all day long.", false, false)...)
	changed := run(t, e, greedy(q, 5))
	if got := changed.finish.Usage.CachedTokens; got != 32 {
		t.Fatalf("changed suffix reused %d tokens, want 32", got)
	}
	// The next turn reuses the previous prompt plus its answer.
	turn2 := append(append(append([]int(nil), p...), cold.ids...), m.Tok.Encode(" Then they went home.", false, false)...)
	next := run(t, e, greedy(turn2, 5))
	if want := (len(p) + len(cold.ids) - 1) / 16 * 16; next.finish.Usage.CachedTokens < want {
		t.Fatalf("second turn reused %d tokens, want ≥ %d", next.finish.Usage.CachedTokens, want)
	}
	// A full-block prompt repeated exactly still gets its logits.
	exact := p[:32]
	a, b := run(t, e, greedy(exact, 8)), run(t, e, greedy(exact, 8))
	if !cmp.Equal(a.ids, b.ids) || b.finish.Usage.CachedTokens != 32 {
		t.Fatalf("exact-block repeat: %v vs %v, cached %d", a.ids, b.ids, b.finish.Usage.CachedTokens)
	}
	waitIdle(t, e)
}

func TestDeterminism(t *testing.T) {
	m := storiesModel(t)
	prompts := []string{"Once upon a time", "Lily wanted to", "The little dog", "Sara and Ben", "The sun was", "Mom"}
	want := map[string][]int{}
	for _, p := range prompts {
		ids := m.Tok.Encode(p, true, false)
		g, err := m.Generate(ids, 40, sample.New(sample.Params{}), nil)
		if err != nil {
			t.Fatal(err)
		}
		want[p] = g.IDs
	}
	for _, spec := range []int{0, 4} {
		t.Run(fmt.Sprintf("speculate=%d", spec), func(t *testing.T) {
			e := newEngine(t, m, func(o *Options) { o.Speculate = spec })
			// Alone, then all six at once (batch of 6), then again (cached).
			for _, p := range prompts {
				r := run(t, e, Request{Prompt: m.Tok.Encode(p, true, false), MaxTokens: 40})
				if d := cmp.Diff(want[p], r.ids[:len(want[p])]); d != "" {
					t.Fatalf("%q alone (-generate +engine):\n%s", p, d)
				}
			}
			for round := 0; round < 2; round++ {
				chans := map[string]<-chan Event{}
				for _, p := range prompts {
					chans[p], _ = e.Submit(context.Background(), Request{Prompt: m.Tok.Encode(p, true, false), MaxTokens: 40})
				}
				for p, ch := range chans {
					r := collect(ch)
					if d := cmp.Diff(want[p], r.ids[:len(want[p])]); d != "" {
						t.Fatalf("round %d %q in a batch of 6 (-generate +engine):\n%s", round, p, d)
					}
				}
			}
			if s := e.Metrics().Snapshot(); spec > 0 && s.AcceptedDrafts == 0 {
				t.Fatalf("speculation accepted nothing: %+v", s)
			}
			waitIdle(t, e)
		})
	}
}

func TestPreemption(t *testing.T) {
	m := tinyModel(t, 32, 2)
	alone := newEngine(t, m, nil)
	var want [][]int
	var reqs []Request
	for i := 0; i < 4; i++ {
		r := greedy(prompt(uint64(20+i), 100, m.Vocab), 100)
		reqs = append(reqs, r)
		want = append(want, run(t, alone, r).ids)
	}
	// 40 blocks of 16 = 640 tokens; the four need 800 at the end.
	e := newEngine(t, m, func(o *Options) { o.KVBlocks = 40 })
	var chans []<-chan Event
	for _, r := range reqs {
		ch, err := e.Submit(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	preempted := 0
	for i, ch := range chans {
		r := collect(ch)
		if d := cmp.Diff(want[i], r.ids); d != "" {
			t.Fatalf("request %d under preemption (-alone +pressed):\n%s", i, d)
		}
		preempted += r.finish.Usage.Preemptions
	}
	if s := e.Metrics().Snapshot(); s.Preemptions == 0 || int(s.Preemptions) != preempted {
		t.Fatalf("preemptions: counter %d, usage sum %d", s.Preemptions, preempted)
	}
	waitIdle(t, e)
}

func TestEvictionKeepsResultsCorrect(t *testing.T) {
	m := tinyModel(t, 32, 2)
	ref := newEngine(t, m, nil)
	e := newEngine(t, m, func(o *Options) { o.KVBlocks = 24 }) // room for one request at a time, little cache
	for i := 0; i < 12; i++ {
		p := prompt(uint64(40+i%4), 200, m.Vocab) // prompts repeat: hits, then evictions
		got, want := run(t, e, greedy(p, 30)), run(t, ref, greedy(p, 30))
		if !cmp.Equal(got.ids, want.ids) {
			t.Fatalf("request %d differs under eviction", i)
		}
	}
	if e.pool.CachedBlocks() > e.pool.Capacity() {
		t.Fatal("more cached blocks than blocks")
	}
	waitIdle(t, e)
}

func TestConcurrentCancelNoLeak(t *testing.T) {
	m := tinyModel(t, 32, 1)
	e := newEngine(t, m, func(o *Options) { o.KVBlocks, o.Speculate = 200, 2 })
	var wg sync.WaitGroup
	for c := 0; c < 8; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(c), 9))
			for i := 0; i < 6; i++ {
				ctx, cancel := context.WithCancel(context.Background())
				p := prompt(uint64(r.IntN(5)), 50+r.IntN(300), m.Vocab)
				ch, err := e.Submit(ctx, greedy(p, 20+r.IntN(40)))
				if err != nil {
					cancel()
					t.Error(err)
					return
				}
				stopAfter := r.IntN(30)
				n := 0
				for ev := range ch {
					n++
					if n == stopAfter {
						cancel()
					}
					_ = ev
				}
				cancel()
			}
		}(c)
	}
	wg.Wait()
	waitIdle(t, e)
}

func TestSubmitErrors(t *testing.T) {
	m := tinyModel(t, 16, 1)
	e := newEngine(t, m, func(o *Options) { o.MaxContext, o.KVBlocks = 100, 4 })
	if _, err := e.Submit(context.Background(), Request{Prompt: prompt(1, 90, m.Vocab), MaxTokens: 20}); err == nil ||
		err.Error() != "engine: prompt of 90 tokens plus max_tokens 20 exceeds the context of 100 tokens" {
		t.Fatalf("context error: %v", err)
	}
	if _, err := e.Submit(context.Background(), Request{Prompt: prompt(1, 80, m.Vocab), MaxTokens: 1}); err == nil {
		t.Fatal("a prompt larger than the KV cache was accepted")
	}
	if _, err := e.Submit(context.Background(), Request{Prompt: []int{1, 99999}}); err == nil {
		t.Fatal("an out-of-vocabulary id was accepted")
	}
	// A sequence that outgrows the whole cache ends with length, not a hang.
	r := run(t, e, greedy(prompt(2, 30, m.Vocab), 60))
	if r.finish.Finish != FinishLength || len(r.ids) != 64-30+1 { // the last token needs no slot of its own
		t.Fatalf("outgrown sequence: %d tokens, finish %v", len(r.ids), r.finish.Finish)
	}
	waitIdle(t, e)
}

func BenchmarkTTFT(b *testing.B) {
	m := tinyModel(b, 256, 4)
	for _, n := range []int{1024, 4096} {
		p := prompt(99, n, m.Vocab)
		b.Run(fmt.Sprintf("cold/%d", n), func(b *testing.B) {
			for b.Loop() {
				e := newEngine(b, m, func(o *Options) { o.KVBlocks = 1024 })
				run(b, e, greedy(p, 1))
				e.Close()
			}
		})
		b.Run(fmt.Sprintf("repeat/%d", n), func(b *testing.B) {
			e := newEngine(b, m, func(o *Options) { o.KVBlocks = 1024 })
			run(b, e, greedy(p, 1))
			for b.Loop() {
				run(b, e, greedy(p, 1))
			}
		})
	}
}

func BenchmarkConcurrency(b *testing.B) {
	m := tinyModel(b, 256, 4)
	for c := 1; c <= 6; c++ {
		b.Run(fmt.Sprintf("C%d", c), func(b *testing.B) {
			e := newEngine(b, m, func(o *Options) { o.KVBlocks = 2048 })
			tokens := 0
			for b.Loop() {
				var wg sync.WaitGroup
				for i := 0; i < c; i++ {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						run(b, e, greedy(prompt(uint64(i), 200, m.Vocab), 64))
					}(i)
				}
				wg.Wait()
				tokens += 64 * c
			}
			b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}
