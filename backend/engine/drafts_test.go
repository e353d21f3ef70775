package engine

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRecurrentDrafts: the DeltaNet families verify drafts and still
// give, alone and four at once, the ids Generate gives without drafts.
// The drafts are the right ids, every third one changed, so some are
// accepted and some rejected (each rejection rewinds the state and redoes
// the accepted tokens), and no verifying run goes past a block boundary,
// so each request's decode keeps a checkpoint at its last one; the n-gram
// drafter runs on them too.
func TestRecurrentDrafts(t *testing.T) {
	for _, arch := range []string{"qwen35", "qwen35moe", "qwen3next"} {
		t.Run(arch, func(t *testing.T) {
			m := hybridModel(t, arch)
			var prompts [][]int
			for i := range 4 {
				prompts = append(prompts, prompt(uint64(500+i), 30+7*i, m.Vocab))
			}
			want := hybridWant(t, m, prompts)
			e := newEngine(t, m, func(o *Options) { o.Speculate, o.MaxStepMs = 4, 0 })
			// By prompt length: the next right ids, every third changed.
			next := map[int][]int{}
			for i, p := range prompts {
				next[len(p)] = want[i]
			}
			e.drafter = func(s *seq) []int {
				w, at := next[len(s.req.Prompt)], s.generated
				d := slices.Clone(w[min(at, len(w)):min(at+4, len(w))])
				for j := range d {
					if (at+j)%3 == 2 {
						d[j] = (d[j] + 1) % m.Vocab
					}
				}
				return d
			}
			check := func(how string) {
				var chans []<-chan Event
				for i, p := range prompts {
					ch, err := e.Submit(context.Background(), greedy(p, len(want[i])))
					if err != nil {
						t.Fatal(err)
					}
					chans = append(chans, ch)
				}
				for i, ch := range chans {
					r := collect(ch)
					if d := cmp.Diff(want[i], r.ids[:len(want[i])]); d != "" {
						t.Fatalf("prompt %d %s with drafts (-generate +engine):\n%s", i, how, d)
					}
				}
			}
			crossed := 0
			for i, p := range prompts {
				r := run(t, e, greedy(p, len(want[i])))
				if cmp.Diff(want[i], r.ids) != "" {
					t.Fatalf("prompt %d alone with drafts: %v, want %v", i, r.ids, want[i])
				}
				// Its decode kept a checkpoint at its last block boundary,
				// where it crossed one (the ids, and so where a request
				// ends, depend on the instruction set): no verifying run
				// went past one.
				s := &seq{tokens: append(slices.Clone(p), r.ids[:len(r.ids)-1]...)}
				b := len(s.tokens) / 16
				if 16*b <= len(p) {
					continue
				}
				crossed++
				e.cache.hashUpTo(s, b)
				if ck := e.cache.states.find(s.hashes[b-1]); ck == nil || ck.at != "decode" {
					t.Fatalf("prompt %d: no decode checkpoint at %d of %d tokens: %+v", i, 16*b, len(s.tokens), ck)
				}
			}
			if crossed == 0 {
				t.Fatalf("no request's decode crossed a block boundary: the checkpoints went unchecked")
			}
			check("in a batch")
			s := e.Metrics().Snapshot()
			t.Logf("%d drafts, %d accepted", s.DraftTokens, s.AcceptedDrafts)
			if s.AcceptedDrafts == 0 || s.AcceptedDrafts == s.DraftTokens {
				t.Fatalf("%d of %d drafts accepted: want some accepted and some rejected", s.AcceptedDrafts, s.DraftTokens)
			}
			e.drafter = nil // set while idle: the loop reads it in a step
			check("in a batch, n-gram")
			waitIdle(t, e)
		})
	}
}
