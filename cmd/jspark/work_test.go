package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"jspark/agent/record"
	"jspark/agent/report"
	"jspark/recipes"
)

func readResults(t *testing.T, dir string) *record.Work {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res record.Work
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return &res
}

// toolResults counts the tool result messages a session's trajectory holds:
// each is the output of a tool that really ran in its sandbox.
func toolResults(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "trajectory.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var st struct {
			Results []struct{ Role, Content string } `json:"tool_results"`
		}
		if err := json.Unmarshal([]byte(line), &st); err != nil {
			t.Fatalf("trajectory line %q: %v", line, err)
		}
		n += len(st.Results)
	}
	return n
}

func tableRow(stdout, round string) bool {
	for _, line := range strings.Split(stdout, "\n") {
		if f := strings.Fields(line); len(f) == 12 && f[0] == round {
			return true
		}
	}
	return false
}

// TestWorkC3First needs a first tool call inside the window: each session's
// first prompt is ~3,000 tokens, which on 2 cores under a load of 10 or more
// (the suite's other packages) takes the three sessions past 20 s.
func TestWorkC3First(t *testing.T) {
	const window = 45
	out := t.TempDir()
	stdout, stderr, code := jspark(t, "work", "c3-first", "--window", fmt.Sprint(window, "s"), "--out", out, "--kv-memory", "256")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !tableRow(stdout, "c3-first") || !strings.Contains(stdout, "Backend tok/s = output tokens counted by the engine") {
		t.Errorf("no Work table:\n%s", stdout)
	}
	res := readResults(t, out)
	if len(res.Rounds) != 1 || len(res.Rounds[0].Sessions) != 3 {
		t.Fatalf("%d rounds", len(res.Rounds))
	}
	r := res.Rounds[0]
	recipe, err := recipes.Load("work")
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, s := range r.Sessions {
		dir := filepath.Join(out, "c3-first", s.Name)
		// Seeded with its visible test; after the cut its hidden tests
		// were copied in and its check ran: the session is scored.
		task := recipe.Task(s.Task)
		want := len(task.HiddenTests())
		for _, f := range task.SeedFiles() {
			if _, hidden := task.Tests[f.Path]; strings.HasPrefix(f.Path, "test_") && !hidden {
				want++
			}
		}
		if tests, _ := filepath.Glob(filepath.Join(dir, "workspace", "test_*.py")); len(tests) != want || want < 2 {
			t.Errorf("%s: workspace holds tests %v, want its visible and hidden tests (%d)", s.Name, tests, want)
		}
		if s.Passed == nil || s.Check == nil || s.Check.HiddenTests != len(task.HiddenTests()) || s.Check.ExitCode == nil {
			t.Errorf("%s: not scored: passed %v, check %+v, infra %q", s.Name, s.Passed, s.Check, s.Infra)
		}
		ran += toolResults(t, dir)
		if s.End != record.EndCut {
			t.Errorf("%s ended %s before the cut", s.Name, s.End)
		}
	}
	if ran == 0 || r.Summary.ToolCalls == 0 {
		t.Errorf("no tool ran in any sandbox (%d calls)", r.Summary.ToolCalls)
	}
	// The in-process engine reports its queueing: every session has a
	// working time, its wall time less the queueing its requests reported.
	for _, s := range r.Sessions {
		tm := s.Time
		if tm.WorkingSec == nil || tm.QueuedSec == nil || math.Abs(*tm.WorkingSec-(tm.WallSec-*tm.QueuedSec)) > 1e-9 {
			t.Errorf("%s: time %+v", s.Name, tm)
		}
	}
	if !strings.Contains(stdout, "c3-first: session time (mean): wall ") || !strings.Contains(stdout, "s (wall less the engine's queueing, from usage.jspark)") {
		t.Errorf("no working time line:\n%s", stdout)
	}
	if r.Summary.OutputTokens <= 0 || r.Summary.CountedBy != "engine" || r.Summary.BackendTokS != r.Summary.OutputTokens/window {
		t.Errorf("summary %+v", r.Summary)
	}
	if b, err := os.ReadFile(filepath.Join(out, "report.html")); err != nil || !strings.Contains(string(b), "<svg") {
		t.Errorf("report.html: %v", err)
	}
	// Where the window went: results.json's per-request timings and tool
	// times, summed here, are the round's sums and the printed line.
	var q, pf, dec, pre, tools float64
	reported := 0
	for _, s := range r.Sessions {
		for _, req := range s.Requests {
			tools += req.ToolsSec
			if tm := req.Timing; tm != nil {
				q, pf, dec, pre = q+tm.QueuedSec, pf+tm.PrefillSec, dec+tm.DecodeSec, pre+tm.PreemptedSec
				reported++
			}
		}
	}
	u := r.Summary.WindowUse
	if u == nil || u.Reported != reported || reported == 0 || pf <= 0 || dec <= 0 || tools <= 0 {
		t.Fatalf("window use %+v; recomputed from %d requests: prefill %.3f, decode %.3f, tools %.3f", u, reported, pf, dec, tools)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-6 }
	if !near(u.QueuedSec, q) || !near(u.PrefillSec, pf) || !near(u.DecodeSec, dec) || !near(u.PreemptedSec, pre) || !near(u.ToolsSec, tools) {
		t.Errorf("window use %+v, recomputed queue %.3f prefill %.3f decode %.3f preempted %.3f tools %.3f", *u, q, pf, dec, pre, tools)
	}
	line := fmt.Sprintf("c3-first: where the window went (sums over sessions): queue %.1f s, prefill %.1f s, decode %.1f s, preempted %.1f s, tools %.1f s\n",
		q, pf, dec, pre, tools)
	if !strings.Contains(stdout, line) {
		t.Errorf("stdout has no line %q:\n%s", line, stdout)
	}
	t.Logf("%s", strings.TrimSpace(line))
}

func TestWorkC3RepeatIdenticalAndCached(t *testing.T) {
	out := t.TempDir()
	stdout, stderr, code := jspark(t, "work", "c3-repeat", "--window", "20s", "--out", out, "--kv-memory", "256")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "initial payloads: 3/3 repeat pairs byte-identical") || !tableRow(stdout, "c3-first") || !tableRow(stdout, "c3-repeat") {
		t.Errorf("stdout:\n%s", stdout)
	}
	res := readResults(t, out)
	if len(res.Rounds) != 2 || res.Rounds[0].Name != "c3-first" || res.Rounds[1].Name != "c3-repeat" {
		t.Fatalf("rounds %+v", res.Rounds)
	}
	first, repeat := res.Rounds[0], res.Rounds[1]
	for i, s := range repeat.Sessions {
		if s.InitialPayload != first.Sessions[i].InitialPayload {
			t.Errorf("%s: payload %s, twin %s", s.Name, s.InitialPayload, first.Sessions[i].InitialPayload)
		}
		q, twin := s.Requests[0], first.Sessions[i].Requests[0]
		if twin.TTFT < 0 {
			// The twin's prefill did not finish inside the window (a loaded
			// machine): its whole prompt was never committed to the cache.
			t.Logf("%s: the first round's request had no first output; its prompt was not all cached", s.Name)
			continue
		}
		if q.TTFT < 0 || q.CachedTokens < q.PromptTokens-16 || q.CachedTokens == 0 {
			t.Errorf("%s first request: cached %d of %d prompt tokens, ttft %.3f (twin: ttft %.3f, cached %d)", s.Name, q.CachedTokens, q.PromptTokens, q.TTFT, twin.TTFT, twin.CachedTokens)
		}
	}
	// Which round's first outputs came sooner is a timing, not an invariant
	// (the cached tokens above are); the summary only has to be honest: a
	// TTFT exactly when some first request had a first output.
	for _, r := range res.Rounds {
		measured := false
		for _, s := range r.Sessions {
			measured = measured || len(s.Requests) > 0 && s.Requests[0].TTFT >= 0
		}
		if (r.Summary.InitialTTFT != nil) != measured {
			t.Errorf("%s: initial TTFT %v, first outputs measured: %v", r.Name, r.Summary.InitialTTFT, measured)
		}
	}
}

const smallRecipe = `name: small
system: Use the bash tool.
tools: [bash]
sampling: {max_tokens: 128, seed: 3, temperature: 0.5, tool_choice: required}
nudge: {message: Call bash., max: 5}
shell: {timeout: 5s, output_limit: 400}
tasks:
  - {id: one, kind: code, prompt: List the files.}
rounds:
  - {name: solo, concurrency: 1, tasks: [one]}
`

func TestWorkAgainstServeEndpoint(t *testing.T) {
	url := startServe(t, "--kv-memory", "64")
	dir := t.TempDir()
	recipe := filepath.Join(dir, "small.yaml")
	os.WriteFile(recipe, []byte(smallRecipe), 0o644)
	out := filepath.Join(dir, "out")
	stdout, stderr, code := jspark(t, "work", "solo", "--recipe", recipe, "--endpoint", url, "--window", "6s", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !tableRow(stdout, "solo") || !strings.Contains(stdout, "vllm:generation_tokens_total") {
		t.Errorf("stdout:\n%s", stdout)
	}
	res := readResults(t, out)
	r := res.Rounds[0]
	s := r.Sessions[0]
	if res.Backends[0] != url || s.Backend != url || r.Summary.CountedBy != "prometheus" {
		t.Errorf("backend %v / %s, counted by %s", res.Backends, s.Backend, r.Summary.CountedBy)
	}
	reported := 0
	for _, q := range s.Requests {
		reported += q.CompletionTokens
	}
	// The endpoint's counter saw every token the finished responses reported,
	// and at most the unfinished one's on top.
	if s.ToolCalls == 0 || toolResults(t, filepath.Join(out, "solo", s.Name)) == 0 || r.Summary.OutputTokens < float64(reported) || r.Summary.OutputTokens > float64(reported+128) {
		t.Errorf("calls %d, counter %v tokens, responses reported %d", s.ToolCalls, r.Summary.OutputTokens, reported)
	}
}

func TestRecipesCLI(t *testing.T) {
	stdout, _, code := jspark(t, "recipes", "list")
	if code != 0 || !strings.HasPrefix(stdout, "work\twindow 3m0s, 7 tasks, rounds: c3-first(c3) c3-repeat(c3) c6-first(c6) c6-repeat(c6) pi-validation(c1, pi 0.73.1)") {
		t.Errorf("list: %d %q", code, stdout)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte(strings.Replace(smallRecipe, "tools: [bash]", "tools: [bash, curl]", 1)), 0o644)
	stdout, stderr, code := jspark(t, "recipes", "validate", bad)
	if code == 0 || stdout != bad+`:3: tools[1]: unknown tool "curl" (known: bash, read, write, edit, list, search)`+"\n" || !strings.Contains(stderr, "1 of 1 recipes are invalid") {
		t.Errorf("validate: %d %q %q", code, stdout, stderr)
	}
	_, stderr, code = jspark(t, "work", "c9", "--window", "1s")
	if code == 0 || !strings.Contains(stderr, `recipe work has no round "c9" (rounds: c3-first, c3-repeat, c6-first, c6-repeat, pi-validation, or all)`) {
		t.Errorf("unknown round: %d %q", code, stderr)
	}
}

// `jspark work pi-validation`: Pi itself (installed with npm into the agent
// cache) runs in the session's sandbox against the in-process engine, through
// the sandbox's door, and its requests are recorded from the server side.
func TestWorkPiValidationRunsPiInTheSandbox(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not on PATH, so Pi cannot be installed: %v", tool, err)
		}
	}
	out := t.TempDir()
	stdout, stderr, code := jspark(t, "work", "pi-validation", "--window", "120s", "--out", out, "--kv-memory", "64")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !tableRow(stdout, "pi-validation") || !strings.Contains(stdout, "pi-validation s0-pi_two_reads: pi 0.73.1 ") {
		t.Errorf("stdout:\n%s", stdout)
	}
	r := readResults(t, out).Rounds[0]
	s := r.Sessions[0]
	if s.Agent != "pi 0.73.1" || (s.End != record.EndAgentDone && s.End != record.EndCut) || s.AgentError != "" {
		t.Fatalf("session: agent %q ended %s (%s): %s", s.Agent, s.End, s.AgentError, s.AgentOutput)
	}
	if len(s.Requests) == 0 {
		t.Fatalf("no request of Pi's was recorded; it printed:\n%s", s.AgentOutput)
	}
	// Pi's own prompt (its system prompt and tools), as the engine counted it.
	q := s.Requests[0]
	dir := filepath.Join(out, "pi-validation", s.Name)
	payload, _ := os.ReadFile(filepath.Join(dir, "initial_request.json"))
	if q.PromptTokens < 1000 || q.Error != "" || !strings.Contains(string(payload), "operating inside pi") || !strings.Contains(string(payload), `"model":"llama"`) {
		t.Errorf("first request %+v; payload %.300s", q, payload)
	}
	finished := 0
	for _, q := range s.Requests {
		if !q.Cut && q.Error == "" {
			finished += q.CompletionTokens
		}
	}
	if r.Summary.OutputTokens < float64(finished) || r.Summary.CountedBy != "engine" {
		t.Errorf("engine counted %v output tokens, Pi's finished requests %d", r.Summary.OutputTokens, finished)
	}
	config, err := os.ReadFile(filepath.Join(dir, "agent-models.json"))
	want := `"baseUrl": "http://127.0.0.1:40000/v1"` // the door, inside the sandbox's network namespace
	if !s.Isolated {
		want = `"baseUrl": "http://127.0.0.1:`
	}
	if err != nil || !strings.Contains(string(config), want) {
		t.Errorf("Pi's models.json (isolated %v): %s %v", s.Isolated, config, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "workspace", "first.txt")); err != nil {
		t.Error(err)
	}
}

// `jspark work` over two boots: the round runs once per boot, each under its
// own folder, and the seed's "Work: four recipes" table has one row per boot
// and round whose cells are the recorded summaries'.
func TestWorkTwoBootsOneTable(t *testing.T) {
	out := t.TempDir()
	stdout, stderr, code := jspark(t, "work", "c3-first", "--window", "20s", "--out", out, "--kv-memory", "128",
		"--boot", "S256=--prefill-solo 256", "--boot", "S2048=--prefill-solo 2048 --prefill-mixed 512")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	tb, ok := report.ParseTable(stdout, "Work: 2 backends, c3-first")
	if !ok {
		t.Fatalf("no combined table:\n%s", stdout)
	}
	wantCols := []string{"Backend", "Round", "Backend tok/s", "Initial TTFT, s", "Later median TTFT, s", "Tools", "Nonzero exits",
		"API errors", "Pending at cut", "Waiting max", "Running max", "Preemptions", "Passed"}
	if d := cmp.Diff(wantCols, tb.Columns); d != "" {
		t.Fatalf("columns (-want +got):\n%s", d)
	}
	var rows [][2]string
	for _, r := range tb.Rows {
		rows = append(rows, [2]string{r[0], r[1]})
	}
	if d := cmp.Diff([][2]string{{"S256", "c3-first"}, {"S2048", "c3-first"}}, rows); d != "" {
		t.Fatalf("rows (-want +got):\n%s", d)
	}
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res record.WorkTargets
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Targets) != 2 || res.Window != 20 {
		t.Fatalf("%d targets, window %v", len(res.Targets), res.Window)
	}
	for i, tg := range res.Targets {
		if tg.Name != rows[i][0] || tg.Kind != "boot" || !strings.Contains(tg.Spec, "--kv-memory=128") || len(tg.Rounds) != 1 || len(tg.Rounds[0].Sessions) != 3 {
			t.Fatalf("target %d: %s %s %q, %d rounds", i, tg.Name, tg.Kind, tg.Spec, len(tg.Rounds))
		}
		// The target's own folder holds its single-target results.json.
		if own := readResults(t, filepath.Join(out, tg.Name)); len(own.Rounds) != 1 || own.Rounds[0].Summary.OutputTokens != tg.Rounds[0].Summary.OutputTokens {
			t.Errorf("%s: own results.json %+v", tg.Name, own.Rounds)
		}
		// Cells recomputed from the recorded round: backend tok/s is the
		// counter's output tokens over the window, tools and pending first
		// outputs are the sessions', running max the samples'. (How far a
		// loaded machine gets in the window is not asserted.)
		r := tg.Rounds[0]
		calls, pending, running, scored, passed := 0, 0, 0.0, 0, 0
		for _, ss := range r.Sessions {
			calls += ss.ToolCalls
			if ss.FirstOutputPending {
				pending++
			}
			if ss.Passed != nil {
				scored++
				if *ss.Passed {
					passed++
				}
			}
		}
		for _, x := range r.Samples {
			running = max(running, x.Running)
		}
		row := tb.Rows[i]
		if want := fmt.Sprintf("%.2f", r.Summary.OutputTokens/res.Window); row[2] != want {
			t.Errorf("%s backend tok/s: table %s, results.json %s", tg.Name, row[2], want)
		}
		if row[5] != fmt.Sprint(calls) || row[8] != fmt.Sprint(pending) {
			t.Errorf("%s tools, pending: table %s, %s; sessions %d, %d", tg.Name, row[5], row[8], calls, pending)
		}
		if row[10] != fmt.Sprintf("%.0f", running) || running < 1 {
			t.Errorf("%s running max: table %s, samples %v", tg.Name, row[10], running)
		}
		// Every built-in task has a check: each session is scored.
		if row[12] != fmt.Sprintf("%d/%d", passed, scored) || scored != 3 {
			t.Errorf("%s passed: table %s, sessions %d/%d", tg.Name, row[12], passed, scored)
		}
	}
	if !strings.Contains(res.Targets[0].Spec, "--prefill-solo 256") || !strings.Contains(res.Targets[1].Spec, "--prefill-solo 2048") {
		t.Errorf("specs %q, %q", res.Targets[0].Spec, res.Targets[1].Spec)
	}
	if h, err := os.ReadFile(filepath.Join(out, "report.html")); err != nil || !strings.Contains(string(h), `href="S256/report.html"`) {
		t.Errorf("report.html: %v", err)
	}
}

// The targets of work: boots in order, named endpoints each its own, the
// unnamed ones one target that spreads its sessions; bench keeps every
// endpoint apart.
func TestParseTargets(t *testing.T) {
	// The command was given --kv-memory 32: every boot starts from it.
	parent := defaultEngineFlags()
	set := parent.flagSet()
	if err := set.Parse([]string{"--kv-memory", "32"}); err != nil {
		t.Fatal(err)
	}
	got, err := parseTargets(&parent, given(set), []string{"A=--prefill-solo 64"}, []string{"http://h:1/v1", "N=http://n:3/v1/", "http://h:2/v1"}, true)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Name, Kind, Spec string
		URLs             []string
	}
	var rows []row
	for _, sp := range got {
		rows = append(rows, row{sp.Name, sp.Kind, sp.Spec, sp.URLs})
	}
	want := []row{
		{"A", "boot", "--kv-memory=32 --prefill-solo 64", nil},
		{"N", "endpoint", "http://n:3/v1", []string{"http://n:3/v1"}},
		{"h:1+h:2", "endpoint", "http://h:1/v1 http://h:2/v1", []string{"http://h:1/v1", "http://h:2/v1"}},
	}
	if d := cmp.Diff(want, rows); d != "" {
		t.Errorf("work targets (-want +got):\n%s", d)
	}
	if ef := got[0].Engine; ef.PrefillSolo != 64 || ef.KVMemMiB != 32 {
		t.Errorf("boot A engine flags: solo %d, kv %d", ef.PrefillSolo, ef.KVMemMiB)
	}
	none := defaultEngineFlags()
	got, err = parseTargets(&none, nil, nil, []string{"http://h:1/v1", "http://h:2/v1"}, false)
	if err != nil || len(got) != 2 || got[0].Name != "h:1" || got[1].Name != "h:2" {
		t.Errorf("bench targets %+v %v", got, err)
	}
	solo := defaultEngineFlags()
	solo.PrefillSolo = 8
	if got, err := parseTargets(&solo, []string{"--prefill-solo=8"}, nil, nil, true); err != nil || len(got) != 1 || got[0].Name != "jspark" || got[0].Engine.PrefillSolo != 8 {
		t.Errorf("default target %+v %v", got, err)
	}
	for _, bad := range [][]string{{"A=--no-such-flag"}, {"a/b=--prefill-solo 8"}, {"A=", "A="}} {
		if _, err := parseTargets(&none, nil, bad, nil, true); err == nil {
			t.Errorf("boots %q: no error", bad)
		}
	}
}

// A window under a second, or no round named, is refused before anything
// runs, and the refusal lists the recipe's rounds.
func TestWorkRefusesBadWindowAndNoRound(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"work", "c3-first", "--window", "0s"}, "--window 0s: a window is at least 1s"},
		{[]string{"work", "c3-first", "--window", "-5s"}, "--window -5s: a window is at least 1s"},
		{[]string{"work"}, "name a round: recipe work has no round \"\" (rounds: c3-first, c3-repeat, c6-first, c6-repeat, pi-validation, or all)"},
	} {
		_, stderr, code := jspark(t, c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", c.args, code, stderr, c.want)
		}
	}
}
