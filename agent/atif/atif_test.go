package atif

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"jspark/agent/record"
)

// session writes a session folder: its trajectory lines, first request and
// bodies (each nil for none).
func session(t *testing.T, lines []string, first string, bodies []string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("trajectory.jsonl", strings.Join(lines, "\n")+"\n")
	if first != "" {
		write("initial_request.json", first)
	}
	for _, b := range bodies {
		if err := record.AppendBody(filepath.Join(dir, record.BodiesFile), "/chat/completions", []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// written is the ATIF file Write made in dir, validated.
func written(t *testing.T, dir string, in Info) *Trajectory {
	t.Helper()
	if err := Write(dir, in); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, File))
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(b); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	var tr Trajectory
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatal(err)
	}
	return &tr
}

// shape is a trajectory's steps as "source:message[calls|results]".
func shape(tr *Trajectory) []string {
	var out []string
	for _, s := range tr.Steps {
		x := s.Source + ":" + s.Message
		for _, c := range s.ToolCalls {
			var args bytes.Buffer
			json.Compact(&args, c.Arguments)
			x += " call " + c.ToolCallID + " " + c.FunctionName + args.String()
		}
		if s.Observation != nil {
			for _, r := range s.Observation.Results {
				x += " result " + r.SourceCallID + "=" + r.Content
			}
		}
		out = append(out, x)
	}
	return out
}

func sameShape(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("steps:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestOwnLoopSession: jspark's loop's session becomes its system prompt and
// task, an agent step per request (reply, calls, results, counts), and the
// nudge between; a cut request's step has its timings and no counts; the
// totals are the finished requests'.
func TestOwnLoopSession(t *testing.T) {
	dir := session(t, []string{
		`{"session":"s0","request":{"turn":0,"sent":0.5,"ttft":0.2,"end":1,"prompt_tokens":40,"completion_tokens":9,"cached_tokens":0,"streamed_tokens":9,"finish_reason":"tool_calls","tool_calls":[{"id":"c1","name":"bash","arguments":"{\"command\": \"ls\"}","arguments_bytes":17}],"tools_s":0.1},` +
			`"reply":{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"command\": \"ls\"}"}}]},` +
			`"tool_results":[{"role":"tool","content":"a.go","tool_call_id":"c1"}]}`,
		`{"session":"s0","request":{"turn":1,"sent":1.2,"ttft":0.1,"end":1.5,"prompt_tokens":60,"completion_tokens":3,"cached_tokens":40,"streamed_tokens":3,"finish_reason":"stop"},` +
			`"reply":{"role":"assistant","content":"Done.","reasoning_content":"It is there."}}`,
		`{"session":"s0","request":{"turn":2,"sent":1.6,"ttft":null,"end":2,"prompt_tokens":0,"completion_tokens":0,"cached_tokens":0,"streamed_tokens":0,"cut":true}}`,
	}, `{"model":"m","messages":[{"role":"system","content":"You code."},{"role":"user","content":[{"type":"text","text":"Fix a.go"}]}]}`,
		[]string{`{"messages":[1]}`, `{"messages":[2]}`, `{"messages":[{"role":"user","content":"Go on."}]}`})
	start := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	s := &record.Session{Name: "s0-fix", Task: "fix", End: record.EndCut}
	tr := written(t, dir, Info{Round: "c3", Started: start, Model: "m", Session: s})
	sameShape(t, shape(tr), []string{
		"system:You code.",
		"user:Fix a.go",
		`agent:Let me look. call c1 bash{"command":"ls"} result c1=a.go`,
		"agent:Done.",
		"user:Go on.",
		"agent:",
	})
	if tr.SessionID != "c3/s0-fix" || tr.Agent.Name != "jspark" || tr.Agent.ModelName != "m" || tr.Steps[3].ReasoningContent != "It is there." {
		t.Errorf("root %q %+v, reasoning %q", tr.SessionID, tr.Agent, tr.Steps[3].ReasoningContent)
	}
	m := tr.Steps[3].Metrics
	if m == nil || *m.PromptTokens != 60 || *m.CompletionTokens != 3 || *m.CachedTokens != 40 || tr.Steps[3].Timestamp != "2026-12-06T08:00:01.2Z" {
		t.Errorf("second request's step: %+v at %s", m, tr.Steps[3].Timestamp)
	}
	if cut := tr.Steps[5].Metrics; cut == nil || cut.PromptTokens != nil || cut.Extra["cut"] != true {
		t.Errorf("the cut request's metrics: %+v", cut)
	}
	f := tr.FinalMetrics
	if f.TotalPromptTokens != 100 || f.TotalCompletionTokens != 12 || f.TotalCachedTokens != 40 || f.TotalSteps != 6 || f.Extra["end"] != "cut" {
		t.Errorf("final metrics %+v", f)
	}
}

// TestExternalSession: an external agent's trajectory (what it sent new
// with each request) becomes the same steps: a request's reply is in the
// next request's history, Responses' call items join their reply, and the
// last request's calls come from the record.
func TestExternalSession(t *testing.T) {
	dir := session(t, []string{
		`{"session":"s1","request":{"turn":0,"sent":0,"ttft":0.1,"end":1,"prompt_tokens":30,"completion_tokens":5,"cached_tokens":0,"streamed_tokens":5},` +
			`"history_added":[{"role":"developer","text":"Be brief."},{"role":"user","text":"Fix it"}]}`,
		`{"session":"s1","request":{"turn":1,"sent":2,"ttft":0.1,"end":3,"prompt_tokens":50,"completion_tokens":4,"cached_tokens":30,"streamed_tokens":4,"tool_calls":[{"id":"k2","name":"edit","arguments":"{\"path\":\"a","arguments_bytes":40}]},` +
			`"history_added":[{"role":"assistant","text":"Looking."},{"role":"assistant","tool_calls":[{"id":"k1","name":"read","arguments":"{}","arguments_bytes":2}]},{"role":"tool","text":"package a","tool_call_id":"k1"}]}`,
	}, "", nil)
	tr := written(t, dir, Info{Round: "c1", Trial: 2, Model: "m", Version: "0.73.1", Session: &record.Session{Name: "s1", Agent: "pi", End: record.EndAgentDone}})
	sameShape(t, shape(tr), []string{
		"system:Be brief.",
		"user:Fix it",
		"agent:Looking. call k1 read{} result k1=package a",
		`agent: call k2 edit{"raw":"{\"path\":\"a"}`,
	})
	if tr.SessionID != "c1/s1#2" || tr.Agent.Name != "pi" || tr.Agent.Version != "0.73.1" || tr.Steps[2].Timestamp != "" || tr.FinalMetrics.TotalPromptTokens != 80 {
		t.Errorf("agent %+v, timestamp %q, final %+v", tr.Agent, tr.Steps[2].Timestamp, tr.FinalMetrics)
	}
}

// TestNothingSentWritesNothing: a session cut before its first request has
// no step, and ATIF needs one: no file.
func TestNothingSentWritesNothing(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "trajectory.jsonl"), nil, 0o644)
	if err := Write(dir, Info{Session: &record.Session{Name: "s"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, File)); !os.IsNotExist(err) {
		t.Errorf("a file for a session without steps: %v", err)
	}
}

// TestBadTrajectoryNamesTheLine: a broken trajectory line is an error that
// names the file and line, and no file is written.
func TestBadTrajectoryNamesTheLine(t *testing.T) {
	dir := session(t, []string{`{"session":"s","request":{"turn":0}}`, `{"session":`}, "", nil)
	err := Write(dir, Info{Session: &record.Session{Name: "s"}})
	if err == nil || !strings.Contains(err.Error(), "trajectory.jsonl, line 2") {
		t.Fatalf("error %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, File)); !os.IsNotExist(err) {
		t.Errorf("a file was written: %v", err)
	}
}

// valid is a small trajectory in the RFC's shape, every kind of field used.
const valid = `{
  "schema_version": "ATIF-v1.4", "session_id": "r/s", "notes": "n", "extra": {},
  "agent": {"name": "a", "version": "1", "model_name": "m", "extra": {}},
  "final_metrics": {"total_prompt_tokens": 10, "total_completion_tokens": 2, "total_cached_tokens": 0, "total_cost_usd": 0, "total_steps": 3, "extra": {}},
  "steps": [
    {"step_id": 1, "source": "system", "message": "sys"},
    {"step_id": 2, "timestamp": "2026-12-06T08:00:00Z", "source": "user", "message": "task", "extra": {}},
    {"step_id": 3, "timestamp": "2026-12-06T08:00:01.5Z", "source": "agent", "model_name": "m", "reasoning_effort": "low",
     "message": "", "reasoning_content": "r",
     "tool_calls": [{"tool_call_id": "c1", "function_name": "bash", "arguments": {"command": "ls"}}],
     "observation": {"results": [{"source_call_id": "c1", "content": "a.go"}, {"content": null}]},
     "metrics": {"prompt_tokens": 10, "completion_tokens": 2, "cached_tokens": 0, "completion_token_ids": [5, 6], "logprobs": [-0.1, -0.2], "extra": {}}}
  ]
}`

// TestValidate: the field list's rules hold, each broken one is refused.
func TestValidate(t *testing.T) {
	if err := Validate([]byte(valid)); err != nil {
		t.Fatalf("a valid trajectory: %v", err)
	}
	for _, c := range []struct{ name, from, to, why string }{
		{"no session id", `"session_id": "r/s", `, ``, "missing property 'session_id'"},
		{"unknown version", `"ATIF-v1.4"`, `"ATIF-v9"`, "/schema_version"},
		{"agent without version", `"version": "1", `, ``, "missing property 'version'"},
		{"unknown root field", `"notes": "n"`, `"note": "n"`, "'note' not allowed"},
		{"unknown source", `"source": "user"`, `"source": "tool"`, "/steps/1/source"},
		{"step without message", `"message": "sys"`, `"extra": {}`, "missing property 'message'"},
		{"metrics on a user step", `"message": "task", "extra": {}`, `"message": "task", "metrics": {}`, "at '/steps/1': 'not' failed"},
		{"tool calls on a system step", `"message": "sys"`, `"message": "sys", "tool_calls": []`, "at '/steps/0': 'not' failed"},
		{"arguments not an object", `"arguments": {"command": "ls"}`, `"arguments": "ls"`, "arguments': got string, want object"},
		{"negative tokens", `"prompt_tokens": 10,`, `"prompt_tokens": -1,`, "prompt_tokens': minimum"},
		{"bad timestamp", `"2026-12-06T08:00:00Z"`, `"yesterday"`, "not valid date-time"},
		{"step ids out of order", `"step_id": 2,`, `"step_id": 4,`, "step_id 4, want 2"},
		{"result of no call", `"source_call_id": "c1"`, `"source_call_id": "c9"`, `"c9" names no tool call`},
		{"no steps", `"steps": [`, `"steps": [], "extra2": [`, "minItems: got 0, want 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := strings.Replace(valid, c.from, c.to, 1)
			if doc == valid {
				t.Fatalf("%q is not in the document", c.from)
			}
			if err := Validate([]byte(doc)); err == nil || !strings.Contains(err.Error(), c.why) {
				t.Errorf("error %v, want one saying %s", err, c.why)
			}
		})
	}
}

// FuzzBuild: whatever a trajectory holds, the export is valid ATIF or an
// error naming the file, never a panic; both shapes (jspark's loop, an
// external agent's) are tried.
func FuzzBuild(f *testing.F) {
	f.Add(`{"request":{"turn":0},"reply":{"role":"assistant","tool_calls":[{"id":"","function":{"name":"","arguments":"x"}}]},"tool_results":[{"role":"tool","tool_call_id":"q"}]}`)
	f.Add(`{"request":{"turn":0,"sent":1e300},"history_added":[{"role":"tool","text":"out"},{"role":"assistant","tool_calls":[{"id":"a"},{"id":"a"}]}]}`)
	f.Add(`{"history_added":[{"role":"assistant","text":"hi"}]}` + "\n" + `{"request":null,"reply":{"role":"user"}}`)
	f.Fuzz(func(t *testing.T, data string) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "trajectory.jsonl"), []byte(data), 0o644)
		for _, agent := range []string{"", "pi"} {
			in := Info{Round: "r", Started: time.Unix(0, 0), Session: &record.Session{Name: "s", Agent: agent}}
			if err := Write(dir, in); err != nil && !strings.Contains(err.Error(), "trajectory.jsonl") {
				t.Fatalf("agent %q: %v", agent, err)
			}
		}
	})
}
