package external

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	openai "github.com/sashabaranov/go-openai"
	"github.com/sashabaranov/go-openai/jsonschema"

	"jspark/agent/record"
	"jspark/backend/engine"
	"jspark/backend/model"
	"jspark/backend/server"
	"jspark/kernels/cpu"
)

// merge adds a streamed delta to the message, as a client assembles it.
func merge(m *openai.ChatCompletionMessage, d openai.ChatCompletionStreamChoiceDelta) {
	m.Content += d.Content
	for _, tc := range d.ToolCalls {
		i := len(m.ToolCalls)
		if tc.Index != nil {
			i = *tc.Index
		}
		for len(m.ToolCalls) <= i {
			m.ToolCalls = append(m.ToolCalls, openai.ToolCall{Type: openai.ToolTypeFunction})
		}
		c := &m.ToolCalls[i]
		if tc.ID != "" {
			c.ID = tc.ID
		}
		c.Function.Name += tc.Function.Name
		c.Function.Arguments += tc.Function.Arguments
	}
}

// recorderOnEngine is a recorder (session key r/s0) in front of the real
// engine's server, whose first handler returns only after the second
// request arrived: a streaming client has its answer at [DONE], before the
// handler ends, and a fast agent's next request may name the calls first.
// It returns the trajectory and the steps reported; at the test's end it
// checks that every request reached the server with the recorder's key.
func recorderOnEngine(t *testing.T) (*recorder, *bytes.Buffer, func() []record.Request) {
	m, _, err := model.Open("", cpu.New(2))
	if err != nil {
		t.Fatal(err)
	}
	opt := engine.DefaultOptions()
	opt.Log, opt.KVBlocks = io.Discard, 1024
	e, err := engine.New(m, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	api := server.New(e, server.DefaultOptions()).Handler()
	second := make(chan struct{})
	var served atomic.Int32
	var keys sync.Map // request number → X-Session-Id
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := served.Add(1)
		keys.Store(n, r.Header.Get("X-Session-Id"))
		if n == 2 {
			close(second)
		}
		api.ServeHTTP(w, r)
		if n == 1 {
			select {
			case <-second:
			case <-time.After(10 * time.Second):
				t.Error("the second request never came")
			}
		}
	})
	var traj bytes.Buffer
	rec := newRecorder(slow, "s0", time.Now(), func() bool { return false }, &traj)
	rec.key = "r/s0"
	t.Cleanup(func() {
		keys.Range(func(n, key any) bool {
			if key != "r/s0" {
				t.Errorf("request %v reached the server with X-Session-Id %q, want the recorder's r/s0", n, key)
			}
			return true
		})
	})
	var (
		stepMu sync.Mutex
		steps  []record.Request
	)
	rec.onStep = func(r *record.Request) {
		stepMu.Lock()
		steps = append(steps, *r)
		stepMu.Unlock()
	}
	return rec, &traj, func() []record.Request {
		stepMu.Lock()
		defer stepMu.Unlock()
		return append([]record.Request(nil), steps...)
	}
}

// chatStreamer streams chat requests to base as a client would, and
// returns the assembled reply and the usage.
func chatStreamer(t *testing.T, base string) func(openai.ChatCompletionRequest) (openai.ChatCompletionMessage, *openai.Usage, error) {
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = base
	client := openai.NewClientWithConfig(cfg)
	return func(req openai.ChatCompletionRequest) (openai.ChatCompletionMessage, *openai.Usage, error) {
		req.Stream, req.StreamOptions = true, &openai.StreamOptions{IncludeUsage: true}
		st, err := client.CreateChatCompletionStream(context.Background(), req)
		if err != nil {
			return openai.ChatCompletionMessage{}, nil, err
		}
		defer st.Close()
		a := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant}
		var u *openai.Usage
		for {
			ch, err := st.Recv()
			if errors.Is(err, io.EOF) {
				return a, u, nil
			}
			if err != nil {
				t.Fatal(err)
			}
			if ch.Usage != nil {
				u = ch.Usage
			}
			for _, c := range ch.Choices {
				merge(&a, c.Delta)
			}
		}
	}
}

// The recorder in front of the real engine's server records what a client
// (here a scripted one standing in for an external agent) did: the server's
// times and token counts, the calls its outputs made, their exit codes from
// the agent's next history, a call the agent added itself, and an error.
func TestRecorderRecordsFromTheServerSide(t *testing.T) {
	rec, traj, steps := recorderOnEngine(t)
	srv := httptest.NewServer(rec)
	defer srv.Close()
	stream := chatStreamer(t, srv.URL+"/v1")
	bash := openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{Name: "bash",
		Parameters: jsonschema.Definition{Type: jsonschema.Object, Required: []string{"command"}, Properties: map[string]jsonschema.Definition{"command": {Type: jsonschema.String}}}}}
	msgs := []openai.ChatCompletionMessage{{Role: "system", Content: "You are a coding agent."}, {Role: "user", Content: "List the files."}}
	seed := 1
	reply, u1, err := stream(openai.ChatCompletionRequest{Messages: msgs, Tools: []openai.Tool{bash}, ToolChoice: "required", MaxTokens: 60, Seed: &seed})
	if err != nil || len(reply.ToolCalls) != 1 {
		t.Fatalf("first request: %v %+v", err, reply)
	}
	made := reply.ToolCalls[0]
	// The agent ran the call (exit 2) and one more of its own making.
	reply.ToolCalls = append(reply.ToolCalls, openai.ToolCall{ID: "own-1", Type: "function", Function: openai.FunctionCall{Name: "read", Arguments: `{"path":"a"}`}})
	msgs = append(msgs, reply,
		openai.ChatCompletionMessage{Role: "tool", ToolCallID: made.ID, Content: "ls: x: No such file\nCommand exited with code 2"},
		openai.ChatCompletionMessage{Role: "tool", ToolCallID: "own-1", Content: "hello"})
	_, u2, err := stream(openai.ChatCompletionRequest{Messages: msgs, Tools: []openai.Tool{bash}, ToolChoice: "none", MaxTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := stream(openai.ChatCompletionRequest{Messages: msgs, MaxTokens: 1 << 30}); err == nil {
		t.Fatal("a request past the context was accepted")
	}

	// A client has its answer before the handler returns and reports its
	// step: Close waits for every handler.
	srv.Close()
	got := rec.requests()
	if len(got) != 3 || len(steps()) != 3 {
		t.Fatalf("%d requests, %d steps", len(got), len(steps()))
	}
	two := 2
	wantCalls := []record.Call{
		{ID: made.ID, Name: "bash", Args: made.Function.Arguments, ArgsBytes: len(made.Function.Arguments), ExitCode: &two},
		{ID: "own-1", Name: "read", Args: `{"path":"a"}`, ArgsBytes: 12},
	}
	if d := cmp.Diff(wantCalls, got[0].Calls); d != "" {
		t.Errorf("first request's calls (-want +got):\n%s", d)
	}
	recordedAsServed(t, got, u1, u2)
	var first map[string]any
	if json.Unmarshal(rec.first, &first) != nil || first["tool_choice"] != "required" {
		t.Errorf("first payload %s", rec.first)
	}
	secondStepHistory(t, traj.String(), made.ID)
}

// recordedAsServed: the two served requests have the client's usage, times
// in order and the engine's timing; the refused third has an HTTP error and
// no timing or TTFT.
func recordedAsServed(t *testing.T, got []record.Request, u1, u2 *openai.Usage) {
	t.Helper()
	for i, u := range []*openai.Usage{u1, u2} {
		q := got[i]
		if q.Turn != i || q.PromptTokens != u.PromptTokens || q.CompletionTokens != u.CompletionTokens || q.CachedTokens != u.PromptTokensDetails.CachedTokens || q.Error != "" {
			t.Errorf("request %d: %+v, the client's usage %+v", i, q, u)
		}
		if q.TTFT < 0 || q.Sent < 0 || q.End < q.Sent+q.TTFT {
			t.Errorf("request %d times: sent %.3f ttft %.3f end %.3f", i, q.Sent, q.TTFT, q.End)
		}
		if q.Timing == nil || q.Timing.PrefillSec <= 0 {
			t.Errorf("request %d: the engine's timing %+v", i, q.Timing)
		}
	}
	if got[2].Timing != nil {
		t.Errorf("the refused request has a timing %+v", got[2].Timing)
	}
	if got[1].CachedTokens == 0 || got[0].Finish == "" {
		t.Errorf("second request reused no prefix (%d cached) or the first has no finish (%q)", got[1].CachedTokens, got[0].Finish)
	}
	if q := got[2]; !strings.HasPrefix(q.Error, "HTTP 400: ") || !strings.Contains(q.Error, "maximum context length") || q.TTFT != -1 {
		t.Errorf("refused request: %+v", q)
	}
}

// secondStepHistory: the trajectory has three lines, and the second
// request's holds what the agent sent new: its reply with both calls, then
// both results.
func secondStepHistory(t *testing.T, traj, madeID string) {
	t.Helper()
	// Lines are written as handlers end, which need not be arrival order
	// (the refused request may end before the second one's handler).
	lines := strings.Split(strings.TrimSpace(traj), "\n")
	var st externalStep
	for _, l := range lines {
		var s externalStep
		if json.Unmarshal([]byte(l), &s) == nil && s.Request != nil && s.Request.Turn == 1 {
			st = s
		}
	}
	if len(lines) != 3 || st.Request == nil {
		t.Fatalf("trajectory:\n%s", traj)
	}
	if len(st.History) != 3 || st.History[0].Role != "assistant" || len(st.History[0].Calls) != 2 || st.History[1].CallID != madeID || st.History[2].Text != "hello" {
		t.Errorf("second step's history %+v", st.History)
	}
}

// A Responses API history (what Codex sends) reads the same way.
func TestResponsesHistory(t *testing.T) {
	body := `{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"fix it"}]},
		{"type":"function_call","call_id":"c1","name":"shell","arguments":"{\"command\":[\"ls\"]}"},
		{"type":"function_call_output","call_id":"c1","output":"{\"output\":\"x\",\"metadata\":{\"exit_code\":1}}"}]}`
	items := parseHistory([]byte(body))
	want := []historyItem{
		{Role: "user", Text: "fix it"},
		{Role: "assistant", Calls: []record.Call{{ID: "c1", Name: "shell", Args: `{"command":["ls"]}`, ArgsBytes: 18}}},
		{Role: "tool", Text: `{"output":"x","metadata":{"exit_code":1}}`, CallID: "c1"},
	}
	if d := cmp.Diff(want, items); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if c := shellExit("shell", items[2].Text); c == nil || *c != 1 {
		t.Errorf("exit %v", c)
	}
	if c := shellExit("bash", "all good"); c == nil || *c != 0 {
		t.Errorf("a shell result stating no code: %v", c)
	}
	if shellExit("read", "exit code 3") != nil {
		t.Error("a read has an exit code")
	}
	if got := parseHistory([]byte(`{"input":"just text"}`)); len(got) != 1 || got[0].Text != "just text" {
		t.Errorf("string input: %+v", got)
	}
}
