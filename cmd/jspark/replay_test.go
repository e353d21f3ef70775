package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"jspark/agent/bench"
	"jspark/agent/record"
	"jspark/agent/report"
)

// TestBenchReplayCLI: `jspark bench replay DIR` re-sends a recorded session's
// two requests to a boot of the embedded model and prints the recording's
// row and the boot's; a folder that is no recorded run is an error that
// says so.
func TestBenchReplayCLI(t *testing.T) {
	run := t.TempDir()
	w := record.Work{Version: record.Version, Recipe: "r.yaml", Window: 5, Rounds: []*record.Round{{Name: "c1", Concurrency: 1, Window: 5,
		Sessions: []record.Session{{Name: "s0-a", End: record.EndNoToolCall, Requests: []record.Request{
			{Turn: 0, Sent: 0, TTFT: 0.1, End: 0.2, PromptTokens: 5, CompletionTokens: 8},
			{Turn: 1, Sent: 0.3, TTFT: 0.1, End: 0.4, PromptTokens: 9, CompletionTokens: 8},
		}}}}}}
	b, _ := json.Marshal(w)
	os.WriteFile(filepath.Join(run, "results.json"), b, 0o644)
	sd := filepath.Join(run, "c1", "s0-a")
	os.MkdirAll(sd, 0o755)
	for _, msg := range []string{"Once upon a time", "The cat sat"} {
		body := `{"messages":[{"role":"user","content":"` + msg + `"}],"max_tokens":8,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`
		if err := record.AppendBody(filepath.Join(sd, record.BodiesFile), "/chat/completions", []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	stdout, stderr, code := jspark(t, "bench", "replay", run, "--kv-memory", "16", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	tab, ok := report.ParseTable(stdout, "Replay of")
	if !ok || len(tab.Rows) != 2 || tab.Rows[0][1] != "recorded" || tab.Rows[1][1] != "jspark" || tab.Rows[1][2] != "2" {
		t.Fatalf("table:\n%s", stdout)
	}
	var res bench.ReplayResult
	rb, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil || json.Unmarshal(rb, &res) != nil || len(res.Rounds) != 1 || res.Rounds[0].Compare.Replayed.OutputTokens == 0 {
		t.Fatalf("results.json: %v %+v", err, res)
	}

	_, stderr, code = jspark(t, "bench", "replay", t.TempDir(), "--kv-memory", "16")
	if code == 0 || !strings.Contains(stderr, "results.json") {
		t.Errorf("a folder without a run: exit %d, %s", code, stderr)
	}
}
