package engine

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"jspark/backend/gguf"
	"jspark/backend/model"
	"jspark/backend/sample"
	"jspark/kernels/cpu"
	"jspark/kernels/quant"
)

// hybridModel is a small random model of a sliding-window or hybrid
// recurrent architecture: gemma3 with its sixth layer global and a window
// shorter than the prompts; the DeltaNet families with three recurrent
// layers and one of full attention.
func hybridModel(t testing.TB, arch string) *model.Model {
	t.Helper()
	o := model.SynthOptions{Arch: arch, Layers: 4, Dim: 64, Heads: 4, KVHeads: 2, FF: 128, Type: quant.Q8_0, Seed: 5, Context: 4096}
	model.DefaultMoE(&o)
	if arch == "gemma3" {
		o.Layers, o.SlidingWindow = 6, 20
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

// hybridWant is Generate's greedy ids for each prompt, alone.
func hybridWant(t *testing.T, m *model.Model, prompts [][]int) [][]int {
	var want [][]int
	for _, p := range prompts {
		g, err := m.Generate(p, 24, sample.New(sample.Params{}), nil)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, g.IDs)
	}
	return want
}

// TestHybridDeterminism: on gemma3 and the DeltaNet families, greedy ids
// are those Generate gives alone, whether a request runs alone, in a batch
// of 6 under a small prefill budget (each step cuts the prompts
// differently, every recurrent piece ending at a block boundary), or again
// after the first batch, from the cache where the model's state allows it:
// gemma3 reuses its blocks, a recurrent model recomputes.
func TestHybridDeterminism(t *testing.T) {
	for _, arch := range []string{"gemma3", "qwen35", "qwen3next"} {
		t.Run(arch, func(t *testing.T) {
			m := hybridModel(t, arch)
			recurrent := m.RecurrentLayers() > 0
			var prompts [][]int
			for i := 0; i < 6; i++ {
				prompts = append(prompts, prompt(uint64(60+i), 20+13*i, m.Vocab))
			}
			want := hybridWant(t, m, prompts)
			log := &stepLog{}
			e := newEngine(t, m, func(o *Options) { o.Speculate, o.PrefillMixed, o.MaxStepMs, o.OnStep = 4, 40, 0, log.add })
			for i, p := range prompts {
				ids := run(t, e, greedy(p, 24)).ids
				if d := cmp.Diff(want[i], ids[:len(want[i])]); d != "" {
					t.Fatalf("prompt %d alone (-generate +engine):\n%s", i, d)
				}
				want[i] = ids
			}
			for round := 0; round < 2; round++ {
				log.reset()
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
					cached := r.finish.Usage.CachedTokens
					if recurrent && cached != 0 || !recurrent && cached == 0 && len(prompts[i]) >= 32 {
						t.Errorf("round %d prompt %d: %d tokens from the cache", round, i, cached)
					}
				}
				if recurrent {
					checkAlignedChunks(t, log.all(), prompts, e.opt.BlockSize)
				}
			}
			if s := e.Metrics().Snapshot(); recurrent && s.DraftTokens != 0 {
				t.Errorf("%v draft tokens on a recurrent model", s.DraftTokens)
			}
			waitIdle(t, e)
		})
	}
}

// checkAlignedChunks: every prefill chunk of a recurrent model ends at a
// block boundary or at its prompt's end, and some step cut a prompt.
func checkAlignedChunks(t *testing.T, steps []StepTrace, prompts [][]int, bs int) {
	t.Helper()
	done := map[int64]int{} // tokens prefilled so far, by request
	cut := false
	for _, st := range steps {
		for _, c := range st.Prefill {
			done[c.Req] += c.Tokens
			end := done[c.Req]
			whole := false
			for _, p := range prompts {
				whole = whole || end == len(p)
			}
			if end%bs != 0 && !whole {
				t.Errorf("step %d: request %d's chunk ends at %d, not a block boundary", st.Step, c.Req, end)
			}
			cut = cut || !whole
		}
	}
	if !cut {
		t.Error("no prompt was cut: the budget did not bite")
	}
}

// TestHybridPreemption: a recurrent model under KV pressure preempts
// requests and recomputes them from position 0, exactly.
func TestHybridPreemption(t *testing.T) {
	m := hybridModel(t, "qwen35")
	var prompts [][]int
	for i := 0; i < 4; i++ {
		prompts = append(prompts, prompt(uint64(80+i), 60, m.Vocab))
	}
	want := hybridWant(t, m, prompts)
	// 16 blocks of 16 = 256 tokens; the four need 4 × 84 at the end.
	e := newEngine(t, m, func(o *Options) { o.KVBlocks = 16 })
	var chans []<-chan Event
	for _, p := range prompts {
		ch, err := e.Submit(context.Background(), greedy(p, 24))
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	preempted := 0
	for i, ch := range chans {
		r := collect(ch)
		if d := cmp.Diff(want[i], r.ids[:len(want[i])]); d != "" {
			t.Fatalf("request %d under preemption (-alone +pressed):\n%s", i, d)
		}
		preempted += r.finish.Usage.Preemptions
	}
	if preempted == 0 {
		t.Error("no preemption: the pressure did not bite")
	}
	waitIdle(t, e)
}
