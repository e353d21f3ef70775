package server

import (
	"encoding/json"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	jmodel "jspark/backend/model"
	"jspark/backend/sample"
)

// modelPromptLogprobs is each token's log-probability under the model
// given the tokens before it (the first's NaN), and the likeliest token at
// each position: from one forward pass over the whole prompt, with every
// position's logits, computed here and not by the engine.
func modelPromptLogprobs(t *testing.T, m *jmodel.Model, p []int) (lps []float64, best []int) {
	t.Helper()
	pool := jmodel.NewPool(m.Config, (len(p)+15)/16, 16)
	defer pool.Free()
	table := pool.Contiguous()
	b := &jmodel.Batch{}
	for i, id := range p {
		b.Tokens, b.Pos, b.Table, b.Logits = append(b.Tokens, id), append(b.Pos, i), append(b.Table, table), append(b.Logits, i)
	}
	logits, err := m.Forward(b, pool)
	if err != nil {
		t.Fatal(err)
	}
	lps, best = []float64{math.NaN()}, []int{-1}
	for i := 1; i < len(p); i++ {
		row := logits[(i-1)*m.Vocab : i*m.Vocab]
		lps = append(lps, sample.LogSoftmax(row)[p[i]])
		best = append(best, sample.Argmax(row))
	}
	return lps, best
}

// legacyLogprobs is a completion choice's logprobs as lm-eval reads them.
type legacyLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float64           `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

type promptResponse struct {
	Choices []struct {
		Text           string                    `json:"text"`
		Index          int                       `json:"index"`
		Logprobs       *legacyLogprobs           `json:"logprobs"`
		PromptLogprobs []map[string]*vllmLogprob `json:"prompt_logprobs"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// lmEvalScore is what lm-evaluation-harness makes of a loglikelihood
// response (LocalCompletionsAPI.parse_logprobs): the continuation's summed
// log-probability, and whether each of its tokens was the likeliest.
func lmEvalScore(t *testing.T, l *legacyLogprobs, ctxlen int) (float64, bool) {
	t.Helper()
	sum, greedy := 0.0, true
	for i := ctxlen; i < len(l.TokenLogprobs)-1; i++ {
		sum += *l.TokenLogprobs[i]
		top := math.Inf(-1)
		for _, v := range l.TopLogprobs[i] {
			top = max(top, v)
		}
		if *l.TokenLogprobs[i] != top {
			greedy = false
		}
	}
	return sum, greedy
}

// TestLMEvalLoglikelihood: the request lm-evaluation-harness sends for a
// loglikelihood task (testdata/lmeval) gets the prompt's log-probabilities
// in OpenAI's legacy shape, each the model's own (computed here by a
// forward pass), the first null; lm-eval's score of the continuation is
// the model's. max_tokens 0 returns the prompt alone.
func TestLMEvalLoglikelihood(t *testing.T) {
	f := start(t, nil, nil)
	body, err := os.ReadFile("testdata/lmeval/loglikelihood.json")
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Prompt [][]int `json:"prompt"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	p, ctxlen := req.Prompt[0], 13
	want, best := modelPromptLogprobs(t, f.e.Model(), p)
	tok := f.e.Model().Tok
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-4*(1+math.Abs(b)) }
	for _, c := range []struct {
		name string
		body string
		out  int // tokens generated and returned
	}{
		{"as lm-eval sends it", string(body), 1},
		{"max_tokens 0", strings.Replace(string(body), `"max_tokens": 1`, `"max_tokens": 0`, 1), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, out := post(t, f.srv.URL+"/v1/completions", "", c.body)
			var got promptResponse
			if resp.StatusCode != 200 || json.Unmarshal([]byte(out), &got) != nil || len(got.Choices) != 1 {
				t.Fatalf("%d %s", resp.StatusCode, out)
			}
			ch := got.Choices[0]
			l := ch.Logprobs
			if l == nil || len(l.TokenLogprobs) != len(p)+c.out || len(l.Tokens) != len(l.TokenLogprobs) || len(l.TopLogprobs) != len(l.Tokens) ||
				len(l.TextOffset) != len(l.Tokens) || got.Usage.CompletionTokens != c.out || got.Usage.PromptTokens != len(p) {
				t.Fatalf("logprobs %+v, usage %+v", l, got.Usage)
			}
			if l.TokenLogprobs[0] != nil || l.TopLogprobs[0] != nil || !strings.HasPrefix(ch.Text, tok.Decode(p, false)) ||
				(c.out == 0 && ch.Text != tok.Decode(p, false)) {
				t.Errorf("the first prompt token has a log-probability %v / %v, or the text %q is not the echo", l.TokenLogprobs[0], l.TopLogprobs[0], ch.Text)
			}
			for i := 1; i < len(p); i++ {
				lp := l.TokenLogprobs[i]
				bestPiece := string(tok.AppendPiece(nil, best[i], true))
				_, hasBest := l.TopLogprobs[i][bestPiece]
				if lp == nil || !near(*lp, want[i]) || len(l.TopLogprobs[i]) != 1 || !hasBest ||
					l.Tokens[i] != string(tok.AppendPiece(nil, p[i], true)) {
					t.Fatalf("prompt token %d (%q): %v, top %v; the model: %v, likeliest %q", i, l.Tokens[i], lp, l.TopLogprobs[i], want[i], bestPiece)
				}
			}
			if c.out == 0 {
				return
			}
			score, greedy := lmEvalScore(t, l, ctxlen)
			wantScore, wantGreedy := 0.0, true
			for i := ctxlen; i < len(p); i++ {
				wantScore += want[i]
				wantGreedy = wantGreedy && best[i] == p[i]
			}
			if !near(score, wantScore) || greedy != wantGreedy {
				t.Errorf("lm-eval's score %v (greedy %v); the model's %v (greedy %v)", score, greedy, wantScore, wantGreedy)
			}
			t.Logf("continuation %q: log-probability %.4f, greedy %v", tok.Decode(p[ctxlen:], false), score, greedy)
		})
	}
}

// TestVLLMPromptLogprobs: prompt_logprobs (vLLM's) gives per prompt token
// (the first null) the token's own entry with its rank and the top
// alternatives ranked 1, 2, …, keyed by id; echo with logprobs streams the
// same prompt entries in the echo's event; what cannot be answered is a
// 400 naming the field.
func TestVLLMPromptLogprobs(t *testing.T) {
	f := start(t, nil, nil)
	tok := f.e.Model().Tok
	p := tok.Encode("Once upon a time, there was a little girl named Lily.", true, true)
	want, best := modelPromptLogprobs(t, f.e.Model(), p)
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-4*(1+math.Abs(b)) }
	ids, _ := json.Marshal(p)
	resp, out := post(t, f.srv.URL+"/v1/completions", "", `{"prompt":`+string(ids)+`,"max_tokens":2,"prompt_logprobs":2}`)
	var got promptResponse
	if resp.StatusCode != 200 || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	pl := got.Choices[0].PromptLogprobs
	if len(pl) != len(p) || pl[0] != nil || got.Choices[0].Logprobs != nil {
		t.Fatalf("prompt_logprobs: %d entries for %d tokens, first %v", len(pl), len(p), pl[0])
	}
	for i := 1; i < len(p); i++ {
		own := pl[i][strconv.Itoa(p[i])]
		top1 := pl[i][strconv.Itoa(best[i])]
		if own == nil || !near(float64(own.Logprob), want[i]) || own.DecodedToken != string(tok.AppendPiece(nil, p[i], true)) ||
			top1 == nil || top1.Rank != 1 || (own.Rank == 1) != (best[i] == p[i]) || len(pl[i]) < 2 || len(pl[i]) > 3 {
			t.Fatalf("token %d: %v", i, pl[i])
		}
	}

	// Streamed: the echo's event carries the prompt's entries.
	resp, out = post(t, f.srv.URL+"/v1/completions", "", `{"prompt":`+string(ids)+`,"max_tokens":2,"echo":true,"logprobs":1,"stream":true}`)
	var first *legacyLogprobs
	for _, line := range strings.Split(out, "\n\n") {
		var ch promptResponse
		if d, ok := strings.CutPrefix(line, "data: "); ok && d != "[DONE]" && json.Unmarshal([]byte(d), &ch) == nil && len(ch.Choices) > 0 && first == nil {
			first = ch.Choices[0].Logprobs
			if ch.Choices[0].Text != tok.Decode(p, false) {
				t.Errorf("the first event's text %q is not the echo", ch.Choices[0].Text)
			}
		}
	}
	if resp.StatusCode != 200 || first == nil || len(first.TokenLogprobs) != len(p) || first.TokenLogprobs[0] != nil || !near(*first.TokenLogprobs[5], want[5]) {
		t.Fatalf("streamed echo: %d %+v", resp.StatusCode, first)
	}

	for _, c := range []struct{ body, param string }{
		{`{"prompt":"x","prompt_logprobs":2,"stream":true}`, "prompt_logprobs"},
		{`{"prompt":"x","prompt_logprobs":21}`, "prompt_logprobs"},
		{`{"prompt":[[1,2],[1,3]],"echo":true,"logprobs":1,"stream":true}`, "stream"},
		{`{"prompt":["a",{}]}`, "prompt"},
		{`{"prompt":[[[1]]]}`, "prompt"},
		{`{"prompt":["a",[1,99999999]]}`, ""}, // one prompt's error is the batch's
		{`{"prompt":[` + strings.Repeat(`"a",`, maxPrompts) + `"a"]}`, "prompt"},
		{`{"prompt":"x","max_tokens":0}`, "max_tokens"},
	} {
		resp, out := post(t, f.srv.URL+"/v1/completions", "", c.body)
		param := `"param":"` + c.param + `"`
		if c.param == "" {
			param = `"param":null`
		}
		if resp.StatusCode != 400 || !strings.Contains(out, param) {
			t.Errorf("%s: %d %s", c.body, resp.StatusCode, out)
		}
	}
}

// TestLMEvalBatch: lm-evaluation-harness with batch_size 2 sends two
// prompts in one request; each choice (its index the prompt's) is what
// the prompt alone gets, and the usage sums theirs.
func TestLMEvalBatch(t *testing.T) {
	f := start(t, nil, nil)
	tok := f.e.Model().Tok
	a := tok.Encode("Once upon a time, there was a little girl named Lily.", true, true)
	b := tok.Encode("The cat sat on the mat.", true, true)
	body := func(ps ...[]int) string {
		j, _ := json.Marshal(ps)
		return `{"model":"llama","prompt":` + string(j) + `,"temperature":0,"max_tokens":1,"logprobs":1,"seed":1234,"echo":true}`
	}
	ask := func(body string) promptResponse {
		t.Helper()
		resp, out := post(t, f.srv.URL+"/v1/completions", "", body)
		var got promptResponse
		if resp.StatusCode != 200 || json.Unmarshal([]byte(out), &got) != nil {
			t.Fatalf("%d %s", resp.StatusCode, out)
		}
		return got
	}
	both := ask(body(a, b))
	alone := []promptResponse{ask(body(a)), ask(body(b))}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-4*(1+math.Abs(b)) }
	if len(both.Choices) != 2 || both.Usage.PromptTokens != len(a)+len(b) || both.Usage.CompletionTokens != 2 {
		t.Fatalf("%d choices, usage %+v", len(both.Choices), both.Usage)
	}
	for i, ch := range both.Choices {
		one := alone[i].Choices[0]
		if ch.Index != i || ch.Text != one.Text || len(ch.Logprobs.TokenLogprobs) != len(one.Logprobs.TokenLogprobs) {
			t.Fatalf("choice %d: index %d, %q, want %q", i, ch.Index, ch.Text, one.Text)
		}
		for k, lp := range ch.Logprobs.TokenLogprobs {
			if w := one.Logprobs.TokenLogprobs[k]; (lp == nil) != (w == nil) || lp != nil && !near(*lp, *w) {
				t.Errorf("choice %d, token %d: %v, alone %v", i, k, lp, w)
			}
		}
	}
}

// FuzzCompletionsBody: /v1/completions bodies, prompt log-probabilities
// asked every way, get a success or an OpenAI-style error, never a panic.
func FuzzCompletionsBody(f *testing.F) {
	f.Add(`{"prompt":[[1,403,407]],"max_tokens":1,"logprobs":1,"echo":true,"temperature":0}`)
	f.Add(`{"prompt":"Once","max_tokens":0,"echo":true,"logprobs":5,"stream":true}`)
	f.Add(`{"prompt":[1,2,3],"max_tokens":2,"prompt_logprobs":20}`)
	f.Add(`{"prompt":["a"],"echo":true,"logprobs":0,"prompt_logprobs":0,"n":1}`)
	fuzzBodies(f, "/v1/completions")
}
