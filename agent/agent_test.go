package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	openai "github.com/sashabaranov/go-openai"

	"jspark/agent/record"
	"jspark/agent/report"
	"jspark/agent/target"
	"jspark/recipes"
)

// scripted is an OpenAI-compatible backend that answers from a script: the
// loop under test is the agent's, so the model's side is a test double here
// (the real engine runs behind `jspark work` in cmd/jspark's tests).
type scripted struct {
	mu      sync.Mutex
	replies []func(w http.ResponseWriter, req openai.ChatCompletionRequest)
	got     []openai.ChatCompletionRequest
	session []string // each request's X-Session-Id
	keys    []string // each request's Idempotency-Key
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req openai.ChatCompletionRequest
	json.NewDecoder(r.Body).Decode(&req)
	s.mu.Lock()
	s.got = append(s.got, req)
	s.session = append(s.session, r.Header.Get("X-Session-Id"))
	s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
	n := len(s.got) - 1
	s.mu.Unlock()
	if n >= len(s.replies) {
		<-r.Context().Done() // nothing more to say: hang until the cut
		return
	}
	s.replies[n](w, req)
}

func sse(w http.ResponseWriter, chunks ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, c := range chunks {
		fmt.Fprintf(w, "data: %s\n\n", c)
		w.(http.Flusher).Flush()
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func toolCall(name, args string) func(http.ResponseWriter, openai.ChatCompletionRequest) {
	return func(w http.ResponseWriter, _ openai.ChatCompletionRequest) {
		a, _ := json.Marshal(args)
		sse(w,
			`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
			fmt.Sprintf(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":%q}}]}}]}`, name),
			fmt.Sprintf(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":%s}}]}}]}`, a),
			`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
			`{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120,"prompt_tokens_details":{"cached_tokens":96}}}`)
	}
}

func text(s string) func(http.ResponseWriter, openai.ChatCompletionRequest) {
	return func(w http.ResponseWriter, _ openai.ChatCompletionRequest) {
		sse(w, fmt.Sprintf(`{"choices":[{"index":0,"delta":{"content":%q},"finish_reason":"stop"}]}`, s))
	}
}

func contextFull(w http.ResponseWriter, _ openai.ChatCompletionRequest) {
	w.WriteHeader(400)
	io.WriteString(w, `{"error":{"message":"too long","type":"invalid_request_error","param":"max_tokens","code":"context_length_exceeded"}}`)
}

const recipeYAML = `name: t
system: be brief
tools: [bash, write, read]
sampling: {max_tokens: 32, seed: 1, tool_choice: required}
nudge: {message: "use a tool", max: 1}
shell: {timeout: 5s, output_limit: 500}
tasks:
  - id: a
    kind: code
    prompt: make it
    files: {in.txt: "seed\n"}
rounds:
  - {name: one, concurrency: 1, tasks: [a]}
  - {name: one-repeat, repeat_of: one}
`

func runOne(t *testing.T, backend *scripted, window time.Duration) (*record.Work, string) {
	t.Helper()
	srv := httptest.NewServer(backend)
	defer srv.Close()
	r, err := recipes.Parse("t.yaml", []byte(recipeYAML))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	res, err := Work(context.Background(), WorkOptions{Recipe: r, Round: "one", Backends: []target.Backend{{URL: srv.URL + "/v1", Model: "m"}}, Window: window, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	return res, out
}

func TestSessionRunsToolsUntilTheCut(t *testing.T) {
	b := &scripted{replies: []func(http.ResponseWriter, openai.ChatCompletionRequest){
		toolCall("bash", `{"command":"cat in.txt; (exit 3)"}`),
		toolCall("write", `{"path":"out/x.txt","content":"made"}`),
		contextFull,
		toolCall("nosuch", `{}`),
		text("done?"),
		toolCall("read", `{"path":"out/x.txt"}`),
	}}
	res, out := runOne(t, b, 3*time.Second)
	s := res.Rounds[0].Sessions[0]
	if s.End != record.EndCut {
		t.Errorf("end %s, want cut", s.End)
	}
	if iso := res.Rounds[0].Isolation; iso == nil || iso.Root == "" || iso.Namespaces != s.Isolated {
		t.Errorf("results.json must say what confined the sandboxes: %+v", iso)
	}
	// Six scripted answers, then a seventh request hangs until the cut.
	if len(s.Requests) != 7 || !s.Requests[6].Cut {
		t.Fatalf("%d requests: %+v", len(s.Requests), s.Requests)
	}
	keys := map[string]bool{}
	for i, id := range b.session {
		if id != "one/s0-a" {
			t.Errorf("request %d: X-Session-Id %q, want round/session one/s0-a", i, id)
		}
		// Each request its own key: a dropped keep-alive is resent (session.go).
		if k := b.keys[i]; k == "" || keys[k] {
			t.Errorf("request %d: Idempotency-Key %q, want a new one", i, k)
		}
		keys[b.keys[i]] = true
	}
	if q := s.Requests[0]; q.Timing != nil || q.ToolsSec <= 0 {
		t.Errorf("a backend without usage.jspark: timing %+v, tools %.3f s", q.Timing, q.ToolsSec)
	}
	if line := report.WindowLine(res.Rounds[0]); !strings.HasSuffix(line, "not reported by this backend") {
		t.Errorf("window line %q", line)
	}
	q := s.Requests[0]
	if q.TTFT < 0 || q.End < q.Sent || q.PromptTokens != 100 || q.CachedTokens != 96 || q.CompletionTokens != 20 {
		t.Errorf("first request record: %+v", q)
	}
	if c := q.Calls[0]; c.Name != "bash" || c.ExitCode == nil || *c.ExitCode != 3 {
		t.Errorf("bash call: %+v", c)
	}
	if b, err := os.ReadFile(filepath.Join(out, "one", "s0-a", "workspace", "out", "x.txt")); err != nil || string(b) != "made" {
		t.Errorf("write did not reach the workspace: %q %v", b, err)
	}
	if s.ToolCalls != 4 || s.NonzeroExits != 1 || s.APIErrors != 0 || !s.Requests[2].Trimmed || !s.Requests[3].Calls[0].Failed {
		t.Errorf("counts: tools %d nonzero %d api errors %d, trimmed %v", s.ToolCalls, s.NonzeroExits, s.APIErrors, s.Requests[2].Trimmed)
	}

	sentAsScripted(t, b.got)
	trajectoryHasEveryRequest(t, out)
	bodiesAreWhatWasSent(t, out, b.got)
}

// bodiesAreWhatWasSent: the session's bodies file holds every request the
// server got, in order, the cut one too: what a replay re-sends.
func bodiesAreWhatWasSent(t *testing.T, out string, got []openai.ChatCompletionRequest) {
	t.Helper()
	bodies, err := record.ReadBodies(filepath.Join(out, "one", "s0-a", record.BodiesFile))
	if err != nil || len(bodies) != len(got) {
		t.Fatalf("%d bodies for %d requests: %v", len(bodies), len(got), err)
	}
	for i, b := range bodies {
		var req openai.ChatCompletionRequest
		if err := json.Unmarshal(b.Bytes(), &req); err != nil || b.Path != "/chat/completions" {
			t.Fatalf("body %d: %s %v", i, b.Path, err)
		}
		if d := cmp.Diff(got[i], req); d != "" {
			t.Errorf("body %d is not what the server got (-got +recorded):\n%s", i, d)
		}
	}
}

// sentAsScripted: what the model was sent: the tool result of bash, then the
// trimmed history after the context error, then the nudge after plain text.
func sentAsScripted(t *testing.T, got []openai.ChatCompletionRequest) {
	t.Helper()
	if m := got[1].Messages[3]; m.Role != "tool" || m.ToolCallID != "c1" || m.Content != "seed\n[exit code 3]" {
		t.Errorf("bash result message: %+v", m)
	}
	if len(got[3].Messages) >= len(got[2].Messages) || got[3].Messages[1].Content != "make it" {
		t.Errorf("history not trimmed after context_length_exceeded: %d then %d messages", len(got[2].Messages), len(got[3].Messages))
	}
	if last := got[5].Messages[len(got[5].Messages)-1]; last.Role != "user" || last.Content != "use a tool" {
		t.Errorf("no nudge after a reply without a tool call: %+v", last)
	}
	if got[0].ToolChoice != "required" || len(got[0].Tools) != 3 || !got[0].Stream || !got[0].StreamOptions.IncludeUsage {
		t.Errorf("request shape: %+v", got[0])
	}
}

// trajectoryHasEveryRequest: the trajectory has one line per request,
// written as they happened, and the round's files are there.
func trajectoryHasEveryRequest(t *testing.T, out string) {
	t.Helper()
	f, err := os.Open(filepath.Join(out, "one", "s0-a", "trajectory.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := 0
	for sc := bufio.NewScanner(f); sc.Scan(); lines++ {
		var st step
		if err := json.Unmarshal(sc.Bytes(), &st); err != nil || st.Request.Turn != lines {
			t.Errorf("line %d: %v %+v", lines, err, st.Request)
		}
	}
	if lines != 7 {
		t.Errorf("%d trajectory lines, want 7", lines)
	}
	for _, name := range []string{"results.json", "report.html", "one/s0-a/initial_request.json"} {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Error(err)
		}
	}
}

func TestNudgesRunOut(t *testing.T) {
	b := &scripted{replies: []func(http.ResponseWriter, openai.ChatCompletionRequest){text("a"), text("b"), text("c")}}
	res, _ := runOne(t, b, 10*time.Second)
	s := res.Rounds[0].Sessions[0]
	if s.End != record.EndNoToolCall || len(s.Requests) != 2 {
		t.Errorf("end %s after %d requests, want no_tool_call after 2 (one nudge)", s.End, len(s.Requests))
	}
}

func TestRepeatRunsItsFirstRound(t *testing.T) {
	r, err := recipes.Parse("t.yaml", []byte(recipeYAML))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Rounds(r, "one-repeat")
	if err != nil || len(rs) != 2 || rs[0].Name != "one" || rs[1].Name != "one-repeat" {
		t.Fatalf("%v %v", rs, err)
	}
	if _, err := Rounds(r, "two"); err == nil || err.Error() != `recipe t has no round "two" (rounds: one, one-repeat, or all)` {
		t.Errorf("%v", err)
	}
}

// The error of writing a session's initial_request.json is the round's.
func TestInitialRequestWriteErrorIsReported(t *testing.T) {
	srv := httptest.NewServer(&scripted{replies: []func(http.ResponseWriter, openai.ChatCompletionRequest){text("x"), text("y")}})
	defer srv.Close()
	r, err := recipes.Parse("t.yaml", []byte(recipeYAML))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	// A directory where the file goes: the write fails, even as root.
	if err := os.MkdirAll(filepath.Join(out, "one", "s0-a", "initial_request.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = Work(context.Background(), WorkOptions{Recipe: r, Round: "one", Backends: []target.Backend{{URL: srv.URL + "/v1", Model: "m"}}, Window: 2 * time.Second, Out: out})
	if err == nil || !strings.Contains(err.Error(), "round one: session s0-a: open ") || !strings.Contains(err.Error(), "initial_request.json: is a directory") {
		t.Errorf("error %v", err)
	}
}

// A thinking model's reasoning is output (it starts the TTFT clock's stop)
// and goes back with its turn.
func TestReasoningGoesBack(t *testing.T) {
	b := &scripted{replies: []func(http.ResponseWriter, openai.ChatCompletionRequest){
		func(w http.ResponseWriter, _ openai.ChatCompletionRequest) {
			sse(w,
				`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
				`{"choices":[{"index":0,"delta":{"reasoning_content":"List it "}}]}`,
				`{"choices":[{"index":0,"delta":{"reasoning_content":"first."}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`)
		},
	}}
	res, _ := runOne(t, b, 2*time.Second)
	q := res.Rounds[0].Sessions[0].Requests[0]
	if q.TTFT < 0 || q.StreamedTokens != 3 || len(q.Calls) != 1 {
		t.Fatalf("first request: %+v", q)
	}
	if len(b.got) < 2 {
		t.Fatalf("%d requests", len(b.got))
	}
	if m := b.got[1].Messages[2]; m.Role != "assistant" || m.ReasoningContent != "List it first." || len(m.ToolCalls) != 1 {
		t.Fatalf("assistant turn sent back: %+v", m)
	}
}
