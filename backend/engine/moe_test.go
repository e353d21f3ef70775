package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"jspark/backend/gguf"
	"jspark/backend/model"
	"jspark/backend/sample"
	"jspark/kernels/cpu"
	"jspark/kernels/quant"
)

// moeModel is a small random model of a mixture-of-experts architecture,
// gpt-oss's window shorter than the prompts so that windowed layers drop
// cached blocks' positions.
func moeModel(t testing.TB, arch string) *model.Model {
	t.Helper()
	o := model.SynthOptions{Arch: arch, Layers: 3, Dim: 64, Heads: 4, KVHeads: 2, FF: 128, Type: quant.Q8_0, Seed: 3, Context: 4096}
	model.DefaultMoE(&o)
	if arch == "gpt-oss" {
		o.SlidingWindow = 20
	}
	w, err := model.Synth(o)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := w.Bytes()
	f, err := gguf.Parse(arch+".gguf", b)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(f, cpu.New(2))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMoEDeterminism: on each mixture-of-experts architecture, greedy ids
// are those Generate gives alone, whether a request runs alone, in a batch
// of 6 (whose tokens route to other experts in the same products), or
// again with its prefix from the cache.
func TestMoEDeterminism(t *testing.T) {
	for _, arch := range []string{"qwen3moe", "glm4moe", "gpt-oss"} {
		t.Run(arch, func(t *testing.T) {
			m := moeModel(t, arch)
			var prompts [][]int
			want := map[int][]int{}
			for i := 0; i < 6; i++ {
				p := prompt(uint64(40+i), 20+9*i, m.Vocab)
				prompts = append(prompts, p)
				g, err := m.Generate(p, 24, sample.New(sample.Params{}), nil)
				if err != nil {
					t.Fatal(err)
				}
				want[i] = g.IDs
			}
			for _, spec := range []int{0, 4} {
				e := newEngine(t, m, func(o *Options) { o.Speculate = spec })
				checkAloneBatchedCached(t, e, prompts, want)
			}
		})
	}
}

// checkAloneBatchedCached runs each prompt alone, then all at once twice
// (the second time from the cache), against want (Generate's ids, then
// the first run's).
func checkAloneBatchedCached(t *testing.T, e *Engine, prompts [][]int, want map[int][]int) {
	t.Helper()
	for i, p := range prompts {
		// Generate stops at the end-of-text token; the engine request
		// ignores it and goes on.
		ids := run(t, e, greedy(p, 24)).ids
		if d := cmp.Diff(want[i], ids[:len(want[i])]); d != "" {
			t.Fatalf("prompt %d alone (-generate +engine):\n%s", i, d)
		}
		want[i] = ids
	}
	for round := 0; round < 2; round++ {
		var chans []<-chan Event
		for _, p := range prompts {
			ch, err := e.Submit(context.Background(), greedy(p, 24))
			if err != nil {
				t.Fatal(err)
			}
			chans = append(chans, ch)
		}
		for i, ch := range chans {
			r := collect(ch)
			if d := cmp.Diff(want[i], r.ids); d != "" {
				t.Fatalf("round %d prompt %d in a batch of 6 (-alone +batched):\n%s", round, i, d)
			}
			if r.finish.Usage.CachedTokens == 0 && len(prompts[i]) >= 32 {
				t.Errorf("round %d prompt %d: nothing from the cache", round, i)
			}
		}
	}
	waitIdle(t, e)
}

// BenchmarkMoEStep: a prefill chunk and a decode step of a small qwen3moe.
func BenchmarkMoEStep(b *testing.B) {
	m := moeModel(b, "qwen3moe")
	for _, n := range []int{1, 64} {
		b.Run(fmt.Sprintf("tokens%d", n), func(b *testing.B) {
			pool := model.NewPool(m.Config, (n+15)/16, 16)
			defer pool.Free()
			batch := &model.Batch{Logits: []int{n - 1}}
			for i := 0; i < n; i++ {
				batch.Tokens = append(batch.Tokens, 3+i%200)
				batch.Pos = append(batch.Pos, i)
				batch.Table = append(batch.Table, pool.Contiguous())
			}
			for b.Loop() {
				if _, err := m.Forward(batch, pool); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}
