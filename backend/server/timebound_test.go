//go:build !race

package server

import (
	"bufio"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"jspark/backend/engine"
	"jspark/backend/gguf"
	jmodel "jspark/backend/model"
	"jspark/kernels/cpu"
	"jspark/kernels/quant"
)

// synthModel is a random-weight llama of the given size with the embedded
// model's tokenizer, so a prefill takes seconds, not milliseconds.
func synthModel(t testing.TB, dim, layers int) *jmodel.Model {
	t.Helper()
	vocab, err := jmodel.OpenFile("")
	if err != nil {
		t.Fatal(err)
	}
	w, err := jmodel.Synth(jmodel.SynthOptions{Arch: "llama", Layers: layers, Dim: dim, Heads: 2, KVHeads: 1, FF: 2 * dim,
		Type: quant.F32, Seed: 11, Context: 1 << 14, Vocab: vocab})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := w.Bytes()
	f, err := gguf.Parse("synth.gguf", b)
	if err != nil {
		t.Fatal(err)
	}
	m, err := jmodel.Load(f, cpu.New(2))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// tokenTimes streams a completion of the prompt ids and returns when each
// token's event arrived, from the moment the request was sent (logprobs
// make every token its own event, even one whose bytes wait for the next).
func tokenTimes(t *testing.T, url string, ids []int, maxTokens int) []time.Duration {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"prompt": ids, "max_tokens": maxTokens, "temperature": 0,
		"ignore_eos": true, "logprobs": 1, "stream": true})
	t0 := time.Now()
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var times []time.Duration
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Logprobs *struct{ Tokens []string } `json:"logprobs"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("event %s: %v", data, err)
		}
		if len(ch.Choices) > 0 && ch.Choices[0].Logprobs != nil {
			for range ch.Choices[0].Logprobs.Tokens {
				times = append(times, time.Since(t0))
			}
		}
	}
	if len(times) != maxTokens {
		t.Fatalf("status %d: %d token events, want %d", resp.StatusCode, len(times), maxTokens)
	}
	return times
}

// TestShortBehindLongOverHTTP is issue 14's measure over HTTP: a 20-token
// request sent a twentieth of the way into a ~4,000-token cold prefill gets
// its first token within a tenth of the long one's cold TTFT (steps are
// bounded in time, so it waits one step), and an exact repeat of the long
// prompt gets its first token within two decode steps (its cached blocks,
// the partial last one included, are reused; one token is computed).
// Ratios of times measured side by side in one run, never times.
func TestShortBehindLongOverHTTP(t *testing.T) {
	m := synthModel(t, 384, 8)
	f := startModel(t, m, func(o *engine.Options) { o.MaxStepMs, o.KVBlocks = 100, 1024 }, nil)
	vocab := m.Tok.VocabSize()

	// The cold TTFT: a long prompt alone, nothing cached.
	cold := tokenTimes(t, f.srv.URL, randomIDs(50, 4000, vocab), 1)[0]

	// Another long prompt, and the short one sent 1/20 of cold into it.
	long := randomIDs(51, 4007, vocab) // a partial last block, for the repeat
	done := make(chan struct{})
	go func() { defer close(done); tokenTimes(t, f.srv.URL, long, 1) }()
	time.Sleep(cold / 20)
	short := tokenTimes(t, f.srv.URL, randomIDs(52, 20, vocab), 4)[0]
	<-done
	ratio := short.Seconds() / cold.Seconds()
	t.Logf("long cold TTFT %v, short TTFT %v sent %v into another long prefill: ratio %.3f", cold, short, cold/20, ratio)
	if ratio > 0.10 {
		t.Errorf("short/long-cold TTFT = %.3f, want ≤ 0.10", ratio)
	}

	// The exact repeat, against its own stream's decode steps. The machine
	// is shared: the best of three repeats is the measure.
	best := 1e9
	for range 3 {
		times := tokenTimes(t, f.srv.URL, long, 17)
		var gaps []time.Duration
		for i := 1; i < len(times); i++ {
			gaps = append(gaps, times[i]-times[i-1])
		}
		slices.Sort(gaps)
		step := gaps[len(gaps)/2]
		r := times[0].Seconds() / step.Seconds()
		t.Logf("exact repeat TTFT %v, median decode step %v: %.2f steps", times[0], step, r)
		best = min(best, r)
	}
	if best > 2 {
		t.Errorf("exact repeat TTFT = %.2f decode steps at best, want ≤ 2", best)
	}
}
