package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"jspark/agent/record"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// hostile answers with raw stream chunks, as a broken or malicious endpoint
// might.
func hostile(chunks ...string) func(http.ResponseWriter, openai.ChatCompletionRequest) {
	return func(w http.ResponseWriter, _ openai.ChatCompletionRequest) { sse(w, chunks...) }
}

func callDelta(index int, name, args string) string {
	return fmt.Sprintf(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"id":"c%d","type":"function","function":{"name":%q,"arguments":%q}}]}}]}`, index, index, name, args)
}

// invalidThenBash runs a session whose first reply is bad and whose second
// is a good bash call, and returns the session's record.
func invalidThenBash(t *testing.T, bad func(http.ResponseWriter, openai.ChatCompletionRequest)) record.Session {
	t.Helper()
	b := &scripted{replies: []func(http.ResponseWriter, openai.ChatCompletionRequest){bad, toolCall("bash", `{"command":"echo after"}`)}}
	res, _ := runOne(t, b, 3*time.Second)
	s := res.Rounds[0].Sessions[0]
	if len(s.Requests) < 2 {
		t.Fatalf("%d requests: %+v", len(s.Requests), s.Requests)
	}
	// The session went on: the next request ran its call.
	if s.APIErrors != 1 || len(s.Requests[1].Calls) != 1 || *s.Requests[1].Calls[0].ExitCode != 0 {
		t.Errorf("api errors %d, then %+v", s.APIErrors, s.Requests[1])
	}
	return s
}

func TestToolCallIndexMinusOneIsAnAPIError(t *testing.T) {
	t.Parallel()
	s := invalidThenBash(t, hostile(callDelta(-1, "bash", `{"command":"ls"}`)))
	if q := s.Requests[0]; !strings.Contains(q.Error, "invalid stream: tool call index -1: the reply has 0 calls so far") || len(q.Calls) != 0 {
		t.Errorf("first request: %+v", q)
	}
}

func TestToolCallIndexMillionIsAnAPIError(t *testing.T) {
	t.Parallel()
	s := invalidThenBash(t, hostile(callDelta(0, "bash", `{"command":"ls"}`), callDelta(1000000, "bash", `{"command":"ls"}`)))
	q := s.Requests[0]
	if !strings.Contains(q.Error, "tool call index 1000000: the reply has 1 calls so far") {
		t.Errorf("first request: %+v", q)
	}
	// Nothing of an invalid reply runs, not even its valid first call.
	if s.ToolCalls != 2 || q.Calls[0].ExitCode != nil {
		t.Errorf("%d tool calls; first reply's call %+v", s.ToolCalls, q.Calls)
	}
}

func TestSixtyFiveCallsInOneReplyIsAnAPIError(t *testing.T) {
	t.Parallel()
	var chunks []string
	for i := range MaxCallsPerReply + 1 {
		chunks = append(chunks, callDelta(i, "bash", `{"command":"true"}`))
	}
	s := invalidThenBash(t, hostile(chunks...))
	if q := s.Requests[0]; !strings.Contains(q.Error, "more than 64 tool calls in one reply") {
		t.Errorf("first request: %+v", q)
	}
}

func TestSixtyFourCallsInOneReplyRun(t *testing.T) {
	t.Parallel()
	// Calls of a tool that does not exist: each runs at once (and fails).
	var chunks []string
	for i := range MaxCallsPerReply {
		chunks = append(chunks, callDelta(i, "nosuch", `{}`))
	}
	b := &scripted{replies: []func(http.ResponseWriter, openai.ChatCompletionRequest){hostile(chunks...)}}
	res, _ := runOne(t, b, 3*time.Second)
	s := res.Rounds[0].Sessions[0]
	if q := s.Requests[0]; q.Error != "" || len(q.Calls) != MaxCallsPerReply || !q.Calls[63].Failed {
		t.Errorf("first request: error %q, %d calls", q.Error, len(q.Calls))
	}
}

func TestHostileDeltaFieldsAreAPIErrors(t *testing.T) {
	long := strings.Repeat("n", maxNameBytes+1)
	for _, c := range []struct {
		name, chunk, want string
	}{
		{"second choice", `{"choices":[{"index":1,"delta":{"content":"x"}}]}`, "choice index 1: the request asked for one choice"},
		{"user role", `{"choices":[{"index":0,"delta":{"role":"user","content":"x"}}]}`, `delta role "user"`},
		{"call type", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"type":"shell","function":{"name":"bash"}}]}}]}`, `tool call 0 has type "shell", not function`},
		{"long name", callDelta(0, long, "{}"), "tool call 0: its name is over 256 bytes"},
		{"long id", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"` + long + `","function":{"name":"bash"}}]}}]}`, "tool call 0: its id is over 256 bytes"},
		{"negative usage", `{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":-4}}`, "usage has prompt 10, completion -4, cached 0 tokens"},
		{"cached past prompt", `{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":11}}}`, "usage has prompt 10, completion 4, cached 11 tokens"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := invalidThenBash(t, hostile(c.chunk))
			if q := s.Requests[0]; !strings.Contains(q.Error, "invalid stream: "+c.want) {
				t.Errorf("error %q, want %q", q.Error, c.want)
			}
		})
	}
}

func TestReplyOverItsBoundIsAnAPIError(t *testing.T) {
	a := newAssembler()
	piece := strings.Repeat("x", 1<<20)
	var err error
	for i := 0; err == nil && i < 40; i++ {
		err = a.choice(openai.ChatCompletionStreamChoice{Delta: openai.ChatCompletionStreamChoiceDelta{Content: piece}})
	}
	if err == nil || err.Error() != "invalid stream: the reply is over 33554432 bytes" || len(a.content) > maxReplyBytes {
		t.Errorf("%v after %d bytes", err, len(a.content))
	}
}

func TestEndlessResponseBodyIsCut(t *testing.T) {
	body := bounded(io.NopCloser(strings.NewReader(strings.Repeat("y", 100))), 64, errors.New("over 64"))
	b, err := io.ReadAll(body)
	if len(b) != 64 || err == nil || err.Error() != "over 64" {
		t.Errorf("%d bytes, %v", len(b), err)
	}
	exact := bounded(io.NopCloser(strings.NewReader(strings.Repeat("y", 64))), 64, errors.New("over 64"))
	if b, err := io.ReadAll(exact); len(b) != 64 || err != nil {
		t.Errorf("a body of exactly the bound: %d bytes, %v", len(b), err)
	}
	// Every response a session reads is bounded so.
	resp := bound(&http.Response{Body: io.NopCloser(strings.NewReader(""))})
	if bb, ok := resp.Body.(*boundedBody); !ok || bb.left != maxResponseBytes {
		t.Errorf("response body %T", resp.Body)
	}
}

// A 4 MiB write argument reaches the workspace whole; the records keep 16 KiB
// of it and say how long it was.
func TestHugeWriteArgumentIsClippedInRecords(t *testing.T) {
	t.Parallel()
	content := strings.Repeat("0123456789abcdef", 256<<10)
	args, _ := json.Marshal(map[string]string{"path": "big.txt", "content": content})
	b := &scripted{replies: []func(http.ResponseWriter, openai.ChatCompletionRequest){toolCall("write", string(args)), toolCall("bash", `{"command":"wc -c < big.txt"}`)}}
	// The window leaves time to stream 4 MiB and record both bodies under
	// -race on a loaded machine (over 3 s and 1 s a body there; 10 s
	// failed at load 10); the test ends at the cut.
	res, out := runOne(t, b, 20*time.Second)
	dir := filepath.Join(out, "one", "s0-a")
	if got, err := os.ReadFile(filepath.Join(dir, "workspace", "big.txt")); err != nil || string(got) != content {
		t.Fatalf("the write did not reach the workspace whole: %d bytes, %v", len(got), err)
	}
	marker := "bytes left out of this record …]"
	q := res.Rounds[0].Sessions[0].Requests[0]
	if c := q.Calls[0]; c.ArgsBytes != len(args) || len(c.Args) > record.Limit+100 || !strings.Contains(c.Args, fmt.Sprintf("of %d %s", len(args), marker)) {
		t.Errorf("results record: %d bytes kept of %d, marker %v", len(c.Args), c.ArgsBytes, strings.Contains(c.Args, marker))
	}
	traj, err := os.ReadFile(filepath.Join(dir, "trajectory.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(traj) > 4*record.Limit || !bytes.Contains(traj, []byte(fmt.Sprintf("of %d %s", len(args), marker))) {
		t.Errorf("trajectory is %d bytes", len(traj))
	}
	results, _ := os.ReadFile(filepath.Join(out, "results.json"))
	if len(results) > 4*record.Limit {
		t.Errorf("results.json is %d bytes", len(results))
	}
}
