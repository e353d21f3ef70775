package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// resumeRecipe runs one session a trial; its check passes once the session
// wrote done.txt, which the scripted endpoint below has it do.
const resumeRecipe = `name: resume
system: Use the tools.
tools: [bash, write]
sampling: {max_tokens: 64, seed: 10, tool_choice: auto}
nudge: {message: Go on., max: 1}
shell: {timeout: 5s, output_limit: 400}
tasks:
  - {id: one, kind: code, prompt: Write done.txt., check: test -f done.txt}
rounds:
  - {name: solo, concurrency: 1, tasks: [one]}
`

// stepper is an OpenAI-compatible endpoint that works resumeRecipe's task:
// a session's first request writes done.txt, every later one answers
// "done" (the nudge runs out and the session ends on its own). A request
// with seed hang (a trial's, see agent's seeds) is held until its client
// goes, after telling hung: the run is interrupted there.
type stepper struct {
	hang int64 // 0: none
	hung chan struct{}
	n    atomic.Int64 // chat requests answered or held
}

func (s *stepper) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.NotFound(w, r)
		return
	}
	s.n.Add(1)
	var req struct {
		Seed     *int64 `json:"seed"`
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	json.NewDecoder(r.Body).Decode(&req)
	if req.Seed != nil && *req.Seed == atomic.LoadInt64(&s.hang) {
		select {
		case s.hung <- struct{}{}:
		default:
		}
		<-r.Context().Done()
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunks := []string{`{"choices":[{"index":0,"delta":{"content":"done"},"finish_reason":"stop"}]}`}
	if len(req.Messages) == 2 { // system and prompt: the session's first request
		args, _ := json.Marshal(`{"path":"done.txt","content":"ok\n"}`)
		chunks = []string{
			`{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"write"}}]}}]}`,
			fmt.Sprintf(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":%s}}]}}]}`, args),
			`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		}
	}
	chunks = append(chunks, `{"choices":[],"usage":{"prompt_tokens":50,"completion_tokens":10,"total_tokens":60}}`)
	for _, c := range chunks {
		fmt.Fprintf(w, "data: %s\n\n", c)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// hashes is every file under dir by its path, with its sha256.
func hashes(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		sum := sha256.Sum256(b)
		out[p] = hex.EncodeToString(sum[:])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A run interrupted by SIGINT in its second trial stops saying how to
// finish it; `--resume` finishes it: the finished trial is read back with
// its files untouched (their hashes compared), the interrupted one and the
// last run, and results.json holds all three, each session scored.
func TestWorkSIGINTThenResume(t *testing.T) { interruptThenResume(t, os.Interrupt) }

// A run killed outright (SIGKILL: no handler runs, the trial's sandbox and
// partial files stay behind) is finished by `--resume` just the same.
func TestWorkSIGKILLThenResume(t *testing.T) { interruptThenResume(t, os.Kill) }

func interruptThenResume(t *testing.T, sig os.Signal) {
	dir := t.TempDir()
	recipe := filepath.Join(dir, "resume.yaml")
	if err := os.WriteFile(recipe, []byte(resumeRecipe), 0o644); err != nil {
		t.Fatal(err)
	}
	be := &stepper{hang: 11, hung: make(chan struct{}, 1)} // trial 2's seed: 10 + 1
	srv := httptest.NewServer(be)
	defer srv.Close()
	out := filepath.Join(dir, "out")
	args := []string{"work", "solo", "--recipe", recipe, "--endpoint", srv.URL + "/v1", "--served-model", "m",
		"--trials", "3", "--window", "30s", "--out", out}

	cmd := exec.Command(binary, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-be.hung:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("trial 2 never asked:\n%s", stderr.String())
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Fatalf("interrupted run: %v\n%s", err, stderr.String())
	}
	if sig == os.Interrupt && !strings.Contains(stderr.String(), "--resume` finishes the run") {
		t.Fatalf("interrupted run does not say how to finish it:\n%s", stderr.String())
	}
	first := hashes(t, filepath.Join(out, "solo", "t1"))
	if len(first) < 4 {
		t.Fatalf("trial 1 left %d files: %v", len(first), first)
	}
	if _, err := os.Stat(filepath.Join(out, "solo", "t2", "round.json")); err == nil {
		t.Fatal("the interrupted trial is marked finished")
	}
	if res := readResults(t, out); len(res.Rounds) != 1 {
		t.Errorf("the interrupted run's results.json has %d round trials, want the finished one", len(res.Rounds))
	}

	atomic.StoreInt64(&be.hang, 0)
	before := be.n.Load()
	o, e, code := jspark(t, append(args, "--resume")...)
	if code != 0 {
		t.Fatalf("resume: exit %d: %s", code, e)
	}
	if got := hashes(t, filepath.Join(out, "solo", "t1")); !maps.Equal(got, first) {
		t.Errorf("the finished trial's files changed:\nbefore %v\nafter  %v", first, got)
	}
	// Trials 2 and 3 ran, 3 requests each (write, done, done after the nudge).
	if n := be.n.Load() - before; n != 6 {
		t.Errorf("the resumed run sent %d requests, want 6 (trial 1 not again)", n)
	}
	res := readResults(t, out)
	if len(res.Rounds) != 3 {
		t.Fatalf("%d round trials", len(res.Rounds))
	}
	for i, r := range res.Rounds {
		if s := r.Sessions[0]; r.Trial != i+1 || s.Passed == nil || !*s.Passed {
			t.Errorf("trial %d: %+v passed %v", r.Trial, r.Summary, s.Passed)
		}
		if _, err := os.Stat(filepath.Join(out, "solo", fmt.Sprintf("t%d", i+1), "round.json")); err != nil {
			t.Error(err)
		}
	}
	if len(res.PassRates) == 0 || res.PassRates[0].Passed != 3 || !strings.Contains(o, "Pass rates") {
		t.Errorf("pass rates %+v\n%s", res.PassRates, o)
	}
}

// An --out that holds another run's results is refused, and a resume of a
// finished run sends nothing; a resume must be the same run: one with other
// trials is refused naming the difference.
func TestWorkOutIsOneRuns(t *testing.T) {
	dir := t.TempDir()
	recipe := filepath.Join(dir, "resume.yaml")
	if err := os.WriteFile(recipe, []byte(resumeRecipe), 0o644); err != nil {
		t.Fatal(err)
	}
	be := &stepper{hung: make(chan struct{}, 1)}
	srv := httptest.NewServer(be)
	defer srv.Close()
	out := filepath.Join(dir, "out")
	args := []string{"work", "solo", "--recipe", recipe, "--endpoint", srv.URL + "/v1", "--served-model", "m", "--window", "30s", "--out", out}
	if _, e, code := jspark(t, args...); code != 0 {
		t.Fatalf("exit %d: %s", code, e)
	}
	sent := be.n.Load()
	if _, e, code := jspark(t, args...); code == 0 || !strings.Contains(e, "holds another run's results") {
		t.Errorf("a second run into the same --out: exit %d: %s", code, e)
	}
	if _, e, code := jspark(t, append(args, "--resume")...); code != 0 || be.n.Load() != sent {
		t.Errorf("resuming a finished run: exit %d, %d more requests: %s", code, be.n.Load()-sent, e)
	}
	if _, e, code := jspark(t, append(args, "--resume", "--trials", "2")...); code == 0 || !strings.Contains(e, "is another run: trials 1, not 2") {
		t.Errorf("resuming with other trials: exit %d: %s", code, e)
	}
	if _, e, code := jspark(t, "work", "solo", "--recipe", recipe, "--resume"); code == 0 || !strings.Contains(e, "--resume needs --out") {
		t.Errorf("--resume without --out: exit %d: %s", code, e)
	}
}
