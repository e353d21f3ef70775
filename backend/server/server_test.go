package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	openai "github.com/sashabaranov/go-openai"
	"github.com/sashabaranov/go-openai/jsonschema"

	"jspark/backend/engine"
	jmodel "jspark/backend/model"
	"jspark/backend/sample"
	"jspark/kernels/cpu"
)

var update = flag.Bool("update", false, "rewrite golden files")

// serverOptions is DefaultOptions with set's changes.
func serverOptions(set func(*Options)) Options {
	o := DefaultOptions()
	set(&o)
	return o
}

type fixture struct {
	e      *engine.Engine
	srv    *httptest.Server
	client *openai.Client
}

// start serves the embedded model with the engine's and the server's
// DefaultOptions, then eset's and sset's changes (nil: none).
func start(t testing.TB, eset func(*engine.Options), sset func(*Options)) *fixture {
	t.Helper()
	m, _, err := jmodel.Open("", cpu.New(2))
	if err != nil {
		t.Fatal(err)
	}
	return startModel(t, m, eset, sset)
}

// startModel is start over the model m. The engine is quiet, with a cache
// of 4096 blocks; unseeded requests share seed 0, so tests at a temperature
// can compare runs (a server's default draws a seed per request).
func startModel(t testing.TB, m *jmodel.Model, eset func(*engine.Options), sset func(*Options)) *fixture {
	t.Helper()
	eopt := engine.DefaultOptions()
	eopt.Log, eopt.KVBlocks = io.Discard, 4096
	if eset != nil {
		eset(&eopt)
	}
	e, err := engine.New(m, eopt)
	if err != nil {
		t.Fatal(err)
	}
	sopt := DefaultOptions()
	sopt.Seed = new(uint64)
	if sset != nil {
		sset(&sopt)
	}
	srv := httptest.NewUnstartedServer(New(e, sopt).Handler())
	srv.Config.ConnContext = ConnContext // as HTTPServer wires it
	srv.Start()
	t.Cleanup(func() { srv.Close(); e.Close() })
	cfg := openai.DefaultConfig(sopt.APIKey)
	cfg.BaseURL = srv.URL + "/v1"
	return &fixture{e: e, srv: srv, client: openai.NewClientWithConfig(cfg)}
}

var bashTool = openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
	Name: "bash", Description: "Run a shell command",
	Parameters: jsonschema.Definition{Type: jsonschema.Object, Required: []string{"command", "timeout"},
		Properties: map[string]jsonschema.Definition{
			"command": {Type: jsonschema.String, Description: "the command"},
			"timeout": {Type: jsonschema.Integer},
		}},
}}

func checkBashArgs(t *testing.T, args string) {
	t.Helper()
	var a map[string]any
	dec := json.NewDecoder(strings.NewReader(args))
	if err := dec.Decode(&a); err != nil {
		t.Fatalf("arguments %q: %v", args, err)
	}
	if _, ok := a["command"].(string); !ok || len(a) != 2 {
		t.Fatalf("arguments %q do not validate", args)
	}
	if n, ok := a["timeout"].(float64); !ok || n != float64(int64(n)) {
		t.Fatalf("timeout in %q is not an integer", args)
	}
}

// streamed is what a chat stream delivered, accumulated as a client would.
type streamed struct {
	text      string
	reasoning string
	calls     []openai.ToolCall
	finish    openai.FinishReason
	usage     *openai.Usage
}

func drain(t *testing.T, stream *openai.ChatCompletionStream) streamed {
	t.Helper()
	defer stream.Close()
	var out streamed
	for {
		ch, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if ch.Usage != nil {
			out.usage = ch.Usage
		}
		for _, c := range ch.Choices {
			out.text += c.Delta.Content
			out.reasoning += c.Delta.ReasoningContent
			for _, tc := range c.Delta.ToolCalls {
				if tc.ID != "" {
					out.calls = append(out.calls, tc)
				} else {
					out.calls[*tc.Index].Function.Arguments += tc.Function.Arguments
				}
			}
			if c.FinishReason != "" {
				out.finish = c.FinishReason
			}
		}
	}
}

func TestChatPlainAndStreamed(t *testing.T) {
	f := start(t, nil, nil)
	ctx := context.Background()
	req := openai.ChatCompletionRequest{Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "Tell me a story."}}, MaxTokens: 24, Temperature: 0}
	resp, err := f.client.CreateChatCompletion(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content == "" || resp.Usage.CompletionTokens != 24 || resp.Choices[0].FinishReason != "length" {
		t.Fatalf("response %+v", resp)
	}
	req.Stream = true
	req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	stream, err := f.client.CreateChatCompletionStream(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	got := drain(t, stream)
	text, finish, usage := got.text, got.finish, got.usage
	if text != resp.Choices[0].Message.Content || finish != "length" || usage == nil || usage.CompletionTokens != 24 {
		t.Fatalf("streamed %q finish %q usage %+v; non-streamed %q", text, finish, usage, resp.Choices[0].Message.Content)
	}
}

// A stream starts (headers and the role chunk) once the engine accepts the
// request, before the first token: the engine is held inside the prompt's
// first prefill step while the client reads it.
func TestStreamStartsBeforeFirstToken(t *testing.T) {
	var once sync.Once
	release := make(chan struct{})
	hold := func(engine.StepTrace) { once.Do(func() { <-release }) }
	f := start(t, func(o *engine.Options) { o.PrefillSolo, o.PrefillMixed, o.OnStep = 16, 16, hold }, nil)
	defer close(release) // before the fixture's cleanup closes the engine
	var stream *openai.ChatCompletionStream
	var first openai.ChatCompletionStreamResponse
	got := make(chan error, 1)
	go func() {
		var err error
		stream, err = f.client.CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{
			Messages: []openai.ChatCompletionMessage{{Role: "user", Content: strings.Repeat("Once upon a time there was a cat. ", 4)}}, MaxTokens: 8})
		if err == nil {
			first, err = stream.Recv()
		}
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second): // a deadlock guard, not a timing
		release <- struct{}{}
		t.Fatal("the stream did not start while the engine was inside the prefill")
	}
	if first.Choices[0].Delta.Role != "assistant" || first.Choices[0].Delta.Content != "" || f.e.Metrics().Snapshot().GenerationTokens != 0 {
		t.Fatalf("first chunk %+v after %d tokens", first, f.e.Metrics().Snapshot().GenerationTokens)
	}
	release <- struct{}{}
	rest := drain(t, stream)
	if rest.text == "" || rest.finish != openai.FinishReasonLength {
		t.Fatalf("rest of the stream: %+v", rest)
	}
}

func TestRequiredToolCall20Seeds(t *testing.T) {
	f := start(t, nil, nil)
	ctx := context.Background()
	for seed := 0; seed < 20; seed++ {
		s := seed
		req := openai.ChatCompletionRequest{
			Messages: []openai.ChatCompletionMessage{{Role: "system", Content: "You are a coding agent."}, {Role: "user", Content: "List the files."}},
			Tools:    []openai.Tool{bashTool}, ToolChoice: "required", Temperature: 0.9, Seed: &s, MaxTokens: 400,
		}
		resp, err := f.client.CreateChatCompletion(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		msg := resp.Choices[0].Message
		if resp.Choices[0].FinishReason != openai.FinishReasonToolCalls || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != "bash" || msg.ToolCalls[0].ID == "" {
			t.Fatalf("seed %d: %+v", seed, resp.Choices[0])
		}
		checkBashArgs(t, msg.ToolCalls[0].Function.Arguments)

		req.Stream = true
		stream, err := f.client.CreateChatCompletionStream(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		got := drain(t, stream)
		calls, finish := got.calls, got.finish
		if finish != openai.FinishReasonToolCalls || len(calls) != 1 || calls[0].Function.Arguments != msg.ToolCalls[0].Function.Arguments {
			t.Fatalf("seed %d streamed: %v %+v vs %+v", seed, finish, calls, msg.ToolCalls)
		}
	}
}

// With parallel_tool_calls true a required reply holds one or more calls,
// the model choosing when to stop (end of generation is allowed after
// each). The test takes the first seed whose reply chains at least two.
func TestRequiredParallelCalls(t *testing.T) {
	f := start(t, nil, nil)
	var req openai.ChatCompletionRequest
	var ch openai.ChatCompletionChoice
	for seed := 1; seed <= 30 && len(ch.Message.ToolCalls) < 2; seed++ {
		req = openai.ChatCompletionRequest{
			Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "List the files."}},
			Tools:    []openai.Tool{bashTool}, ToolChoice: "required", ParallelToolCalls: true, Temperature: 0.9, Seed: &seed, MaxTokens: 600,
		}
		resp, err := f.client.CreateChatCompletion(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		ch = resp.Choices[0]
		if len(ch.Message.ToolCalls) < 1 || ch.Message.Content != "" {
			t.Fatalf("seed %d: %d calls, content %q", seed, len(ch.Message.ToolCalls), ch.Message.Content)
		}
	}
	calls := ch.Message.ToolCalls
	if len(calls) < 2 {
		t.Fatalf("no seed in 1..30 gave more than one call")
	}
	complete := calls
	if ch.FinishReason == openai.FinishReasonLength {
		complete = calls[:len(calls)-1]
	}
	for _, c := range complete {
		if c.Function.Name != "bash" {
			t.Fatalf("call %+v", c)
		}
		checkBashArgs(t, c.Function.Arguments)
	}
	req.Stream = true
	stream, err := f.client.CreateChatCompletionStream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	got := drain(t, stream)
	if len(got.calls) != len(calls) || got.text != "" || got.finish != ch.FinishReason {
		t.Fatalf("streamed %d calls, content %q, finish %s; not streamed %d, %s", len(got.calls), got.text, got.finish, len(calls), ch.FinishReason)
	}
	for i := range calls {
		if got.calls[i].Function.Arguments != calls[i].Function.Arguments {
			t.Fatalf("call %d streamed %q, not streamed %q", i, got.calls[i].Function.Arguments, calls[i].Function.Arguments)
		}
	}
}

func TestPrefixCacheAcrossTurns(t *testing.T) {
	f := start(t, nil, nil)
	ctx := context.Background()
	msgs := []openai.ChatCompletionMessage{{Role: "system", Content: "You are a coding agent in a sandbox."}, {Role: "user", Content: "Look around."}}
	req := openai.ChatCompletionRequest{Messages: msgs, Tools: []openai.Tool{bashTool}, ToolChoice: "required", Temperature: 0, MaxTokens: 300}
	a, err := f.client.CreateChatCompletion(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.client.CreateChatCompletion(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	block := a.Usage.PromptTokens / 16 * 16
	if b.Usage.PromptTokensDetails.CachedTokens < block {
		t.Fatalf("repeat: cached %d of %d", b.Usage.PromptTokensDetails.CachedTokens, a.Usage.PromptTokens)
	}
	if a.Choices[0].Message.ToolCalls[0].Function.Arguments != b.Choices[0].Message.ToolCalls[0].Function.Arguments {
		t.Fatal("greedy repeat changed the output")
	}
	turn2 := append(append([]openai.ChatCompletionMessage(nil), msgs...), a.Choices[0].Message,
		openai.ChatCompletionMessage{Role: "tool", ToolCallID: a.Choices[0].Message.ToolCalls[0].ID, Content: "README.md\nmain.go"})
	req.Messages = turn2
	c, err := f.client.CreateChatCompletion(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if c.Usage.PromptTokensDetails.CachedTokens < block {
		t.Fatalf("second turn: cached %d, want ≥ %d", c.Usage.PromptTokensDetails.CachedTokens, block)
	}
}

func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("metrics do not parse: %v", err)
	}
	// Each metric by its name and by name{label="value"} for each of its
	// labels, summed over the rest.
	out := map[string]float64{}
	for name, fam := range families {
		for _, m := range fam.Metric {
			var v float64
			switch {
			case m.Counter != nil:
				v = m.Counter.GetValue()
			case m.Gauge != nil:
				v = m.Gauge.GetValue()
			}
			out[name] += v
			for _, l := range m.Label {
				out[fmt.Sprintf("%s{%s=%q}", name, l.GetName(), l.GetValue())] += v
			}
		}
	}
	return out
}

// TestMetricsCountFinishAsTheClientSaw: a reply ended by a stop string is
// a finish_reason stop to the client and in vllm:request_success_total,
// not an abort (the server cancels the engine's request there).
func TestMetricsCountFinishAsTheClientSaw(t *testing.T) {
	f := start(t, nil, nil)
	ask := func(stop []string) openai.ChatCompletionResponse {
		resp, err := f.client.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
			Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "Once upon a time"}}, MaxTokens: 40, Stop: stop})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	full := ask(nil).Choices[0].Message.Content
	words := strings.Fields(full)
	if len(words) < 4 {
		t.Fatalf("reply %q is too short to cut", full)
	}
	stop := " " + words[2]
	for _, name := range []string{"chat", "stream"} {
		before := scrape(t, f.srv.URL)
		finish := ""
		if name == "chat" {
			r := ask([]string{stop})
			finish = string(r.Choices[0].FinishReason)
			if got := r.Choices[0].Message.Content; len(got) >= len(full) {
				t.Fatalf("stop %q did not cut %q: %q", stop, full, got)
			}
		} else {
			stream, err := f.client.CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{
				Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "Once upon a time"}}, MaxTokens: 40, Stop: []string{stop}})
			if err != nil {
				t.Fatal(err)
			}
			finish = string(drain(t, stream).finish)
		}
		after := scrape(t, f.srv.URL)
		key := func(r string) string { return `vllm:request_success_total{finished_reason="` + r + `"}` }
		if finish != "stop" || after[key("stop")]-before[key("stop")] != 1 || after[key("abort")] != before[key("abort")] {
			t.Errorf("%s: the client saw finish %q; request_success_total moved stop +%v, abort +%v",
				name, finish, after[key("stop")]-before[key("stop")], after[key("abort")]-before[key("abort")])
		}
	}
}

func TestMetricsMoveByReportedTokens(t *testing.T) {
	f := start(t, nil, nil)
	before := scrape(t, f.srv.URL)
	var completion, prompt int
	for _, n := range []int{5, 17, 30} {
		resp, err := f.client.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
			Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "Once upon a time"}}, MaxTokens: n})
		if err != nil {
			t.Fatal(err)
		}
		completion += resp.Usage.CompletionTokens
		prompt += resp.Usage.PromptTokens
	}
	after := scrape(t, f.srv.URL)
	if d := after["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"]; int(d) != completion {
		t.Fatalf("generation_tokens_total moved %v, responses reported %d", d, completion)
	}
	if d := after["vllm:prompt_tokens_total"] - before["vllm:prompt_tokens_total"]; int(d) != prompt {
		t.Fatalf("prompt_tokens_total moved %v, responses reported %d", d, prompt)
	}
	for _, name := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:num_preemptions_total",
		"vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total", "vllm:kv_cache_usage_perc", "jspark_kv_capacity_tokens"} {
		if _, ok := after[name]; !ok {
			t.Errorf("metric %s missing", name)
		}
	}
}

func post(t *testing.T, url, key, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func TestErrors(t *testing.T) {
	f := start(t, func(o *engine.Options) { o.MaxContext = 200 }, func(o *Options) { o.APIKey, o.ServedName = "k", "tiny" })
	url := f.srv.URL + "/v1/chat/completions"
	cases := []struct {
		name, key, body string
		status          int
		want            string
	}{
		{"no key", "", `{"messages":[{"role":"user","content":"x"}]}`, 401, `"type":"authentication_error"`},
		{"bad key", "nope", `{"messages":[{"role":"user","content":"x"}]}`, 401, `incorrect API key`},
		{"malformed", "k", `{"messages":`, 400, `malformed JSON body`},
		{"wrong type", "k", `{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}`, 400, `"param":"temperature"`},
		{"unknown model", "k", `{"model":"gpt-9","messages":[{"role":"user","content":"x"}]}`, 404, `"code":"model_not_found"`},
		{"n", "k", `{"messages":[{"role":"user","content":"x"}],"n":2}`, 400, `n must be 1`},
		{"context", "k", `{"messages":[{"role":"user","content":"x"}],"max_tokens":190}`, 400, `maximum context length is 200 tokens; the prompt has 17 tokens and max_tokens is 190`},
		{"bad role", "k", `{"messages":[{"role":"wizard","content":"x"}]}`, 400, `role \"wizard\"`},
		{"presence", "k", `{"messages":[{"role":"user","content":"x"}],"presence_penalty":2.5}`, 400, `presence_penalty 2.5 is outside [-2, 2]`},
		{"frequency", "k", `{"messages":[{"role":"user","content":"x"}],"frequency_penalty":-3}`, 400, `"param":"frequency_penalty"`},
		{"top_p", "k", `{"messages":[{"role":"user","content":"x"}],"top_p":0}`, 400, `top_p 0 is outside (0, 1]`},
		{"top_k", "k", `{"messages":[{"role":"user","content":"x"}],"top_k":-2}`, 400, `"param":"top_k"`},
		{"repetition", "k", `{"messages":[{"role":"user","content":"x"}],"repetition_penalty":0}`, 400, `repetition_penalty 0 must be positive`},
		{"bias key", "k", `{"messages":[{"role":"user","content":"x"}],"logit_bias":{"512":1}}`, 400, `logit_bias key \"512\" is not a token id in [0, 512)`},
		{"too large", "k", `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 33<<20) + `"}]}`, 413, `the request body is over 32 MiB`},
		{"bias value", "k", `{"messages":[{"role":"user","content":"x"}],"logit_bias":{"5":101}}`, 400, `outside [-100, 100]`},
	}
	for _, c := range []struct {
		path   string
		status int
		want   string
	}{
		{"/v1/models", 200, `{"data":[{"created":0,"id":"tiny","max_model_len":200,"object":"model","owned_by":"jspark"}],"object":"list"}`},
		{"/v1/models/tiny", 200, `{"created":0,"id":"tiny","max_model_len":200,"object":"model","owned_by":"jspark"}`},
		{"/v1/models/gpt-9", 404, `{"error":{"message":"the model \"gpt-9\" does not exist; this server serves \"tiny\"","type":"invalid_request_error","param":"model","code":"model_not_found"}}`},
	} {
		req, _ := http.NewRequest("GET", f.srv.URL+c.path, nil)
		req.Header.Set("Authorization", "Bearer k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || strings.TrimSpace(string(b)) != c.want {
			t.Errorf("GET %s: %d %s", c.path, resp.StatusCode, b)
		}
	}
	for _, c := range cases {
		resp, body := post(t, url, c.key, c.body)
		if resp.StatusCode != c.status || !strings.Contains(body, c.want) || !strings.HasPrefix(body, `{"error":{"message":`) {
			t.Errorf("%s: %d %s; want %d containing %s", c.name, resp.StatusCode, body, c.status, c.want)
		}
	}
}

// TestSamplingReachesTheSampler: penalties and logit bias sent over HTTP
// give exactly the text the model's own generation loop gives with the same
// sampler settings.
func TestSamplingReachesTheSampler(t *testing.T) {
	f := start(t, nil, nil)
	m := f.e.Model()
	prompt := "Once upon a time, there was a little"
	// An empty stop string stops nothing.
	if resp, body := post(t, f.srv.URL+"/v1/completions", "", `{"prompt":"`+prompt+`","max_tokens":4,"stop":["",""]}`); resp.StatusCode != 200 || !strings.Contains(body, `"completion_tokens":4`) {
		t.Fatalf("empty stop: %d %s", resp.StatusCode, body)
	}
	cases := []struct {
		body string
		p    sample.Params
	}{
		{`"presence_penalty":1.5`, sample.Params{PresencePenalty: 1.5}},
		{`"frequency_penalty":0.75`, sample.Params{FrequencyPenalty: 0.75}},
		{`"repetition_penalty":1.3`, sample.Params{RepeatPenalty: 1.3}},
		{`"logit_bias":{"300":100}`, sample.Params{LogitBias: map[int]float32{300: 100}}},
		{`"temperature":0.8,"top_k":40,"seed":7,"frequency_penalty":-0.5`, sample.Params{Temperature: 0.8, TopK: 40, Seed: 7, FrequencyPenalty: -0.5, TopP: 1}},
	}
	plain, err := m.Generate(m.Tok.Encode(prompt, true, true), 32, sample.New(sample.Params{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		g, err := m.Generate(m.Tok.Encode(prompt, true, true), 32, sample.New(c.p), nil)
		if err != nil {
			t.Fatal(err)
		}
		want := m.Tok.Decode(g.IDs, false)
		if slices.Equal(g.IDs, plain.IDs) {
			t.Fatalf("%s: the settings do not change this output; the case checks nothing", c.body)
		}
		resp, body := post(t, f.srv.URL+"/v1/completions", "", `{"prompt":"`+prompt+`","max_tokens":32,"temperature":0,"ignore_eos":true,`+c.body+`}`)
		var got struct {
			Choices []struct{ Text string } `json:"choices"`
		}
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &got) != nil || got.Choices[0].Text != want {
			t.Errorf("%s: %d %s\nwant text %q", c.body, resp.StatusCode, body, want)
		}
	}
}

func TestQueueFull429(t *testing.T) {
	f := start(t, func(o *engine.Options) { o.MaxWaiting = 1 }, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	retry := ""
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, _ := post(t, f.srv.URL+"/v1/completions", "", `{"prompt":"Once upon a time","max_tokens":200,"ignore_eos":true}`)
			mu.Lock()
			statuses[resp.StatusCode]++
			if resp.StatusCode == 429 {
				retry = resp.Header.Get("Retry-After")
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if statuses[429] == 0 || statuses[200] == 0 || retry != "1" {
		t.Fatalf("statuses %v, Retry-After %q", statuses, retry)
	}
}

func TestDisconnectFreesBlocks(t *testing.T) {
	f := start(t, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := f.client.CreateChatCompletionStream(ctx, openai.ChatCompletionRequest{
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "x"}}, MaxTokens: 5000, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	stream.Recv()
	stream.Recv()
	cancel()
	stream.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s := f.e.Metrics().Snapshot()
		if s.Running == 0 && s.FreeBlocks == int64(f.e.CapacityTokens()/16) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("request not aborted: %+v", s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var volatile = regexp.MustCompile(`"(id|created|created_at|item_id|call_id|queued_s|prefill_s|decode_s|preempted_s)":("[^"]*"|[0-9.eE+-]+)`)

// TestGoldenSSE pins the exact stream bytes (ids and times masked).
func TestGoldenSSE(t *testing.T) {
	f := start(t, nil, func(o *Options) { o.ServedName = "stories" })
	cases := map[string]string{
		"chat_stream":     `{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":8,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`,
		"completion_stop": `{"prompt":"Once upon a time","max_tokens":30,"temperature":0,"stream":true,"stop":["Lily"]}`,
		// A required call streams its name first, then argument fragments.
		"chat_tool_stream": `{"messages":[{"role":"user","content":"List files"}],"tools":[{"type":"function","function":{"name":"ls","parameters":{"type":"object","properties":{"dir":{"type":"string"}},"required":["dir"]}}}],"tool_choice":"required","max_tokens":40,"temperature":0,"stream":true}`,
		// The Responses API's events for a short text and a forced call.
		"responses_tool_stream": `{"input":[{"role":"user","content":"List files"}],"tools":[{"type":"function","name":"ls","parameters":{"type":"object","properties":{"dir":{"type":"string","maxLength":6}},"required":["dir"]}}],"tool_choice":"required","max_output_tokens":80,"temperature":0,"stream":true,"cache_salt":"responses"}`,
	}
	for name, body := range cases {
		path := "/v1/chat/completions"
		switch {
		case strings.HasPrefix(name, "completion"):
			path = "/v1/completions"
		case strings.HasPrefix(name, "responses"):
			path = "/v1/responses"
		}
		_, got := post(t, f.srv.URL+path, "", body)
		got = volatile.ReplaceAllString(got, `"$1":"X"`)
		golden := "testdata/" + name + ".sse"
		if *update {
			os.MkdirAll("testdata", 0o755)
			os.WriteFile(golden, []byte(got), 0o644)
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run with -update)", err)
		}
		if got != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
}

func FuzzChatBody(f *testing.F) {
	f.Add(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
	f.Add(`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"required","max_tokens":3}`)
	f.Add(`{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"array"}}},"max_tokens":3,"stream":true}`)
	fuzzBodies(f, "/v1/chat/completions")
}

func FuzzResponsesBody(f *testing.F) {
	f.Add(`{"input":"hi","max_output_tokens":2}`)
	f.Add(`{"input":[{"role":"user","content":"a"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"x"}],"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"tool_choice":"required","max_output_tokens":3,"stream":true}`)
	f.Add(`{"input":"x","text":{"format":{"type":"json_schema","name":"a","schema":{"type":"array"}}},"max_output_tokens":3}`)
	fuzzBodies(f, "/v1/responses")
}

// fuzzBodies posts fuzzed bodies to path: every answer is a success or an
// OpenAI-style error, never a panic.
func fuzzBodies(f *testing.F, path string) {
	fx := start(f, func(o *engine.Options) { o.MaxContext = 256 }, nil)
	h := fx.srv.Config.Handler
	f.Fuzz(func(t *testing.T, body string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", path, bytes.NewBufferString(body)))
		if rec.Code != 200 && !strings.HasPrefix(rec.Body.String(), `{"error":`) {
			t.Fatalf("status %d without an error body: %s", rec.Code, rec.Body.String())
		}
	})
}

// TestCompletionLogprobs: the legacy logprobs shape over HTTP, against
// llama.cpp's reference (the first token's five likeliest, within 1e-2 nats
// as in the model's own parity test: llama.cpp keeps K/V in F16), streamed
// the same as not; echo prepends the prompt.
func TestCompletionLogprobs(t *testing.T) {
	f := start(t, nil, nil)
	raw, err := os.ReadFile("../../testdata/refs/stories260K-greedy.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Prompt    string       `json:"prompt"`
		GenIDs    []int        `json:"gen_ids"`
		Top5First [][2]float64 `json:"top5_first"`
	}
	if err := json.Unmarshal(raw[:bytes.IndexByte(raw, '\n')], &ref); err != nil {
		t.Fatal(err)
	}
	type lp struct {
		Tokens        []string             `json:"tokens"`
		TokenLogprobs []float32            `json:"token_logprobs"`
		TopLogprobs   []map[string]float32 `json:"top_logprobs"`
		TextOffset    []int                `json:"text_offset"`
	}
	var got struct {
		Choices []struct {
			Text     string `json:"text"`
			Logprobs *lp    `json:"logprobs"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	body := `{"prompt":` + strconv.Quote(ref.Prompt) + `,"max_tokens":12,"temperature":0,"logprobs":5`
	resp, out := post(t, f.srv.URL+"/v1/completions", "", body+`}`)
	if resp.StatusCode != 200 || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	tok := f.e.Model().Tok
	c := got.Choices[0]
	l := c.Logprobs
	if l == nil || len(l.Tokens) != 12 || got.Usage.CompletionTokens != 12 || len(l.TopLogprobs) != 12 || len(l.TextOffset) != 12 {
		t.Fatalf("logprobs %+v", l)
	}
	if c.Text != tok.Decode(ref.GenIDs[:12], false) || strings.Join(l.Tokens, "") != c.Text {
		t.Fatalf("text %q, tokens %q; llama.cpp %q", c.Text, l.Tokens, tok.Decode(ref.GenIDs[:12], false))
	}
	for i, top := range l.TopLogprobs {
		// Greedy: the chosen token is the likeliest, with the same number.
		if len(top) != 5 || top[l.Tokens[i]] != l.TokenLogprobs[i] || l.TextOffset[i] != len(strings.Join(l.Tokens[:i], "")) {
			t.Fatalf("token %d: %q %v top %v offset %d", i, l.Tokens[i], l.TokenLogprobs[i], top, l.TextOffset[i])
		}
	}
	for _, p := range ref.Top5First {
		piece := string(tok.AppendPiece(nil, int(p[0]), true))
		if v, ok := l.TopLogprobs[0][piece]; !ok || math.Abs(float64(v)-p[1]) > 1e-2 {
			t.Errorf("first token %q: logprob %v (present %v), llama.cpp %v", piece, v, ok, p[1])
		}
	}

	resp, out = post(t, f.srv.URL+"/v1/completions", "", body+`,"stream":true}`)
	var streamed lp
	for _, line := range strings.Split(out, "\n\n") {
		var ch struct {
			Choices []struct {
				Logprobs *lp `json:"logprobs"`
			} `json:"choices"`
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok && d != "[DONE]" && json.Unmarshal([]byte(d), &ch) == nil && len(ch.Choices) > 0 && ch.Choices[0].Logprobs != nil {
			x := ch.Choices[0].Logprobs
			streamed.Tokens = append(streamed.Tokens, x.Tokens...)
			streamed.TokenLogprobs = append(streamed.TokenLogprobs, x.TokenLogprobs...)
			streamed.TopLogprobs = append(streamed.TopLogprobs, x.TopLogprobs...)
			streamed.TextOffset = append(streamed.TextOffset, x.TextOffset...)
		}
	}
	if resp.StatusCode != 200 || !cmp.Equal(streamed, *l) {
		t.Fatalf("streamed logprobs differ: %s", cmp.Diff(*l, streamed))
	}

	resp, out = post(t, f.srv.URL+"/v1/completions", "", `{"prompt":"Once upon a time","max_tokens":4,"temperature":0,"echo":true}`)
	if err := json.Unmarshal([]byte(out), &got); err != nil || resp.StatusCode != 200 || got.Choices[0].Text != "Once upon a time"+tok.Decode(ref.GenIDs[:4], false) {
		t.Fatalf("echo: %d %s", resp.StatusCode, out)
	}
	resp, out = post(t, f.srv.URL+"/v1/completions", "", `{"prompt":"x","echo":true,"logprobs":1}`)
	if resp.StatusCode != 400 || !strings.Contains(out, `"param":"echo"`) {
		t.Fatalf("echo with logprobs: %d %s", resp.StatusCode, out)
	}
}

// TestUnseededRequestsDiffer: without a seed, requests at a temperature
// draw their own (as OpenAI, vLLM and llama-server do); with Options.Seed
// they share it.
func TestUnseededRequestsDiffer(t *testing.T) {
	f := start(t, nil, nil)
	fresh := httptest.NewServer(New(f.e, DefaultOptions()).Handler())
	defer fresh.Close()
	body := `{"messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":24,"temperature":1,"ignore_eos":true}`
	texts := func(url string) map[string]bool {
		seen := map[string]bool{}
		for range 3 {
			resp, out := post(t, url+"/v1/chat/completions", "", body)
			var r openai.ChatCompletionResponse
			if resp.StatusCode != 200 || json.Unmarshal([]byte(out), &r) != nil || len(r.Choices) != 1 {
				t.Fatalf("%d %s", resp.StatusCode, out)
			}
			seen[r.Choices[0].Message.Content] = true
		}
		return seen
	}
	if got := texts(fresh.URL); len(got) == 1 {
		t.Errorf("three unseeded requests at temperature 1 gave one text: %v", got)
	}
	if got := texts(f.srv.URL); len(got) != 1 {
		t.Errorf("with a server seed, three requests gave %d texts", len(got))
	}
}
