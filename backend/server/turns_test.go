package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"jspark/backend/engine"
	"jspark/backend/gguf"
	jmodel "jspark/backend/model"
	"jspark/backend/usage"
	"jspark/kernels/cpu"
	"jspark/kernels/quant"
)

// hybridSynth is a small random model of a hybrid family with the
// embedded model's tokenizer: qwen35 with three Gated DeltaNet layers and
// one of full attention; gemma3 with five sliding-window layers (64
// positions) and a global one.
func hybridSynth(tb testing.TB, arch string, context int) *jmodel.Model {
	tb.Helper()
	vocab, err := jmodel.OpenFile("")
	if err != nil {
		tb.Fatal(err)
	}
	o := jmodel.SynthOptions{Arch: arch, Layers: 4, Dim: 64, Heads: 4, KVHeads: 2, FF: 128, Type: quant.Q8_0, Seed: 5,
		Context: context, Vocab: vocab}
	jmodel.DefaultMoE(&o)
	if arch == "gemma3" {
		o.Layers, o.SlidingWindow = 6, 64
	}
	w, err := jmodel.Synth(o)
	if err != nil {
		tb.Fatal(err)
	}
	b, _ := w.Bytes()
	f, err := gguf.Parse(arch+".gguf", b)
	if err != nil {
		tb.Fatal(err)
	}
	m, err := jmodel.Load(f, cpu.New(2))
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// completeIDs posts a greedy completion of the prompt ids and returns its
// text, its usage.jspark and how long the response took.
func completeIDs(tb testing.TB, url string, ids []int, maxTokens int, salt string) (string, usage.Jspark, time.Duration) {
	tb.Helper()
	body, _ := json.Marshal(map[string]any{"prompt": ids, "max_tokens": maxTokens, "temperature": 0, "ignore_eos": true,
		"cache_salt": salt, "user": "agent"})
	t0 := time.Now()
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	took := time.Since(t0)
	var r struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
		Usage struct {
			Jspark *usage.Jspark `json:"jspark"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &r); err != nil || len(r.Choices) != 1 || r.Usage.Jspark == nil {
		tb.Fatalf("completion: %s (%v)", b, err)
	}
	return r.Choices[0].Text, *r.Usage.Jspark, took
}

// replyIDs is the engine's greedy reply to ids (the server's own, as the
// text the caller checks against says), resumed from what the server's
// request just left in the cache.
func replyIDs(tb testing.TB, e *engine.Engine, ids []int, maxTokens int, salt string) []int {
	tb.Helper()
	ch, err := e.Submit(context.Background(), engine.Request{Prompt: ids, MaxTokens: maxTokens, IgnoreEOS: true, CacheSalt: salt})
	if err != nil {
		tb.Fatal(err)
	}
	var out []int
	for ev := range ch {
		if ev.Finish == "" {
			out = append(out, ev.Token)
		} else if ev.Err != nil {
			tb.Fatal(ev.Err)
		}
	}
	return out
}

// agentTurn is a conversation's next prompt: the last prompt, its reply
// and fresh new tokens (a tool's output).
func agentTurn(prompt, reply []int, seed uint64, fresh, vocab int) []int {
	return append(append(slices.Clone(prompt), reply...), randomIDs(seed, fresh+1, vocab)[1:]...)
}

// TestAgentTurnsResume: over HTTP, an agent's conversation on qwen35 and
// on gemma3, each turn its last prompt plus its reply plus 300 new
// tokens: every turn after the first prefills at most the 300 new tokens
// and a block (usage.jspark.computed_tokens), resuming after the last
// block boundary the previous turn computed (qwen35 from the state
// checkpoint its decode kept there, gemma3 from the blocks of its last
// window), and says so in usage.jspark.checkpoint.
func TestAgentTurnsResume(t *testing.T) {
	for _, arch := range []string{"qwen35", "gemma3"} {
		t.Run(arch, func(t *testing.T) {
			m := hybridSynth(t, arch, 8192)
			f := startModel(t, m, func(o *engine.Options) { o.MaxStepMs = 0 }, nil)
			const fresh, reply, bs = 300, 32, 16
			conv := randomIDs(1, 2000, m.Vocab)
			for turn := range 4 {
				text, j, _ := completeIDs(t, f.srv.URL, conv, reply, "")
				ids := replyIDs(t, f.e, conv, reply, "")
				// The server sends each byte that is not UTF-8 as U+FFFD.
				if got := string([]rune(m.Tok.Decode(ids, false))); got != text {
					t.Fatalf("turn %d: the engine's reply %q is not the server's %q", turn, got, text)
				}
				if turn > 0 {
					if j.ComputedTokens > fresh+bs {
						t.Errorf("turn %d prefilled %d tokens, want at most %d", turn, j.ComputedTokens, fresh+bs)
					}
					ck := j.Checkpoint
					want := map[string]string{"qwen35": "state", "gemma3": "window"}[arch]
					if ck == nil || ck.Kind != want || ck.Position != j.ReusedTokens || (arch == "qwen35" && ck.At != "decode") {
						t.Errorf("turn %d resumed from %+v after %d reused tokens", turn, ck, j.ReusedTokens)
					}
					t.Logf("turn %d: %d tokens, %d reused, %d computed, from %+v", turn, len(conv), j.ReusedTokens, j.ComputedTokens, ck)
				}
				conv = agentTurn(conv, ids, uint64(10+turn), fresh, m.Vocab)
			}
		})
	}
}

// BenchmarkAgentTurn16K: the time to a response of one token (its TTFT)
// for turn N+1 of a conversation whose turn N had a 16K-token prompt and
// a 32-token reply, over HTTP: resumed ("warm": the 300 new tokens and at
// most a block are prefilled) and cold (the same prompt under a cache salt
// of its own). Each iteration asks with other new tokens, so a warm one
// resumes from turn N's checkpoint, not from the iteration before.
func BenchmarkAgentTurn16K(b *testing.B) {
	for _, arch := range []string{"qwen35", "gemma3"} {
		b.Run(arch, func(b *testing.B) {
			m := hybridSynth(b, arch, 1<<15)
			f := startModel(b, m, func(o *engine.Options) { o.MaxStepMs = 0 }, nil)
			const fresh, reply = 300, 32
			conv := randomIDs(2, 16<<10, m.Vocab)
			completeIDs(b, f.srv.URL, conv, reply, "")
			ids := replyIDs(b, f.e, conv, reply, "")
			for _, mode := range []string{"warm", "cold"} {
				b.Run(mode, func(b *testing.B) {
					i := 0
					var total time.Duration
					for b.Loop() {
						i++
						salt := ""
						if mode == "cold" {
							salt = fmt.Sprintf("cold-%d", i)
						}
						next := agentTurn(conv, ids, uint64(1000+i), fresh, m.Vocab)
						_, j, took := completeIDs(b, f.srv.URL, next, 1, salt)
						total += took
						if mode == "warm" && j.ComputedTokens > fresh+16 {
							b.Fatalf("a warm turn prefilled %d tokens", j.ComputedTokens)
						}
					}
					b.ReportMetric(float64(total.Milliseconds())/float64(i), "ttft-ms")
				})
			}
		})
	}
}
