package agent

import (
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"jspark/agent/record"
	"jspark/agent/report"
	"jspark/agent/target"
	"jspark/recipes"
)

// actor is a scripted model that works the built-in recipe's tasks by a
// plan per task: each request of a session answers with the next tool call
// of its task's plan, then plain text (the nudges run out and the session
// ends on its own). The model's side is the test double: what is under
// test is how the runner scores what the session left.
type actor struct {
	mu    sync.Mutex
	plans map[string][][2]string // task prompt → tool calls (name, JSON arguments)
	seeds []int                  // every request's seed
	// idle says which sessions do nothing (their task's prompt, their
	// seed): they answer "done" at once and fail their task (nil: none).
	idle func(prompt string, seed int) bool
}

func (a *actor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req openai.ChatCompletionRequest
	json.NewDecoder(r.Body).Decode(&req)
	a.mu.Lock()
	if req.Seed != nil {
		a.seeds = append(a.seeds, *req.Seed)
	}
	a.mu.Unlock()
	step := 0
	for _, m := range req.Messages {
		if m.Role == openai.ChatMessageRoleAssistant {
			step++
		}
	}
	plan := a.plans[req.Messages[1].Content]
	if a.idle != nil && req.Seed != nil && a.idle(req.Messages[1].Content, *req.Seed) {
		plan = nil
	}
	if step >= len(plan) {
		text("done")(w, req)
		return
	}
	toolCall(plan[step][0], plan[step][1])(w, req)
}

// write is a write tool call's arguments.
func write(path, content string) [2]string {
	b, _ := json.Marshal(map[string]string{"path": path, "content": content})
	return [2]string{"write", string(b)}
}

func bashCall(command string) [2]string {
	b, _ := json.Marshal(map[string]string{"command": command})
	return [2]string{"bash", string(b)}
}

// oracle writes each task's solution files, as the oracle of `recipes
// check` does.
func oracle(r *recipes.Recipe) map[string][][2]string {
	plans := map[string][][2]string{}
	for _, t := range r.Tasks {
		for _, f := range t.SolutionFiles() {
			plans[t.Prompt] = append(plans[t.Prompt], write(f.Path, f.Content))
		}
	}
	return plans
}

// cheater rewrites each task's visible test file to pass trivially and runs
// it, which passes: the hidden copy of that file, put back after the cut,
// must still fail the session.
func cheater(r *recipes.Recipe) map[string][][2]string {
	plans := map[string][][2]string{}
	for _, t := range r.Tasks {
		for _, f := range t.SeedFiles() {
			if strings.HasPrefix(f.Path, "test_") {
				plans[t.Prompt] = append(plans[t.Prompt],
					write(f.Path, "import unittest\n\nclass T(unittest.TestCase):\n    def test_ok(self):\n        pass\n"),
					bashCall("python3 -m unittest -q "+strings.TrimSuffix(f.Path, ".py")))
			}
		}
	}
	return plans
}

func builtinWork(t *testing.T, a *actor, round string, trials int) (*record.Work, string) {
	t.Helper()
	r, err := recipes.Load("work")
	if err != nil {
		t.Fatal(err)
	}
	if a.plans == nil {
		a.plans = oracle(r)
	}
	srv := httptest.NewServer(a)
	defer srv.Close()
	out := t.TempDir()
	res, err := Work(context.Background(), WorkOptions{Recipe: r, Round: round, Trials: trials, Window: time.Minute, Out: out,
		Backends: []target.Backend{{URL: srv.URL + "/v1", Model: "m"}}})
	if err != nil {
		t.Fatal(err)
	}
	return res, out
}

// A scripted model that writes the oracle's files passes every task's
// hidden tests in every trial: pass@1 1 ± 0, pass@2 and pass^2 1, per task
// and per round. Each trial carries its own seed, the recipe's plus k−1.
func TestOracleBackendPassesEveryTrial(t *testing.T) {
	a := &actor{}
	res, out := builtinWork(t, a, "c3-first", 2)
	if len(res.Rounds) != 2 || res.Rounds[0].Trial != 1 || res.Rounds[1].Trial != 2 || *res.Rounds[0].Seed != 7 || *res.Rounds[1].Seed != 8 {
		t.Fatalf("rounds: %d, trials and seeds %+v", len(res.Rounds), res.Rounds)
	}
	seen := map[int]bool{}
	for _, s := range a.seeds {
		seen[s] = true
	}
	if len(seen) != 2 || !seen[7] || !seen[8] {
		t.Errorf("seeds sent: %v", seen)
	}
	for _, r := range res.Rounds {
		if s := r.Summary; s.Checks != 3 || s.ChecksPassed != 3 {
			t.Errorf("%s#%d: passed %d/%d", r.Name, r.Trial, s.ChecksPassed, s.Checks)
		}
		for _, s := range r.Sessions {
			if s.Passed == nil || !*s.Passed || s.Check == nil || s.Check.HiddenTests < 2 || s.End != record.EndNoToolCall {
				t.Errorf("%s#%d %s: passed %v, check %+v, end %s", r.Name, r.Trial, s.Name, s.Passed, s.Check, s.End)
			}
		}
	}
	if len(res.PassRates) != 4 {
		t.Fatalf("pass rates %+v", res.PassRates)
	}
	for _, p := range res.PassRates {
		if p.Attempts != 2*max(p.Tasks, 1) && p.Task != "" || p.Pass1 == nil || *p.Pass1 != 1 || p.Pass1Stderr == nil || *p.Pass1Stderr != 0 ||
			p.K != 2 || p.PassK == nil || *p.PassK != 1 || *p.PassHatK != 1 {
			t.Errorf("pass rate %+v", p)
		}
	}
	var b strings.Builder
	report.Work(&b, res)
	tb, ok := report.ParseTable(b.String(), "Pass rates: builtin:work, 2 trials")
	if !ok {
		t.Fatalf("no pass rates table:\n%s", b.String())
	}
	if c, _ := tb.Cell("c3-first", "pass@1 ± stderr"); c != "1.00 ± 0.00" || len(tb.Rows) != 4 || tb.Rows[3][1] != "all 3 tasks" || tb.Rows[3][5] != "1.00" {
		t.Errorf("pass rates table %+v", tb.Rows)
	}
	for _, trial := range []string{"t1", "t2"} {
		if _, err := os.Stat(filepath.Join(out, "c3-first", trial, "s0-ttl_lru_cache", "workspace", "cache.py")); err != nil {
			t.Error(err)
		}
	}
	// A capped workspace (a tmpfs copied to its folder) records what its
	// copy holds once the box is closed: every file, the check's too.
	kept := 0
	for _, r := range res.Rounds {
		for _, s := range r.Sessions {
			if s.Workspace == nil {
				continue
			}
			files := 0
			filepath.WalkDir(filepath.Join(out, filepath.FromSlash(r.Dir), s.Name, "workspace"), func(_ string, d fs.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					files++
				}
				return err
			})
			kept++
			if w := s.Workspace; w.Files != files || w.Bytes == 0 || w.LeftOut != 0 || w.Capped {
				t.Errorf("%s#%d %s: workspace %+v, %d files in its folder", r.Name, r.Trial, s.Name, *w, files)
			}
		}
	}
	t.Logf("%d of 6 sessions had a capped workspace", kept)
	if !strings.Contains(b.String(), "c3-first#2 ") || !strings.Contains(b.String(), " 3/3\n") {
		t.Errorf("work table:\n%s", b.String())
	}
}

// A session that rewrites the visible test file to pass trivially (and
// runs it: it passes) still fails: after the cut the hidden tests, the
// visible file as seeded among them, are copied over what it wrote.
func TestEditedVisibleTestStillFailsTheHiddenOne(t *testing.T) {
	r, err := recipes.Load("work")
	if err != nil {
		t.Fatal(err)
	}
	res, out := builtinWork(t, &actor{plans: cheater(r)}, "c3-first", 1)
	rd := res.Rounds[0]
	if s := rd.Summary; s.Checks != 3 || s.ChecksPassed != 0 {
		t.Errorf("passed %d/%d", s.ChecksPassed, s.Checks)
	}
	for _, s := range rd.Sessions {
		if len(s.Requests) < 2 || len(s.Requests[1].Calls) != 1 || *s.Requests[1].Calls[0].ExitCode != 0 {
			t.Fatalf("%s: the rewritten visible test did not pass in the session: %+v", s.Name, s.Requests)
		}
		if s.Passed == nil || *s.Passed || s.Check == nil || *s.Check.ExitCode == 0 || s.Check.Output == "" {
			t.Errorf("%s: passed %v, check %+v", s.Name, s.Passed, s.Check)
		}
		task := r.Task(s.Task)
		for _, f := range task.SeedFiles() {
			if !strings.HasPrefix(f.Path, "test_") {
				continue
			}
			if b, _ := os.ReadFile(filepath.Join(out, "c3-first", s.Name, "workspace", f.Path)); string(b) != task.Tests[f.Path] {
				t.Errorf("%s: %s after the check is not the hidden copy", s.Name, f.Path)
			}
		}
	}
}

// Each of the recipe's limits ends a session with its own end, as the
// window does: the requests it may make, the completion tokens it may
// spend, and the time its tools may run (a command running past it is
// stopped there).
func TestLimitsEndSessions(t *testing.T) {
	for _, c := range []struct {
		limits string
		calls  [][2]string
		end    record.End
		reqs   int
	}{
		{"{turns: 3}", [][2]string{bashCall("true"), bashCall("true"), bashCall("true"), bashCall("true")}, record.EndTurns, 3},
		{"{output_tokens: 50}", [][2]string{bashCall("true"), bashCall("true"), bashCall("true"), bashCall("true")}, record.EndOutputTokens, 3},
		{"{tool_seconds: 1}", [][2]string{bashCall("true"), bashCall("sleep 30"), bashCall("true")}, record.EndToolSeconds, 2},
	} {
		t.Run(c.limits, func(t *testing.T) {
			yaml := strings.Replace(recipeYAML, "tasks:", "limits: "+c.limits+"\ntasks:", 1)
			r, err := recipes.Parse("t.yaml", []byte(yaml))
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(&actor{plans: map[string][][2]string{"make it": c.calls}})
			defer srv.Close()
			start := time.Now()
			res, err := Work(context.Background(), WorkOptions{Recipe: r, Round: "one", Window: time.Minute, Out: t.TempDir(),
				Backends: []target.Backend{{URL: srv.URL + "/v1", Model: "m"}}})
			if err != nil {
				t.Fatal(err)
			}
			s := res.Rounds[0].Sessions[0]
			if s.End != c.end || len(s.Requests) != c.reqs {
				t.Errorf("end %s after %d requests, want %s after %d", s.End, len(s.Requests), c.end, c.reqs)
			}
			if took := time.Since(start); c.end == record.EndToolSeconds && took > 20*time.Second {
				t.Errorf("the 30 s command was not stopped at the tool time (%v)", took)
			}
		})
	}
}

// A backend that cannot be reached is the infrastructure's failure: the
// trial runs once more, the first attempt set aside, and its sessions are
// not scored (no pass, no fail) but say why.
func TestUnreachableBackendIsNotScored(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/v1"
	srv.Close() // nothing listens there now
	r, err := recipes.Parse("t.yaml", []byte(strings.Replace(recipeYAML, "prompt: make it", `prompt: make it
    check: "true"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	res, err := Work(context.Background(), WorkOptions{Recipe: r, Round: "one", Window: time.Minute, Out: out, Backends: []target.Backend{{URL: url, Model: "m"}}})
	if err != nil {
		t.Fatal(err)
	}
	rd := res.Rounds[0]
	s := rd.Sessions[0]
	if s.End != record.EndAPIErrors || s.Passed != nil || !strings.Contains(s.Infra, "the backend failed 5 requests in a row") || s.APIErrors != 5 {
		t.Errorf("session: end %s, passed %v, infra %q, %d api errors", s.End, s.Passed, s.Infra, s.APIErrors)
	}
	if !strings.HasPrefix(rd.Retried, "s0-a: the backend failed") || rd.Summary.InfraFailures != 1 || rd.Summary.Checks != 0 {
		t.Errorf("round: retried %q, summary %+v", rd.Retried, rd.Summary)
	}
	if _, err := os.Stat(filepath.Join(out, "one.failed-1", "s0-a", "trajectory.jsonl")); err != nil {
		t.Errorf("the first attempt was not set aside: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "one", roundFile)); err == nil {
		t.Error("a trial that failed for the infrastructure is marked finished: --resume would not run it again")
	}
	if p := res.PassRates[0]; p.Attempts != 0 || p.Unscored != 1 || p.Pass1 != nil {
		t.Errorf("pass rate %+v", p)
	}
	var b strings.Builder
	report.Work(&b, res)
	if !strings.Contains(b.String(), "one s0-a: not scored: infrastructure failure: the backend failed 5 requests in a row") {
		t.Errorf("work table:\n%s", b.String())
	}
}

// A sandbox that cannot start (a file stands where its session's folder
// goes) is the infrastructure's failure: the trial runs once more, the
// first attempt set aside with what blocked it, and the second is scored
// as if nothing had happened.
func TestSandboxStartFailureIsRetriedOnce(t *testing.T) {
	r, err := recipes.Parse("t.yaml", []byte(strings.Replace(recipeYAML, "prompt: make it", `prompt: make it
    check: "true"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := os.MkdirAll(filepath.Join(out, "one"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "one", "s0-a"), []byte("in the way"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(&actor{plans: map[string][][2]string{}})
	defer srv.Close()
	res, err := Work(context.Background(), WorkOptions{Recipe: r, Round: "one", Window: time.Minute, Out: out, Backends: []target.Backend{{URL: srv.URL + "/v1", Model: "m"}}})
	if err != nil {
		t.Fatal(err)
	}
	rd := res.Rounds[0]
	s := rd.Sessions[0]
	if !strings.HasPrefix(rd.Retried, "s0-a: the round could not start: session s0-a: ") || s.Infra != "" || s.Passed == nil || !*s.Passed || s.End != record.EndNoToolCall {
		t.Errorf("retried %q; session: infra %q, passed %v, end %s", rd.Retried, s.Infra, s.Passed, s.End)
	}
	if b, err := os.ReadFile(filepath.Join(out, "one.failed-1", "s0-a")); string(b) != "in the way" {
		t.Errorf("the first attempt was not set aside: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "one", roundFile)); err != nil {
		t.Errorf("the retried trial is not marked finished: %v", err)
	}
	if p := res.PassRates[0]; p.Attempts != 1 || p.Passed != 1 || p.Unscored != 0 {
		t.Errorf("pass rate %+v", p)
	}
}

// A resumed run keeps a finished round but runs again a first round whose
// repeat round did not finish, with it: the repeat measures the cache its
// first round filled in the same engine. With both finished it sends
// nothing.
func TestResumeRunsAFirstRoundAgainWithItsRepeat(t *testing.T) {
	r, err := recipes.Parse("t.yaml", []byte(recipeYAML))
	if err != nil {
		t.Fatal(err)
	}
	a := &actor{plans: map[string][][2]string{}}
	srv := httptest.NewServer(a)
	defer srv.Close()
	out := t.TempDir()
	run := func(resume bool) *record.Work {
		t.Helper()
		res, err := Work(context.Background(), WorkOptions{Recipe: r, Round: "one-repeat", Window: time.Minute, Out: out, Resume: resume,
			Backends: []target.Backend{{URL: srv.URL + "/v1", Model: "m"}}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	requests := func() int {
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(a.seeds)
	}
	run(false)
	full := requests()
	if full != 4 {
		t.Fatalf("a run sent %d requests, want 4 (2 sessions, a nudge each)", full)
	}
	run(true)
	if n := requests() - full; n != 0 {
		t.Errorf("resuming a finished run sent %d requests", n)
	}
	if err := os.Remove(filepath.Join(out, "one-repeat", roundFile)); err != nil {
		t.Fatal(err)
	}
	res := run(true)
	if n := requests() - full; n != 4 {
		t.Errorf("resuming with the repeat unfinished sent %d requests, want both rounds' 4", n)
	}
	if res.RepeatPairs.Total != 1 || res.RepeatPairs.Identical != 1 {
		t.Errorf("repeat pairs %+v", res.RepeatPairs)
	}
	for _, name := range []string{"one", "one-repeat"} {
		if _, err := os.Stat(filepath.Join(out, name, roundFile)); err != nil {
			t.Error(err)
		}
	}
}
