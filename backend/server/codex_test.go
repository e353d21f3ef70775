package server

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// codexBody reads a request body Codex sent (testdata/codex/README.md).
func codexBody(t *testing.T, name string) *ResponsesRequest {
	t.Helper()
	b, err := os.ReadFile("testdata/codex/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var r ResponsesRequest
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

var namespaceChildren = []string{"close_agent", "resume_agent", "send_input", "spawn_agent", "wait_agent"}

// TestCodexNamespaceToolsReachThePrompt: Codex 0.171's own first request
// wraps its sub-agent functions in a namespace tool; the rendered prompt
// offers each of them as a function named namespace__name beside the plain
// ones, and the hosted web_search is not offered. Its second request sends
// the namespaced call back, which renders under the same flat name, so the
// prompt repeats what the model wrote.
func TestCodexNamespaceToolsReachThePrompt(t *testing.T) {
	f := start(t, nil, nil)
	s := New(f.e, DefaultOptions())
	r := codexBody(t, "0.171-turn1.json")
	cr, rt, err := r.chatRequest()
	if err != nil {
		t.Fatal(err)
	}
	_, text, err := s.chatPrompt(cr.Messages, cr.Tools, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	offered := regexp.MustCompile(`\{"type":"function","function":\{"name":"([^"]+)"`).FindAllStringSubmatch(text, -1)
	var names []string
	for _, m := range offered {
		names = append(names, m[1])
	}
	want := []string{"exec_command", "write_stdin", "request_user_input", "view_image"}
	for _, c := range namespaceChildren {
		want = append(want, "multi_agent_v1__"+c)
	}
	want = append(want, "get_goal", "create_goal", "update_goal")
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("the prompt offers %q, want %q", names, want)
	}
	if strings.Join(rt.skipped, ",") != "web_search" {
		t.Fatalf("not offered: %q", rt.skipped)
	}
	if n := rt.split("multi_agent_v1__spawn_agent"); n != (spacedName{"multi_agent_v1", "spawn_agent"}) {
		t.Fatalf("split %+v", n)
	}

	r2 := codexBody(t, "0.171-turn2-namespaced-call.json")
	cr2, _, err := r2.chatRequest()
	if err != nil {
		t.Fatal(err)
	}
	_, text2, err := s.chatPrompt(cr2.Messages, cr2.Tools, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text2, `{"name":"multi_agent_v1__close_agent","arguments":{"target":"nobody"}}`) {
		t.Fatalf("the namespaced call does not render under its flat name:\n%s", text2[max(0, len(text2)-600):])
	}
}

// lockedBuffer is a log a handler writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestNamespacedCallGoesBackSplit: a call of a flattened namespace function
// comes back as Codex routes it, with namespace and short name, streamed and
// not; the hosted tools the request offered are logged once, by name.
func TestNamespacedCallGoesBackSplit(t *testing.T) {
	log := &lockedBuffer{}
	f := start(t, nil, nil)
	srv := httptest.NewServer(New(f.e, serverOptions(func(o *Options) { o.Log = log })).Handler())
	defer srv.Close()
	body := `{"input":"Close the agent.","max_output_tokens":60,"tool_choice":"required","tools":[` +
		`{"type":"namespace","name":"multi_agent_v1","description":"Sub-agents.","tools":[{"type":"function","name":"close_agent","parameters":{"type":"object","properties":{"target":{"type":"string","maxLength":8}},"required":["target"],"additionalProperties":false}}]},` +
		`{"type":"web_search","external_web_access":false},{"type":"image_generation","output_format":"png"}]`
	resp, out := post(t, srv.URL+"/v1/responses", "", body+`}`)
	var got struct {
		Output []map[string]any `json:"output"`
	}
	if resp.StatusCode != 200 || json.Unmarshal([]byte(out), &got) != nil || len(got.Output) != 1 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	if it := got.Output[0]; it["type"] != "function_call" || it["namespace"] != "multi_agent_v1" || it["name"] != "close_agent" {
		t.Fatalf("item %v", it)
	}
	_, stream := post(t, srv.URL+"/v1/responses", "", body+`,"stream":true}`)
	checked := 0
	for _, ev := range []string{"response.output_item.added", "response.output_item.done", "response.incomplete", "response.completed"} {
		for _, line := range strings.Split(stream, "\n") {
			if !strings.HasPrefix(line, `data: {`) || !strings.Contains(line, `"type":"`+ev+`"`) {
				continue
			}
			if !strings.Contains(line, `"name":"close_agent","namespace":"multi_agent_v1"`) || strings.Contains(line, "multi_agent_v1__") {
				t.Fatalf("%s: %s", ev, line)
			}
			checked++
		}
	}
	if checked < 3 {
		t.Fatalf("%d events carry the call:\n%s", checked, stream)
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "not offered to the model (no executor here): image_generation, web_search") || lines[0] != lines[1] {
		t.Fatalf("log %q", log.String())
	}
}
