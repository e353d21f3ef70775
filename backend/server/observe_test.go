package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"jspark/backend/engine"
	jmodel "jspark/backend/model"
	"jspark/kernels/cpu"
)

// An observer set per request by a handler in front of the server sees what
// the client got: the same usage, calls and finish, and ordered times.
func TestObserverSeesWhatTheClientGot(t *testing.T) {
	m, _, err := jmodel.Open("", cpu.New(2))
	if err != nil {
		t.Fatal(err)
	}
	opt := engine.DefaultOptions()
	opt.Log, opt.KVBlocks = io.Discard, 1024
	e, err := engine.New(m, opt)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []Observation
	h := New(e, DefaultOptions()).Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := WithObserver(r.Context(), func(o Observation) { mu.Lock(); got = append(got, o); mu.Unlock() })
		h.ServeHTTP(w, r.WithContext(ctx))
	}))
	t.Cleanup(func() { srv.Close(); e.Close() })
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = srv.URL + "/v1"
	client := openai.NewClientWithConfig(cfg)
	ctx := context.Background()

	seed := 4
	req := openai.ChatCompletionRequest{
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "List the files."}},
		Tools:    []openai.Tool{bashTool}, ToolChoice: "required", Seed: &seed, MaxTokens: 200,
		Stream: true, StreamOptions: &openai.StreamOptions{IncludeUsage: true},
	}
	stream, err := client.CreateChatCompletionStream(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	out := drain(t, stream)
	req.MaxTokens = 1 << 30 // past the context: refused before the engine takes it
	if _, err := client.CreateChatCompletionStream(ctx, req); err == nil {
		t.Fatal("a request past the context was accepted")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("%d observations", len(got))
	}
	o := got[0]
	if o.Err != nil || o.Finish != string(out.finish) || o.Usage.PromptTokens != out.usage.PromptTokens || o.Usage.CompletionTokens != out.usage.CompletionTokens {
		t.Errorf("observation %+v, client usage %+v", o, out.usage)
	}
	if len(o.Calls) != 1 || len(out.calls) != 1 || o.Calls[0].ID != out.calls[0].ID || o.Calls[0].Function.Name != "bash" || o.Calls[0].Function.Arguments != out.calls[0].Function.Arguments {
		t.Errorf("calls %+v, client got %+v", o.Calls, out.calls)
	}
	if o.Accepted.IsZero() || o.FirstOutput.Before(o.Accepted) || o.End.Before(o.FirstOutput) {
		t.Errorf("times accepted %v, first output %v, end %v", o.Accepted, o.FirstOutput, o.End)
	}
	if bad := got[1]; bad.Err == nil || !bad.Accepted.IsZero() || !bad.FirstOutput.IsZero() || bad.Finish != "" {
		t.Errorf("refused request: %+v", bad)
	}
}
