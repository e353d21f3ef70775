package bench

import (
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

	"jspark/agent"
	"jspark/agent/atif"
	"jspark/agent/metrics"
	"jspark/agent/record"
	"jspark/agent/report"
	"jspark/agent/target"
	"jspark/backend/engine"
	"jspark/backend/model"
	"jspark/backend/server"
	"jspark/kernels/cpu"
	"jspark/recipes"
)

// engineTarget is the in-process engine (the embedded model) behind a test
// server, counted by its own counters, as `jspark bench --boot` opens it.
func engineTarget(t *testing.T) (Target, target.Backend) {
	t.Helper()
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
	srv := httptest.NewServer(server.New(e, server.DefaultOptions()).Handler())
	t.Cleanup(srv.Close)
	b := target.Backend{URL: srv.URL + "/v1", Model: e.Options().ModelName, Counter: metrics.Engine(func() metrics.Counters {
		s := e.Metrics().Snapshot()
		return metrics.Counters{Generation: float64(s.GenerationTokens), Running: float64(s.Running), Waiting: float64(s.Waiting),
			Preemptions: float64(s.Preemptions), PrefixHits: float64(s.CacheHits)}
	})}
	open := func(context.Context) (target.Backend, func(), error) { return b, func() {}, nil }
	return Target{Name: "engine", Kind: "boot", Open: open}, b
}

// replayRecipe's sessions end on their own: the tools are offered but not
// to be called, so each reply is text, the nudge follows, and after it the
// session stops (no_tool_call). Every request finishes within the window.
const replayRecipe = `name: replay
system: You write short stories.
tools: [bash]
sampling: {max_tokens: 12, seed: 3, tool_choice: none}
nudge: {message: "Go on.", max: 1}
shell: {timeout: 5s, output_limit: 500}
tasks:
  - {id: a, kind: prose, prompt: "Once upon a time", files: {}}
  - {id: b, kind: prose, prompt: "The cat sat", files: {}}
  - {id: c, kind: prose, prompt: "A little girl", files: {}}
rounds:
  - {name: c3, concurrency: 3, tasks: [a, b, c]}
`

// TestReplayOfAC3RunReproducesItsTraffic: a c3 run recorded against the
// in-process engine, replayed against it, sends as many requests with as
// many prompt tokens, and (the same model, seeded sampling) gets as many
// output tokens back, each request its recorded count; the engine's own
// counter agrees with the replay's records.
func TestReplayOfAC3RunReproducesItsTraffic(t *testing.T) {
	tg, b := engineTarget(t)
	rc, err := recipes.Parse("replay.yaml", []byte(replayRecipe))
	if err != nil {
		t.Fatal(err)
	}
	run := t.TempDir()
	work, err := agent.Work(context.Background(), agent.WorkOptions{Recipe: rc, Round: "c3", Backends: []target.Backend{b}, Window: time.Minute, Out: run})
	if err != nil {
		t.Fatal(err)
	}
	recorded := work.Rounds[0]
	for _, s := range recorded.Sessions {
		if s.End != record.EndNoToolCall || len(s.Requests) != 2 {
			t.Fatalf("%s ended %s after %d requests; the recording wants sessions that end on their own", s.Name, s.End, len(s.Requests))
		}
		sessionATIF(t, run, &s)
	}
	out := t.TempDir()
	res, err := Replay(context.Background(), ReplayOptions{Dir: run, Targets: []Target{tg}, GapScale: 1, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rounds) != 1 {
		t.Fatalf("%d rounds replayed", len(res.Rounds))
	}
	rr := res.Rounds[0]
	c := rr.Compare
	// Cached tokens differ: the replay finds the recording's prefixes in
	// the engine's cache. That is the serving's part, the rest is not.
	a, r := c.Recorded, c.Replayed
	if a.Requests != 6 || r.Requests != a.Requests || r.PromptTokens != a.PromptTokens || r.OutputTokens != a.OutputTokens || r.Errors+r.Cut+a.Errors+a.Cut != 0 {
		t.Errorf("replayed %+v, recorded %+v", r, a)
	}
	if c.Finished != 6 || c.SameOutput != 6 {
		t.Errorf("%d of %d finished requests with the recorded output length, want 6 of 6", c.SameOutput, c.Finished)
	}
	for i, s := range rr.Sessions {
		for j, q := range s.Requests {
			was := recorded.Sessions[i].Requests[j]
			if q.PromptTokens != was.PromptTokens || q.CompletionTokens != was.CompletionTokens || q.TTFT < 0 {
				t.Errorf("%s request %d: %d+%d tokens, recorded %d+%d", s.Name, j, q.PromptTokens, q.CompletionTokens, was.PromptTokens, was.CompletionTokens)
			}
		}
	}
	if got := rr.Summary.OutputTokens; int(got) != c.Replayed.OutputTokens || rr.Summary.CountedBy != metrics.ByEngine {
		t.Errorf("the engine counted %v output tokens (%s), the replay's records %d", got, rr.Summary.CountedBy, c.Replayed.OutputTokens)
	}
	if rr.Summary.InitialTTFT == nil || rr.Summary.WindowUse == nil || rr.Summary.WindowUse.Reported != 6 {
		t.Errorf("summary %+v", rr.Summary)
	}
	replayFiles(t, out)
}

// sessionATIF: the runner exported the session as ATIF, valid, its steps
// the session's (system prompt, task, a request, the nudge, a request) and
// its counts the record's.
func sessionATIF(t *testing.T, run string, s *record.Session) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(run, "*", s.Name, atif.File))
	if direct, _ := filepath.Glob(filepath.Join(run, s.Name, atif.File)); len(direct) > 0 {
		files = direct
	}
	if len(files) != 1 {
		t.Fatalf("%s: %d ATIF files", s.Name, len(files))
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := atif.Validate(b); err != nil {
		t.Fatalf("%s: %v", files[0], err)
	}
	var tr atif.Trajectory
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, st := range tr.Steps {
		sources = append(sources, st.Source)
	}
	prompt, output := 0, 0
	for _, q := range s.Requests {
		prompt, output = prompt+q.PromptTokens, output+q.OutputTokens()
	}
	f := tr.FinalMetrics
	if strings.Join(sources, " ") != "system user agent user agent" || tr.Steps[3].Message != "Go on." ||
		f == nil || f.TotalPromptTokens != prompt || f.TotalCompletionTokens != output || *tr.Steps[4].Metrics.PromptTokens != s.Requests[1].PromptTokens {
		t.Errorf("%s: steps %v, final %+v; the record: %d prompt and %d output tokens", s.Name, sources, f, prompt, output)
	}
}

// replayFiles: results.json reads back, and the table has the recording's
// row and the target's.
func replayFiles(t *testing.T, out string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back ReplayResult
	if err := json.Unmarshal(b, &back); err != nil || back.Version != ReplayVersion || len(back.Tables) != 1 || len(back.Rounds) != 1 {
		t.Fatalf("results.json: %v, %+v", err, back)
	}
	var text strings.Builder
	back.Tables[0].Write(&text)
	tab, ok := report.ParseTable(text.String(), "Replay of")
	if !ok || len(tab.Rows) != 2 || tab.Rows[0][1] != "recorded" || tab.Rows[1][1] != "engine" || tab.Rows[1][5] != "6/6" {
		t.Errorf("table:\n%s", text.String())
	}
	if h, err := os.ReadFile(filepath.Join(out, "report.html")); err != nil || !strings.Contains(string(h), "<svg") {
		t.Errorf("report.html: %v", err)
	}
}

// seen is what a scripted server received: each request's body and
// session key.
type seen struct {
	mu     sync.Mutex
	bodies []string
	keys   []string
}

// writeRecording writes a run as the runner does: results.json and each
// session's bodies.
func writeRecording(t *testing.T, w *record.Work, bodies map[string][]string) string {
	t.Helper()
	dir := t.TempDir()
	b, _ := json.Marshal(w)
	os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644)
	for _, r := range w.Rounds {
		for _, s := range r.Sessions {
			sd := filepath.Join(dir, roundDir(w, r), s.Name)
			os.MkdirAll(sd, 0o755)
			for _, body := range bodies[s.Name] {
				if err := record.AppendBody(filepath.Join(sd, record.BodiesFile), "/chat/completions", []byte(body)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return dir
}

// TestReplayKeepsBodiesGapsAndCuts: each body goes out as recorded (the
// model renamed for a target that serves another), with the session's
// key; the next request waits the recorded gap after the previous
// response; a request the window cut is held as long and then cancelled; a
// recorded error is sent again and its outcome recorded.
func TestReplayKeepsBodiesGapsAndCuts(t *testing.T) {
	got := &seen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got.mu.Lock()
		got.bodies = append(got.bodies, string(body))
		got.keys = append(got.keys, r.Header.Get("X-Session-Id"))
		got.mu.Unlock()
		switch {
		case strings.Contains(string(body), "hang"):
			<-r.Context().Done()
		case strings.Contains(string(body), "bad"):
			w.WriteHeader(400)
			fmt.Fprint(w, `{"error":{"message":"bad request"}}`)
		default:
			sse(w, `{"choices":[{"index":0,"delta":{"content":"hi"}}]}`,
				`{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":1,"jspark":{"timing":{"queued_s":0.01,"prefill_s":0.02,"decode_s":0,"preempted_s":0}}}}`)
		}
	}))
	defer srv.Close()
	const gap, hold = 0.3, 0.25
	w := &record.Work{Version: record.Version, Recipe: "r.yaml", Window: 1, Rounds: []*record.Round{{Name: "c1", Concurrency: 1, Window: 1,
		Sessions: []record.Session{{Name: "s0-a", End: record.EndCut, Requests: []record.Request{
			{Turn: 0, Sent: 0, TTFT: 0.05, End: 0.1, PromptTokens: 7, CompletionTokens: 1},
			{Turn: 1, Sent: 0.1 + gap, TTFT: -1, End: 0.5, Error: "400 Bad Request: bad request"},
			{Turn: 2, Sent: 0.6, TTFT: -1, End: 0.6 + hold, Cut: true},
		}}}}}}
	bodies := []string{`{"model":"old","messages":[{"role":"user","content":"one"}],"stream":true}`,
		`{"model":"old","messages":[{"role":"user","content":"bad"}],"stream":true}`,
		`{"model":"old","messages":[{"role":"user","content":"hang"}],"stream":true}`}
	dir := writeRecording(t, w, map[string][]string{"s0-a": bodies})
	for _, model := range []string{"old", "new"} {
		t.Run("model "+model, func(t *testing.T) {
			got.mu.Lock()
			got.bodies, got.keys = nil, nil
			got.mu.Unlock()
			b := target.Backend{URL: srv.URL + "/v1", Model: model}
			tg := Target{Name: "x", Open: func(context.Context) (target.Backend, func(), error) { return b, func() {}, nil }}
			res, err := Replay(context.Background(), ReplayOptions{Dir: dir, Targets: []Target{tg}, GapScale: 1, Out: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			got.mu.Lock() // the handlers' writes happen before, unseen by the race detector
			gotBodies, gotKeys := got.bodies, got.keys
			got.mu.Unlock()
			for i, body := range gotBodies {
				want := bodies[i]
				if model == "new" {
					want = strings.Replace(strings.Replace(want, `"model":"old",`, "", 1), `,"stream"`, `,"model":"new","stream"`, 1)
				}
				if body != want || gotKeys[i] != "c1/s0-a" {
					t.Errorf("request %d: %s (%s), want %s", i, body, gotKeys[i], want)
				}
			}
			q := res.Rounds[0].Sessions[0].Requests
			if len(q) != 3 || len(gotBodies) != 3 {
				t.Fatalf("%d requests replayed, %d received", len(q), len(gotBodies))
			}
			// Lower bounds only: a sleep and a hold last at least as asked.
			if q[1].Sent-q[0].End < gap || q[1].Error == "" || q[0].Timing == nil || q[0].PromptTokens != 7 {
				t.Errorf("requests 0 and 1: %+v %+v", q[0], q[1])
			}
			if !q[2].Cut || q[2].End-q[2].Sent < hold || q[2].Error != "" {
				t.Errorf("the cut request: %+v", q[2])
			}
			if c := res.Rounds[0].Compare; c.Finished != 1 || c.SameOutput != 1 || c.Replayed.Errors != 1 || c.Replayed.Cut != 1 {
				t.Errorf("compare %+v", c)
			}
		})
	}
}

// TestReplayRefusesWhatItCannotReplay: a run without bodies, a run over
// several targets and an unknown round are errors that say why.
// TestReplayOfTrials: a run with --trials 2 keeps each trial's sessions
// under ROUND/tK; the round's replay re-sends both trials, each its own
// bodies, and the table names them ROUND#K.
func TestReplayOfTrials(t *testing.T) {
	got := &seen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got.mu.Lock()
		got.bodies = append(got.bodies, string(body))
		got.keys = append(got.keys, r.Header.Get("X-Session-Id"))
		got.mu.Unlock()
		sse(w, `{"choices":[{"index":0,"delta":{"content":"hi"}}]}`, `{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`)
	}))
	defer srv.Close()
	w := &record.Work{Version: record.Version, Recipe: "r.yaml", Window: 1, Trials: 2}
	for k := 1; k <= 2; k++ {
		w.Rounds = append(w.Rounds, &record.Round{Name: "c1", Trial: k, Concurrency: 1, Window: 1, Sessions: []record.Session{{Name: "s0-a",
			End: record.EndNoToolCall, Requests: []record.Request{{Sent: 0, TTFT: 0.01, End: 0.02, PromptTokens: 3, CompletionTokens: 1}}}}})
	}
	dir := writeRecording(t, w, nil)
	for k := 1; k <= 2; k++ { // each trial its own body
		sd := filepath.Join(dir, "c1", fmt.Sprintf("t%d", k), "s0-a")
		os.MkdirAll(sd, 0o755)
		body := fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"trial %d"}],"stream":true}`, k)
		if err := record.AppendBody(filepath.Join(sd, record.BodiesFile), "/chat/completions", []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	tg := Target{Name: "x", Open: func(context.Context) (target.Backend, func(), error) {
		return target.Backend{URL: srv.URL + "/v1", Model: "m"}, func() {}, nil
	}}
	res, err := Replay(context.Background(), ReplayOptions{Dir: dir, Round: "c1", Targets: []Target{tg}, GapScale: 1, Out: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	got.mu.Lock()
	defer got.mu.Unlock()
	if len(got.bodies) != 2 || !strings.Contains(got.bodies[0], "trial 1") || !strings.Contains(got.bodies[1], "trial 2") {
		t.Fatalf("received %q", got.bodies)
	}
	if len(res.Rounds) != 2 || res.Rounds[0].Trial != 1 || res.Rounds[1].Trial != 2 || res.Rounds[1].Compare.SameOutput != 1 {
		t.Fatalf("rounds %+v", res.Rounds)
	}
	var text strings.Builder
	res.Tables[0].Write(&text)
	tab, ok := report.ParseTable(text.String(), "Replay of")
	if !ok || len(tab.Rows) != 4 || tab.Rows[0][0] != "c1#1" || tab.Rows[2][0] != "c1#2" || tab.Rows[3][1] != "x" {
		t.Errorf("table:\n%s", text.String())
	}
}

func TestReplayRefusesWhatItCannotReplay(t *testing.T) {
	w := &record.Work{Version: record.Version, Rounds: []*record.Round{{Name: "c1", Sessions: []record.Session{{Name: "s0-a",
		Requests: []record.Request{{TTFT: -1}, {TTFT: -1}}}}}}}
	noBodies := writeRecording(t, w, nil)
	short := writeRecording(t, w, map[string][]string{"s0-a": {`{}`}})
	multi := t.TempDir()
	os.WriteFile(filepath.Join(multi, "results.json"), []byte(`{"version":1,"targets":[{"name":"a"},{"name":"b"}]}`), 0o644)
	for _, c := range []struct{ name, dir, round, want string }{
		{"no bodies", noBodies, "", "recorded before jspark kept every request's body"},
		{"fewer bodies", short, "", "1 bodies for the 2 requests"},
		{"several targets", multi, "", "a run over 2 targets: replay one of them"},
		{"unknown round", short, "c9", `no round "c9" (rounds: c1, or all)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Replay(context.Background(), ReplayOptions{Dir: c.dir, Round: c.round, GapScale: 1, Out: t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
}

func sse(w http.ResponseWriter, chunks ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, c := range chunks {
		fmt.Fprintf(w, "data: %s\n\n", c)
		w.(http.Flusher).Flush()
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}
