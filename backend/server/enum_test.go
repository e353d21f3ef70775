// These run at full scale (an enum of 100,000 and 800,000 values), which the
// race detector slows past the 2 s compile budget: the plain run covers them.

//go:build !race

package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sashabaranov/go-openai"

	"jspark/backend/engine"
)

// enumBody is a chat request whose response_format is one string enum of
// n values of about 12 bytes each.
func enumBody(n int) string {
	var b strings.Builder
	b.WriteString(`{"messages":[{"role":"user","content":"Pick one"}],"max_tokens":8,"response_format":{"type":"json_schema","json_schema":{"name":"pick","schema":{"enum":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"value-%06d"`, i)
	}
	b.WriteString(`]}}}}`)
	return b.String()
}

// stepLog keeps the engine's step traces for a test.
type stepLog struct {
	mu    sync.Mutex
	steps []engine.StepTrace
}

func (l *stepLog) add(t engine.StepTrace) { l.mu.Lock(); l.steps = append(l.steps, t); l.mu.Unlock() }

// last is the number of the latest step (-1 before the first).
func (l *stepLog) last() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.steps) == 0 {
		return -1
	}
	return l.steps[len(l.steps)-1].Step
}

func (l *stepLog) since(step int64) []engine.StepTrace {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, _ := slices.BinarySearchFunc(l.steps, step, func(t engine.StepTrace, s int64) int { return cmp.Compare(t.Step, s) })
	return slices.Clone(l.steps[i:])
}

// onEOF calls fn once, when r has been read to its end.
type onEOF struct {
	r    io.ReadCloser
	fn   func()
	done bool
}

func (o *onEOF) Read(p []byte) (int, error) {
	n, err := o.r.Read(p)
	if err == io.EOF && !o.done {
		o.done = true
		o.fn()
	}
	return n, err
}

func (o *onEOF) Close() error { return o.r.Close() }

// TestHugeEnumDoesNotStallOtherClients: a response_format enum of 100,000
// values (1.3 MB; it once held the engine for 18.5 s) is compiled in its
// request's handler, outside the engine loop, and decoded beside other
// requests: a stream running beside it never waits on it. Stated in the
// engine's steps, not in time, so a loaded machine cannot fail it: the
// engine goes on stepping the other stream while the huge request's body
// is compiled (between the server's read of it and its admission), and
// from its admission until it ends, the other stream gets a token in
// every step, beside each of the huge request's own.
func TestHugeEnumDoesNotStallOtherClients(t *testing.T) {
	var log stepLog
	f := start(t, func(o *engine.Options) { o.OnStep, o.Speculate = log.add, 0 }, nil)
	// A story that cannot end by itself, not streamed (so no client's
	// reading can pause it), ended below.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	storyDone := make(chan struct{})
	go func() {
		defer close(storyDone)
		req, _ := http.NewRequestWithContext(ctx, "POST", f.srv.URL+"/v1/chat/completions", strings.NewReader(
			`{"messages":[{"role":"user","content":"Tell me a story"}],"ignore_eos":true,"max_tokens":20000}`))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	guard := time.Now().Add(120 * time.Second) // a hang guard, not a timing
	for f.e.Metrics().Snapshot().GenerationTokens < 20 && time.Now().Before(guard) {
		time.Sleep(5 * time.Millisecond)
	}
	var read atomic.Int64 // the step at which the server had the huge body
	read.Store(-1)
	h := f.srv.Config.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = &onEOF{r: r.Body, fn: func() { read.Store(log.last()) }}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	resp, out := post(t, srv.URL+"/v1/chat/completions", "", enumBody(100000))
	end := log.last()
	if resp.StatusCode != 200 || !strings.Contains(out, `"content":"\"value-`) {
		t.Fatalf("huge enum: %d %.300s", resp.StatusCode, out)
	}
	var usage struct {
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	json.Unmarshal([]byte(out), &usage)
	steps := log.since(read.Load())
	admitted := slices.IndexFunc(steps, func(s engine.StepTrace) bool { return len(s.Prefill) > 0 })
	if read.Load() < 0 || admitted < 0 {
		t.Fatalf("the huge request was never admitted (body read at step %d)", read.Load())
	}
	// Stepping went on while the grammar compiled: the story's steps.
	compiling := steps[:admitted]
	for _, s := range compiling {
		if s.Decode != 1 {
			t.Fatalf("step %d, while the huge request was prepared, decoded %d streams, not the story alone", s.Step, s.Decode)
		}
	}
	// From its admission, the story decodes in every step, and in every
	// step that decodes one of the huge request's tokens (all but the
	// first, which its prefill gives).
	both := 0
	for _, s := range steps[admitted:] {
		if s.Step > end {
			break
		}
		if s.Decode < 1 {
			t.Fatalf("step %d, while the huge request ran, gave the story no token", s.Step)
		}
		if s.Decode == 2 {
			both++
		}
	}
	t.Logf("the story took %d steps while the huge request was prepared, then %d beside its %d tokens", len(compiling), both, usage.Usage.CompletionTokens)
	if len(compiling) == 0 {
		t.Errorf("no step ran while the huge request's grammar compiled: the compile held the engine")
	}
	if both != usage.Usage.CompletionTokens-1 {
		t.Errorf("the story decoded beside %d of the huge request's %d decoding steps", both, usage.Usage.CompletionTokens-1)
	}
	cancel()
	<-storyDone
}

// TestEnumPastTheBudgetIs400: a schema past the compile budget (an enum of
// more than 8 MiB) is refused with a 400 naming response_format, before it
// reaches the engine; the server goes on serving.
func TestEnumPastTheBudgetIs400(t *testing.T) {
	f := start(t, nil, nil)
	resp, out := post(t, f.srv.URL+"/v1/chat/completions", "", enumBody(800000))
	if resp.StatusCode != 400 || !strings.Contains(out, `"param":"response_format"`) || !strings.Contains(out, "too large to compile") {
		t.Fatalf("%d %.300s", resp.StatusCode, out)
	}
	_, err := f.client.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "x"}}, MaxTokens: 3})
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("after the refusal: %v", err)
	}
}
