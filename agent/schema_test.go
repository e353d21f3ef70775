package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	openai "github.com/sashabaranov/go-openai"

	"jspark/agent/metrics"
	"jspark/agent/record"
	"jspark/agent/target"
	"jspark/recipes"
)

// withJspark is a tool call whose usage carries usage.jspark, as jspark
// serve sends it, so the request's timing reaches results.json.
func withJspark(name, args string) func(http.ResponseWriter, openai.ChatCompletionRequest) {
	return func(w http.ResponseWriter, _ openai.ChatCompletionRequest) {
		a, _ := json.Marshal(args)
		sse(w,
			fmt.Sprintf(`{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":%q,"arguments":%s}}]}}]}`, name, a),
			`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
			`{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120,"prompt_tokens_details":{"cached_tokens":96},`+
				`"jspark":{"committed_tokens":96,"preemptions":0,"reused_tokens":96,"computed_tokens":4,"session":"one/s0-a",`+
				`"timing":{"queued_s":0.25,"prefill_s":0.5,"decode_s":1.25,"preempted_s":0}}}}`)
	}
}

// scriptedWork runs the recipe's repeat round (its first round before it)
// on a scripted backend whose counters are the requests it has answered,
// and returns results.json as written.
func scriptedWork(t *testing.T) []byte {
	t.Helper()
	var answered atomic.Int64
	replies := []func(http.ResponseWriter, openai.ChatCompletionRequest){
		withJspark("bash", `{"command":"cat in.txt; (exit 3)"}`), text("done"), text("done"),
		withJspark("bash", `{"command":"cat in.txt; (exit 3)"}`), text("done"), text("done"),
	}
	for i, r := range replies {
		replies[i] = func(w http.ResponseWriter, req openai.ChatCompletionRequest) {
			answered.Add(1) // before the reply: the client's last read sees it
			r(w, req)
		}
	}
	srv := httptest.NewServer(&scripted{replies: replies})
	defer srv.Close()
	r, err := recipes.Parse("t.yaml", []byte(recipeYAML))
	if err != nil {
		t.Fatal(err)
	}
	counters := metrics.Engine(func() metrics.Counters {
		n := float64(answered.Load())
		return metrics.Counters{Generation: 10 * n, Preemptions: n, PrefixHits: 96 * n}
	})
	out := t.TempDir()
	_, err = Work(context.Background(), WorkOptions{Recipe: r, Round: "one-repeat", Window: 30 * time.Second, Out: out,
		Backends: []target.Backend{{URL: srv.URL + "/v1", Model: "m", Counter: counters}}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// volatile are the keys whose values are clock readings, and the
// machine's isolation: they are kept as null or "measured", nothing more.
var volatile = map[string]bool{"started": true, "sent": true, "ttft": true, "end": true, "tools_s": true, "t": true,
	"initial_ttft": true, "later_median_ttft": true, "isolation": true, "isolated": true}

// normalize replaces the volatile values of a results.json, keeps the first
// and last counter samples (how many seconds ticked between depends on the
// machine's speed) and does not name the scripted backend's port.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			_, reason := e.(string)
			switch {
			case volatile[k] && e != nil && !(k == "end" && reason): // a session's end is why it ended
				x[k] = "measured"
			case k == "samples":
				s := e.([]any)
				x[k] = normalize([]any{s[0], s[len(s)-1]})
			case k == "backends" || k == "backend":
				x[k] = "the scripted backend"
			default:
				x[k] = normalize(e)
			}
		}
	case []any:
		for i := range x {
			x[i] = normalize(x[i])
		}
	}
	return v
}

// namedChanges are each schema version's changes to the same scripted
// run's results.json, checked and taken out so that what is left must be
// the record from before: version 1 added the version; version 2 scored
// the sessions (trials, a round's trial, seed and folder, a session's
// verdict, time and workspace, the summary's infra failures and session
// times, the pass rates).
func namedChanges(t *testing.T, got map[string]any) {
	t.Helper()
	take := func(m map[string]any, key string, want any) {
		t.Helper()
		v, ok := m[key]
		if !ok {
			t.Errorf("no %q in %v", key, m)
		} else if want != "any" && !cmp.Equal(v, want) {
			t.Errorf("%s: %v, want %v", key, v, want)
		}
		delete(m, key)
	}
	take(got, "version", float64(record.Version))
	take(got, "trials", float64(1))
	if rates, _ := got["pass_rates"].([]any); len(rates) != 4 { // task a and its round, for each round: unscored (no check)
		t.Errorf("pass rates %v", got["pass_rates"])
	}
	take(got, "pass_rates", "any")
	for _, r := range got["rounds"].([]any) {
		r := r.(map[string]any)
		take(r, "trial", float64(1))
		take(r, "seed", float64(1))
		take(r, "dir", r["name"])
		for _, s := range r["sessions"].([]any) {
			s := s.(map[string]any)
			take(s, "passed", nil) // task a has no check
			if tm, _ := s["time"].(map[string]any); tm == nil || tm["queued_s"] != 0.25 || tm["unreported_requests"] != float64(2) {
				t.Errorf("session time %v", s["time"])
			}
			take(s, "time", "any")
			delete(s, "workspace") // only where the workspace is capped (root with namespaces)
		}
		sum := r["summary"].(map[string]any)
		take(sum, "infra_failures", float64(0))
		take(sum, "session_wall_s", "any")
		take(sum, "session_working_s", "any")
	}
}

// TestResultsSchemaBeforeAndAfter: the same scripted run's results.json,
// from before the runner's records were their own schema and now, differs
// only in the named changes (namedChanges), and record.Version counts
// them. testdata/results-before.json was recorded by this test, with an
// -update-before flag since removed, from main at b6c89c3 (see
// testdata/README.md): it is not re-recorded.
func TestResultsSchemaBeforeAndAfter(t *testing.T) {
	var got map[string]any
	if err := json.Unmarshal(scriptedWork(t), &got); err != nil {
		t.Fatal(err)
	}
	if record.Version != 2 {
		t.Errorf("record.Version %d: name its changes in namedChanges", record.Version)
	}
	normalize(got)
	namedChanges(t, got)
	b, err := os.ReadFile(filepath.Join("testdata", "results-before.json"))
	if err != nil {
		t.Fatal(err)
	}
	var before map[string]any
	if err := json.Unmarshal(b, &before); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(before, got); d != "" {
		t.Errorf("results.json (-before +now):\n%s", d)
	}
}
