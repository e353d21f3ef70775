package engine

import (
	"context"
	"fmt"
	"math"
	"sort"
	"testing"

	"jspark/backend/model"
	"jspark/backend/sample"
)

// refPrompt is a prompt token's reference entry: its rank may be any in
// [Rank, rankHi] where other tokens' values are within rounding of its
// own (a batch of another shape rounds differently), and lp is the whole
// distribution there.
type refPrompt struct {
	PromptLogprob
	rankHi int
	lp     []float64
}

// tol is how far a log-probability may move with the batch's shape.
const tol = 1e-4

func near(a, b float64) bool { return math.Abs(a-b) <= tol*(1+math.Abs(b)) }

// referencePrompt is what a request's prompt log-probabilities must be,
// computed from the model directly: one forward pass over the whole prompt
// with every position's logits, log-softmax in float64, the next token's
// value and rank, and the top alternatives by a full sort.
func referencePrompt(t *testing.T, m *model.Model, p []int, top int) []refPrompt {
	t.Helper()
	pool := model.NewPool(m.Config, (len(p)+15)/16, 16)
	defer pool.Free()
	table := pool.Contiguous()
	b := &model.Batch{}
	for i, id := range p {
		b.Tokens, b.Pos, b.Table, b.Logits = append(b.Tokens, id), append(b.Pos, i), append(b.Table, table), append(b.Logits, i)
	}
	logits, err := m.Forward(b, pool)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]refPrompt, len(p))
	for i := 1; i < len(p); i++ {
		lp := sample.LogSoftmax(logits[(i-1)*m.Vocab : i*m.Vocab])
		idx := make([]int, len(lp))
		for j := range idx {
			idx[j] = j
		}
		sort.SliceStable(idx, func(a, b int) bool { return lp[idx[a]] > lp[idx[b]] })
		x := lp[p[i]]
		e := refPrompt{PromptLogprob: PromptLogprob{Logprob: float32(x), Rank: 1}, rankHi: 1, lp: lp}
		for j, v := range lp {
			if v > x && !near(v, x) {
				e.Rank++
			}
			if j != p[i] && (v > x || near(v, x)) {
				e.rankHi++
			}
		}
		for _, j := range idx[:top] {
			e.Top = append(e.Top, TokenProb{Token: j, Logprob: float32(lp[j])})
		}
		out[i] = e
	}
	return out
}

// samePrompt compares prompt log-probabilities within rounding: values
// near, ranks within the tie interval, and each alternative the one the
// reference has there or one tied with it.
func samePrompt(t *testing.T, got []PromptLogprob, want []refPrompt) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d (one per prompt token)", len(got), len(want))
	}
	if got[0].Logprob != 0 || got[0].Top != nil {
		t.Errorf("the first token has no log-probability: %+v", got[0])
	}
	for i := 1; i < len(want); i++ {
		g, w := got[i], want[i]
		if !near(float64(g.Logprob), float64(w.Logprob)) || g.Rank < w.Rank || g.Rank > w.rankHi || len(g.Top) != len(w.Top) {
			t.Fatalf("token %d: %+v, want %+v (rank up to %d)", i, g, w.PromptLogprob, w.rankHi)
		}
		for j, a := range w.Top {
			b := g.Top[j]
			if !near(float64(b.Logprob), float64(a.Logprob)) || !near(w.lp[b.Token], float64(a.Logprob)) {
				t.Fatalf("token %d, alternative %d: %+v, want %+v", i, j, b, a)
			}
		}
	}
}

// promptOf runs r and returns the prompt log-probabilities its events
// carried (nil when none did), how many events carried them, and its
// finish.
func promptOf(t *testing.T, e *Engine, r Request) ([]PromptLogprob, int, Event) {
	t.Helper()
	ch, err := e.Submit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	var got []PromptLogprob
	carried := 0
	var fin Event
	for ev := range ch {
		if ev.Prompt != nil {
			got, carried = ev.Prompt, carried+1
		}
		if ev.Finish != "" {
			fin = ev
		}
	}
	return got, carried, fin
}

// TestPromptLogprobsAreTheModels: a request that asks for its prompt's
// log-probabilities gets the model's, position for position, once, on its
// first token; whether its prompt went in one chunk or in many (the step
// bound, the row budget), beside another request, or after an earlier
// request cached the same prompt (it takes nothing from the cache: every
// position is computed). A request that does not ask gets none.
func TestPromptLogprobsAreTheModels(t *testing.T) {
	m := storiesModel(t)
	p := prompt(5, 70, m.Vocab)
	want := referencePrompt(t, m, p, 3)
	ask := Request{Prompt: p, MaxTokens: 2, IgnoreEOS: true, PromptLogprobs: true, PromptTop: 3}
	for _, c := range []struct {
		name string
		set  func(*Options)
		pre  func(e *Engine) // before the request
	}{
		{"one chunk", nil, nil},
		{"chunks of 16", func(o *Options) { o.PrefillSolo, o.PrefillMixed, o.MaxStepMs = 16, 16, 0 }, nil},
		{"cached before", nil, func(e *Engine) { run(t, e, greedy(p, 2)) }},
		{"beside another", func(o *Options) { o.PrefillMixed, o.MaxStepMs = 24, 0 }, func(e *Engine) {
			ch, err := e.Submit(context.Background(), greedy(prompt(9, 40, m.Vocab), 40))
			if err != nil {
				t.Fatal(err)
			}
			go collect(ch)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEngine(t, m, c.set)
			if c.pre != nil {
				c.pre(e)
			}
			got, carried, fin := promptOf(t, e, ask)
			if carried != 1 || fin.Finish != FinishLength || fin.Usage.CachedTokens != 0 || fin.Usage.ComputedTokens != len(p) {
				t.Errorf("carried %d times; finish %s, cached %d, computed %d of %d", carried, fin.Finish, fin.Usage.CachedTokens, fin.Usage.ComputedTokens, len(p))
			}
			samePrompt(t, got, want)
			if got, carried, _ := promptOf(t, e, greedy(p, 2)); got != nil || carried != 0 {
				t.Errorf("a request that did not ask got %d entries", len(got))
			}
		})
	}
}

// TestPromptChunkFitsTheRowBudget: a request that wants its prompt's rows
// takes chunks of at most promptChunk tokens, at least a block.
func TestPromptChunkFitsTheRowBudget(t *testing.T) {
	m := storiesModel(t)
	e := newEngine(t, m, nil)
	if n := e.promptChunk(); n != promptRowBytes/(4*m.Vocab) || n < e.opt.BlockSize {
		t.Errorf("prompt chunk %d for a vocabulary of %d", n, m.Vocab)
	}
	big := &Engine{opt: Options{BlockSize: 16}, m: &model.Model{Config: model.Config{Vocab: 1 << 24}}}
	if n := big.promptChunk(); n != 16 {
		t.Errorf("a vocabulary of 2^24: chunks of %d, want a block (16)", n)
	}
}

// TestPromptLogprobsOnHybridModels: a sliding-window model (gemma3) and a
// recurrent one (qwen35) give the model's prompt log-probabilities too,
// in one chunk and in chunks of 16 (a recurrent layer's state carried
// between them).
func TestPromptLogprobsOnHybridModels(t *testing.T) {
	for _, arch := range []string{"gemma3", "qwen35"} {
		m := hybridModel(t, arch)
		p := prompt(7, 70, m.Vocab)
		want := referencePrompt(t, m, p, 2)
		for _, c := range []struct {
			name string
			set  func(*Options)
		}{
			{"one chunk", nil},
			{"chunks of 16", func(o *Options) { o.PrefillSolo, o.PrefillMixed, o.MaxStepMs = 16, 16, 0 }},
		} {
			t.Run(arch+"/"+c.name, func(t *testing.T) {
				e := newEngine(t, m, c.set)
				got, carried, _ := promptOf(t, e, Request{Prompt: p, MaxTokens: 1, IgnoreEOS: true, PromptLogprobs: true, PromptTop: 2})
				if carried != 1 {
					t.Fatalf("carried %d times", carried)
				}
				samePrompt(t, got, want)
			})
		}
	}
}

// BenchmarkPromptLogprobs: a 512-token prompt scored (every position's
// row read) against the same prompt not asked for, each with a cold cache
// (the scored one takes nothing from it anyway).
func BenchmarkPromptLogprobs(b *testing.B) {
	m := storiesModel(b)
	p := prompt(11, 512, m.Vocab)
	for _, ask := range []bool{false, true} {
		b.Run(fmt.Sprintf("asked=%v", ask), func(b *testing.B) {
			e := newEngine(b, m, nil)
			salt := 0
			for b.Loop() {
				salt++ // a cold cache each time
				r := greedy(p, 1)
				r.PromptLogprobs, r.PromptTop, r.CacheSalt = ask, 5, fmt.Sprint(salt)
				run(b, e, r)
			}
		})
	}
}

// TestPromptLogprobsUnderPreemption: a request preempted while its prompt
// is being scored (chunks of 16 beside decoding requests, the cache too
// small for all) still gets the model's log-probabilities, once.
func TestPromptLogprobsUnderPreemption(t *testing.T) {
	m := storiesModel(t)
	p := prompt(13, 200, m.Vocab)
	want := referencePrompt(t, m, p, 2)
	// 24 blocks of 16 = 384 tokens: three requests decoding to 150 each
	// and the scored prompt's 200 do not fit.
	e := newEngine(t, m, func(o *Options) { o.KVBlocks, o.PrefillSolo, o.PrefillMixed, o.MaxStepMs = 24, 16, 16, 0 })
	for i := range 3 {
		ch, err := e.Submit(context.Background(), greedy(prompt(uint64(30+i), 50, m.Vocab), 100))
		if err != nil {
			t.Fatal(err)
		}
		go collect(ch)
	}
	got, carried, fin := promptOf(t, e, Request{Prompt: p, MaxTokens: 1, IgnoreEOS: true, PromptLogprobs: true, PromptTop: 2})
	if carried != 1 {
		t.Fatalf("carried %d times", carried)
	}
	samePrompt(t, got, want)
	if fin.Usage.Preemptions == 0 {
		t.Errorf("the scored request was not preempted: the pressure did not bite")
	}
}
