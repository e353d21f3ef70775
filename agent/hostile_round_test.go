package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"jspark/agent/record"
	"jspark/agent/target"
	"jspark/recipes"
)

// hostileModel is a scripted OpenAI endpoint that plays an attacker: each
// request is answered with the next tool call of its script, then it hangs
// until the client goes. The thing under test is the runner and its
// sandbox, so the model is the test double.
type hostileModel struct {
	mu    sync.Mutex
	calls [][2]string // tool name, JSON arguments
	n     int
	sent  [][]byte // the request bodies, to read the tool results back
}

func (m *hostileModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body json.RawMessage
	json.NewDecoder(r.Body).Decode(&body)
	m.mu.Lock()
	m.sent = append(m.sent, body)
	i := m.n
	m.n++
	m.mu.Unlock()
	if i >= len(m.calls) {
		<-r.Context().Done()
		return
	}
	args, _ := json.Marshal(m.calls[i][1])
	w.Header().Set("Content-Type", "text/event-stream")
	for _, c := range []string{
		fmt.Sprintf(`{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"h%d","type":"function","function":{"name":%q,"arguments":%s}}]}}]}`, i, m.calls[i][0], args),
		`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	} {
		fmt.Fprintf(w, "data: %s\n\n", c)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// toolResults are the tool messages the runner sent back, in order.
func (m *hostileModel) toolResults() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.sent) == 0 {
		return nil
	}
	var req struct {
		Messages []struct{ Role, Content string }
	}
	json.Unmarshal(m.sent[len(m.sent)-1], &req)
	var out []string
	for _, msg := range req.Messages {
		if msg.Role == "tool" {
			out = append(out, msg.Content)
		}
	}
	return out
}

const hostileRecipe = `name: hostile
system: s
tools: [bash, read, write, edit, search, list]
sampling: {max_tokens: 32, seed: 1, tool_choice: required}
nudge: {message: "use a tool", max: 1}
shell: {timeout: 60s, output_limit: 2000}
tasks:
  - id: a
    kind: code
    prompt: p
    files: {in.txt: "seed\n"}
rounds:
  - {name: one, concurrency: 1, tasks: [a]}
`

// hostileRound runs one round against the script and requires that it ends
// within the window + 5 s with its results written.
func hostileRound(t *testing.T, window time.Duration, calls ...[2]string) (*hostileModel, *record.Work) {
	t.Helper()
	m := &hostileModel{calls: calls}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	r, err := recipes.Parse("hostile.yaml", []byte(hostileRecipe))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	type done struct {
		res *record.Work
		err error
	}
	ch := make(chan done, 1)
	go func() {
		res, err := Work(context.Background(), WorkOptions{Recipe: r, Round: "one", Backends: []target.Backend{{URL: srv.URL + "/v1", Model: "m"}}, Window: window, Out: out})
		ch <- done{res, err}
	}()
	var d done
	select {
	case d = <-ch:
	case <-time.After(window + 5*time.Second):
		t.Fatalf("the round did not end within the window (%s) + 5 s", window)
	}
	if d.err != nil {
		t.Fatal(d.err)
	}
	if _, err := os.Stat(filepath.Join(out, "results.json")); err != nil {
		t.Fatalf("no results.json: %v", err)
	}
	if s := d.res.Rounds[0].Sessions[0]; s.End != record.EndCut {
		t.Errorf("session end %s, want cut", s.End)
	}
	return m, d.res
}

func bash(cmd string) [2]string { return [2]string{"bash", fmt.Sprintf(`{"command":%q}`, cmd)} }

// `exec > build.log 2>&1` and `exec >/dev/null 2>&1` leave the shell with no
// terminal to write to; each command still ends at its marker and the next
// one's output comes back.
func TestHostileExecRedirectsShellOutput(t *testing.T) {
	for _, cmd := range []string{"exec > build.log 2>&1", "exec >/dev/null 2>&1"} {
		t.Run(cmd, func(t *testing.T) {
			m, res := hostileRound(t, 3*time.Second, bash(cmd), bash("echo after"))
			got := m.toolResults()
			if len(got) != 2 || got[0] != "\n[exit code 0]" || got[1] != "after\n[exit code 0]" {
				t.Errorf("tool results %q", got)
			}
			if n := res.Rounds[0].Sessions[0].ToolCalls; n != 2 {
				t.Errorf("%d tool calls, want 2", n)
			}
		})
	}
}

// The window cuts a long command whose shell no longer writes to its terminal.
func TestHostileExecRedirectThenSleepIsCut(t *testing.T) {
	hostileRound(t, 2*time.Second, bash("exec >/dev/null 2>&1; sleep 1000"))
}

// mkfifo, then the host-side file tools on the FIFO: each is refused at once.
func TestHostileMkfifoThenFileTools(t *testing.T) {
	m, _ := hostileRound(t, 3*time.Second,
		bash("mkfifo ff"),
		[2]string{"read", `{"path":"ff"}`},
		[2]string{"write", `{"path":"ff","content":"x"}`},
		[2]string{"edit", `{"path":"ff","old_string":"a","new_string":"b"}`},
		[2]string{"search", `{"pattern":"x"}`},
		bash("echo alive"))
	got := m.toolResults()
	if len(got) != 6 {
		t.Fatalf("%d tool results, want 6: %q", len(got), got)
	}
	for i, tool := range []string{"read", "write", "edit"} {
		if !strings.Contains(got[i+1], "not a regular file (a FIFO)") {
			t.Errorf("%s on the FIFO: %q", tool, got[i+1])
		}
	}
	if got[4] != "no matches" {
		t.Errorf("search over a workspace with a FIFO: %q", got[4])
	}
	if got[5] != "alive\n[exit code 0]" {
		t.Errorf("bash after: %q", got[5])
	}
}
