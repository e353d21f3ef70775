package engine

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"jspark/backend/gguf"
	"jspark/backend/model"
	"jspark/backend/sample"
	"jspark/kernels"
	"jspark/kernels/cpu"
	"jspark/kernels/quant"
)

// hybridModel is a small random model of a sliding-window or hybrid
// recurrent architecture: gemma3 with its sixth layer global and a window
// shorter than the prompts; the DeltaNet families with three recurrent
// layers and one of full attention.
func hybridModel(t testing.TB, arch string) *model.Model {
	t.Helper()
	return hybridModelOn(t, arch, cpu.New(2), 64)
}

// hybridModelOn is hybridModel on the device k, dim wide.
func hybridModelOn(t testing.TB, arch string, k kernels.Kernels, dim int) *model.Model {
	t.Helper()
	o := model.SynthOptions{Arch: arch, Layers: 4, Dim: dim, Heads: 4, KVHeads: 2, FF: 128, Type: quant.Q8_0, Seed: 5, Context: 4096}
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
	m, err := model.Load(f, k)
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

var hybridArchs = []string{"gemma3", "qwen35", "qwen35moe", "qwen3next"}

// TestHybridDeterminism: on gemma3 and the DeltaNet families, greedy ids
// are those Generate gives alone, whether a request runs alone, in a batch
// of 6 under a small prefill budget (each step cuts the prompts
// differently, every recurrent piece ending at a block boundary), or again
// in a batch, from the cache: gemma3 from its blocks, a recurrent model
// from the state checkpoint at its prompt's last block boundary.
func TestHybridDeterminism(t *testing.T) {
	for _, arch := range hybridArchs {
		t.Run(arch, func(t *testing.T) {
			m := hybridModel(t, arch)
			recurrent := m.RecurrentLayers() > 0
			var prompts [][]int
			for i := 0; i < 6; i++ {
				prompts = append(prompts, prompt(uint64(60+i), 20+13*i, m.Vocab))
			}
			want := hybridWant(t, m, prompts)
			alone := newEngine(t, m, func(o *Options) { o.MaxStepMs = 0 })
			for i, p := range prompts {
				r := run(t, alone, greedy(p, 24))
				if d := cmp.Diff(want[i], r.ids[:len(want[i])]); d != "" {
					t.Fatalf("prompt %d alone (-generate +engine):\n%s", i, d)
				}
				if r.finish.Usage.ComputedTokens != len(p) {
					t.Fatalf("prompt %d alone computed %d of %d tokens", i, r.finish.Usage.ComputedTokens, len(p))
				}
				want[i] = r.ids
			}
			log := &stepLog{}
			e := newEngine(t, m, func(o *Options) { o.Speculate, o.PrefillMixed, o.MaxStepMs, o.OnStep = 4, 40, 0, log.add })
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
				reused := map[int64]int{}
				for i, ch := range chans {
					r := collect(ch)
					if d := cmp.Diff(want[i], r.ids); d != "" {
						t.Fatalf("round %d prompt %d in a batch of 6 (-alone +batched):\n%s", round, i, d)
					}
					u := r.finish.Usage
					// Round 1 resumes at the last block boundary short of the
					// prompt's end.
					at := (len(prompts[i]) - 1) / 16 * 16 * round
					if u.CachedTokens != at || u.ReusedTokens != at {
						t.Errorf("round %d prompt %d: %d tokens from the cache, want %d", round, i, u.CachedTokens, at)
					}
					kind := "window"
					if recurrent {
						kind = "state"
					}
					if ck := u.Checkpoint; at > 0 && (ck == nil || ck.Kind != kind || ck.Position != at) {
						t.Errorf("round %d prompt %d: checkpoint %+v, want %s at %d", round, i, ck, kind, at)
					}
					// Requests are numbered in the order submitted, 6 a round.
					reused[int64(1+6*round+i)] = u.ReusedTokens
				}
				if recurrent && round == 0 {
					checkAlignedChunks(t, log.all(), prompts, reused, e.opt.BlockSize)
				}
			}
			if s := e.Metrics().Snapshot(); s.DraftTokens == 0 {
				t.Error("no draft tokens: speculation did not run")
			}
			waitIdle(t, e)
		})
	}
}

// checkAlignedChunks: every prefill chunk of a recurrent model ends at a
// block boundary or at its prompt's end (request r of the round is prompt
// r-1 mod 6, resumed at reused[r]), and some step cut a prompt.
func checkAlignedChunks(t *testing.T, steps []StepTrace, prompts [][]int, reused map[int64]int, bs int) {
	t.Helper()
	done := map[int64]int{} // tokens prefilled so far, by request
	cut := false
	for _, st := range steps {
		for _, c := range st.Prefill {
			if _, ok := done[c.Req]; !ok {
				done[c.Req] = reused[c.Req]
			}
			done[c.Req] += c.Tokens
			end, p := done[c.Req], prompts[(c.Req-1)%6]
			if end%bs != 0 && end != len(p) {
				t.Errorf("step %d: request %d's chunk ends at %d, not a block boundary", st.Step, c.Req, end)
			}
			cut = cut || end != len(p)
		}
	}
	if !cut {
		t.Error("no prompt was cut: the budget did not bite")
	}
}

// TestHybridTurns: three conversations run at once, each turn's prompt
// the previous turn's prompt, its reply and 20 new tokens, as an agent's
// are: every turn's greedy ids are Generate's for its whole prompt, cold
// and alone, though each later turn resumed from the previous one's cache
// (a recurrent model from the checkpoint its decode kept at its last block
// boundary) and prefilled only the new tokens and at most a block more;
// or they part where the cold run had two candidates within rounding of
// each other, since decode and prefill round the kept state differently.
func TestHybridTurns(t *testing.T) {
	for _, arch := range hybridArchs {
		t.Run(arch, func(t *testing.T) { checkTurns(t, hybridModel(t, arch), 3, 3) })
	}
}

// checkTurns runs TestHybridTurns's conversations on m, so many of so
// many turns.
func checkTurns(t *testing.T, m *model.Model, sessions, turns int) {
	e := newEngine(t, m, func(o *Options) { o.MaxStepMs = 0 })
	const fresh, reply = 20, 24
	convs := make([][]int, sessions)
	for i := range convs {
		convs[i] = prompt(uint64(90+i), 40+7*i, m.Vocab)
	}
	for turn := range turns {
		var chans []<-chan Event
		for i := range convs {
			ch, err := e.Submit(context.Background(), Request{Prompt: convs[i], MaxTokens: reply, IgnoreEOS: true, Session: fmt.Sprint(i)})
			if err != nil {
				t.Fatal(err)
			}
			chans = append(chans, ch)
		}
		var results []result
		for _, ch := range chans {
			results = append(results, collect(ch))
		}
		// Generate runs after the engine's steps: the two share the model's
		// step buffers.
		for i, r := range results {
			want := hybridWant(t, m, [][]int{convs[i]})[0]
			if d := cmp.Diff(want, r.ids[:len(want)]); d != "" { // Generate stops at an end token
				k := 0
				for want[k] == r.ids[k] {
					k++
				}
				// A resumed turn starts from the state its decode kept, where
				// the cold run prefilled those positions: equal within
				// rounding (hundredths of a nat), so two candidates closer
				// than that may swap.
				top, tie := nearTie(t, m, append(slices.Clone(convs[i]), want[:k]...), want[k], r.ids[k])
				if !tie {
					t.Fatalf("turn %d of conversation %d (-cold +resumed), no near-tie at %d (top two %v):\n%s", turn, i, k, top, d)
				}
				t.Logf("turn %d of conversation %d: a near-tie at %d (%v) went the other way", turn, i, k, top)
			}
			u := r.finish.Usage
			if turn > 0 {
				if u.ComputedTokens > fresh+1+16 {
					t.Errorf("turn %d of conversation %d prefilled %d tokens, want at most %d", turn, i, u.ComputedTokens, fresh+1+16)
				}
				if m.RecurrentLayers() > 0 && (u.Checkpoint == nil || u.Checkpoint.At != "decode") {
					t.Errorf("turn %d of conversation %d resumed from %+v, want the last turn's decode", turn, i, u.Checkpoint)
				}
			}
			convs[i] = append(append(slices.Clone(convs[i]), r.ids...), prompt(uint64(200+10*turn+i), fresh, m.Vocab)[1:]...)
		}
	}
	waitIdle(t, e)
}

// nearTieNats is how close two candidates' log-probabilities must be
// for rounding to swap them.
const nearTieNats = 0.05

// nearTie says whether a and b are the two likeliest next tokens after
// ctx, computed by a fresh engine, within nearTieNats of each other; top
// is that engine's two likeliest.
func nearTie(t *testing.T, m *model.Model, ctx []int, a, b int) (top []TokenProb, tie bool) {
	e := newEngine(t, m, func(o *Options) { o.KVBlocks = (len(ctx) + 16) / 16 * 2 })
	ch, err := e.Submit(context.Background(), Request{Prompt: ctx, MaxTokens: 1, IgnoreEOS: true, TopLogprobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	for ev := range ch {
		if ev.Finish == "" {
			top = ev.Top
		}
	}
	e.Close()
	if len(top) < 2 {
		t.Fatalf("asked for 2 alternatives, got %v", top)
	}
	gap := math.Abs(float64(top[0].Logprob - top[1].Logprob))
	pair := (top[0].Token == a && top[1].Token == b) || (top[0].Token == b && top[1].Token == a)
	return top, pair && gap < nearTieNats
}

// TestHybridPreemption: a recurrent model under KV pressure preempts
// requests, which resume from a checkpoint still kept or recompute from
// position 0, with the ids they have alone.
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
