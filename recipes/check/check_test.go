package check

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"jspark/recipes"
	"jspark/sandbox"
)

const outputLimit = 4000

func builtin(t *testing.T) *recipes.Recipe {
	t.Helper()
	r, err := recipes.Load("work")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// newBox is a sandbox seeded with task's files.
func newBox(t *testing.T, task *recipes.Task) *sandbox.Sandbox {
	t.Helper()
	box, err := sandbox.New(filepath.Join(t.TempDir(), "workspace"), task.Files, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { box.Close() })
	return box
}

func exec(t *testing.T, box *sandbox.Sandbox, cmd string) sandbox.Result {
	t.Helper()
	r, err := box.Exec(context.Background(), cmd, 20*time.Second, outputLimit)
	if err != nil {
		t.Fatalf("%q: %v", cmd, err)
	}
	return r
}

// Every task of the built-in recipe discriminates: its oracle passes the
// hidden tests and its nop fails them.
func TestBuiltinRecipeDiscriminates(t *testing.T) {
	r := builtin(t)
	reports, err := Recipe(context.Background(), r, Options{Out: t.TempDir(), OutputLimit: outputLimit, Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != len(r.Tasks) {
		t.Fatalf("%d reports for %d tasks", len(reports), len(r.Tasks))
	}
	for i, rep := range reports {
		task := &r.Tasks[i]
		if rep.Task != task.ID || rep.Problem != "" || rep.NotRunnable != "" || rep.Oracle == nil || rep.Nop == nil {
			t.Errorf("%s: %+v", task.ID, rep)
			continue
		}
		o, n := rep.Oracle.Result, rep.Nop.Result
		if !o.Passed || n.Passed || rep.Oracle.ActError != "" {
			t.Errorf("%s: oracle %+v, nop %+v", task.ID, o, n)
		}
		if task.Check != "" {
			if len(task.Tests) == 0 || task.Solution == nil {
				t.Errorf("%s: a code task without hidden tests or a solution", task.ID)
			}
			if o.ExitCode == nil || *o.ExitCode != 0 || n.ExitCode == nil || *n.ExitCode == 0 {
				t.Errorf("%s: oracle exit %v, nop exit %v", task.ID, o.ExitCode, n.ExitCode)
			}
			// unittest names the hidden test class when the nop fails it.
			if !strings.Contains(n.Output, "_hidden") {
				t.Errorf("%s: the nop's output shows no hidden test:\n%s", task.ID, n.Output)
			}
		} else if o.ExpectMet == nil || !*o.ExpectMet || *n.ExpectMet {
			t.Errorf("%s: expect oracle %v nop %v", task.ID, o.ExpectMet, n.ExpectMet)
		}
	}
}

// A session that rewrites the visible test to pass trivially, and defines a
// python3 that "passes", passes its own visible check but fails once the
// hidden tests are copied in and the check runs in a fresh shell.
func TestEditedVisibleTestStillFailsHidden(t *testing.T) {
	r := builtin(t)
	task := r.Task("ttl_lru_cache")
	box := newBox(t, task)
	trivial := "import unittest\n\nclass TestTTLCache(unittest.TestCase):\n    def test_nothing(self):\n        pass\n"
	if err := box.WriteFile("test_cache.py", []byte(trivial)); err != nil {
		t.Fatal(err)
	}
	if got := exec(t, box, task.Check); got.ExitCode != 0 {
		t.Fatalf("the cheat does not pass the visible check: %+v", got)
	}
	exec(t, box, "python3() { echo OK; }")
	if got := exec(t, box, "python3 -m unittest -q"); got.ExitCode != 0 || got.Output != "OK\n" {
		t.Fatalf("the shell function does not stand in for python3: %+v", got)
	}
	res, err := Verify(context.Background(), box, task, "", outputLimit)
	if err != nil {
		t.Fatal(err)
	}
	if res.Passed || res.ExitCode == nil || *res.ExitCode != 1 || !strings.Contains(res.Output, "NotImplementedError") {
		t.Fatalf("the cheat passes: %+v", res)
	}
	// The visible test is back as seeded.
	b, err := os.ReadFile(filepath.Join(box.Root(), "test_cache.py"))
	if err != nil || string(b) != task.Files["test_cache.py"] {
		t.Errorf("test_cache.py after Verify: %q, %v", b, err)
	}
}

// Whatever the agent left at a hidden test's path (a folder, a symlink) is
// replaced, and a working solution still passes.
func TestHiddenTestsReplaceWhatIsThere(t *testing.T) {
	r := builtin(t)
	task := r.Task("interval_rooms")
	box := newBox(t, task)
	for _, f := range task.SolutionFiles() {
		if err := box.WriteFile(f.Path, []byte(f.Content)); err != nil {
			t.Fatal(err)
		}
	}
	exec(t, box, "mkdir -p test_rooms_hidden.py/x && ln -sf /dev/null test_rooms.py")
	res, err := Verify(context.Background(), box, task, "", outputLimit)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed || res.ExitCode == nil || *res.ExitCode != 0 || !strings.Contains(res.Output, "Ran 14 tests") {
		t.Fatalf("%+v", res)
	}
}

// A hidden test whose folder the agent replaced with a symlink cannot be
// written: the session fails with the reason, and it is not an error.
func TestHiddenTestBehindSymlinkFails(t *testing.T) {
	task := &recipes.Task{ID: "t", Check: "cat sub/t.txt", CheckTimeout: recipes.Duration(10 * time.Second),
		Tests: map[string]string{"sub/t.txt": "hidden\n"}}
	box := newBox(t, task)
	exec(t, box, "ln -s /tmp sub")
	res, err := Verify(context.Background(), box, task, "", outputLimit)
	if err != nil {
		t.Fatal(err)
	}
	if res.Passed || res.ExitCode == nil || *res.ExitCode != copyFailed || !strings.Contains(res.Output, "hidden test sub/t.txt: could not be written") {
		t.Fatalf("%+v", res)
	}
}

// stricter breaks one edge case of each code task's solution (file: its
// edits, each an old string found exactly once and its replacement).
var stricter = map[string]struct {
	file, why string
	edits     [][2]string
}{
	"dependency_waves": {"waves.py", "it names every task left on a cycle, not one cycle",
		[][2]string{{`raise CycleError(" -> ".join(find_cycle(needs, left)))`, `raise CycleError("cycle among: " + " -> ".join(sorted(left)))`}}},
	"interval_rooms": {"rooms.py", "it reuses the room freed last, not the lowest free number",
		[][2]string{{`heapq.heappush(free, heapq.heappop(busy)[1])`, `free.append(heapq.heappop(busy)[1])`}, {`room = heapq.heappop(free)`, `room = free.pop()`}}},
	"markdown_toc": {"toc.py", "it knows only backtick fences, not ~~~",
		[][2]string{{"FENCE = re.compile(r\"^ {0,3}(`{3,}|~{3,})\")", "FENCE = re.compile(r\"^ {0,3}(`{3,})\")"}}},
	"structured_log_summary": {"logsum.py", "it takes percentiles at index int(p*n), not by nearest rank",
		[][2]string{{`sorted_values[max(1, math.ceil(p / 100 * len(sorted_values))) - 1]`, `sorted_values[min(len(sorted_values) - 1, int(p / 100 * len(sorted_values)))]`}}},
	"token_bucket": {"limiter.py", "it never forgets a bucket",
		[][2]string{{"        self._forget(now)\n", ""}}},
	"ttl_lru_cache": {"cache.py", "it evicts when a key already in a full cache is put again",
		[][2]string{{`if key not in self.entries and len(self.entries) >= self.capacity:`, `if len(self.entries) >= self.capacity:`}}},
}

// The hidden tests are stricter than the visible ones: for each code task,
// its solution with one edge case broken (stricter) passes the visible
// tests and fails the hidden ones.
func TestHiddenTestsAreStricter(t *testing.T) {
	r := builtin(t)
	for _, task := range r.Tasks {
		if _, ok := stricter[task.ID]; task.Check != "" && !ok {
			t.Errorf("task %s has no case in stricter", task.ID)
		}
	}
	for id, c := range stricter {
		t.Run(id, func(t *testing.T) {
			t.Parallel()
			task := r.Task(id)
			if task == nil {
				t.Fatalf("no task %s", id)
			}
			box := newBox(t, task)
			broken := false
			for _, f := range task.SolutionFiles() {
				b := f.Content
				if f.Path == c.file {
					for _, e := range c.edits {
						if n := strings.Count(b, e[0]); n != 1 {
							t.Fatalf("%s: %q found %d times", f.Path, e[0], n)
						}
						b = strings.Replace(b, e[0], e[1], 1)
					}
					broken = true
				}
				if err := box.WriteFile(f.Path, []byte(b)); err != nil {
					t.Fatal(err)
				}
			}
			if !broken {
				t.Fatalf("the solution has no file %s", c.file)
			}
			if got := exec(t, box, task.Check); got.ExitCode != 0 {
				t.Fatalf("%s, yet fails the visible tests:\n%s", c.why, got.Output)
			}
			res, err := Verify(context.Background(), box, task, "", outputLimit)
			if err != nil {
				t.Fatal(err)
			}
			if res.Passed || !strings.Contains(res.Output, "FAILED") {
				t.Fatalf("%s, yet passes the hidden tests: %+v", c.why, res)
			}
		})
	}
}

// Each way a task fails to discriminate is named.
func TestProblems(t *testing.T) {
	base := func() recipes.Task {
		return recipes.Task{ID: "x", Kind: "code", Prompt: "p", Check: "test -f done", CheckTimeout: recipes.Duration(10 * time.Second),
			Solution: &recipes.Solution{Script: "touch done"}}
	}
	cases := []struct {
		name string
		edit func(*recipes.Task)
		want string
	}{
		{"discriminates", func(*recipes.Task) {}, ""},
		{"no solution", func(t *recipes.Task) { t.Solution = nil }, "the oracle could not solve it: " + ErrNoSolution.Error()},
		{"script fails", func(t *recipes.Task) { t.Solution.Script = "echo no; exit 3" }, "the oracle could not solve it: solution script exited 3: no\n"},
		{"oracle fails", func(t *recipes.Task) { t.Solution.Script = "touch other" }, "the oracle fails it: the check exited 1"},
		{"nop passes", func(t *recipes.Task) { t.Check = "true" }, "the untouched workspace passes it: the check does not tell work from none"},
		{"check times out", func(t *recipes.Task) {
			t.Check, t.CheckTimeout = "sleep 30", recipes.Duration(300*time.Millisecond)
		}, "the oracle fails it: the check timed out after"},
		{"nothing scores it", func(t *recipes.Task) { t.Check, t.Solution = "", nil }, "nothing scores it: give it a check or an expected reply"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			task := base()
			c.edit(&task)
			r := &recipes.Recipe{Window: recipes.Duration(10 * time.Second), Tasks: []recipes.Task{task}}
			rep, err := Task(context.Background(), r, &r.Tasks[0], Options{Out: t.TempDir(), OutputLimit: outputLimit, Jobs: 1})
			if err != nil {
				t.Fatal(err)
			}
			if c.want == "" && rep.Problem != "" || !strings.HasPrefix(rep.Problem, c.want) {
				t.Errorf("problem %q, want %q", rep.Problem, c.want)
			}
		})
	}
}

// A task that cannot run here is reported with its reason, not run.
func TestNotRunnableIsListed(t *testing.T) {
	r := &recipes.Recipe{Tasks: []recipes.Task{{ID: "d", Check: "false", NotRunnable: "needs its Docker image"}}}
	out := t.TempDir()
	reps, err := Recipe(context.Background(), r, Options{Out: out, Jobs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 || reps[0].NotRunnable != "needs its Docker image" || reps[0].Oracle != nil || reps[0].Problem != "" {
		t.Errorf("%+v", reps)
	}
	if _, err := os.Stat(filepath.Join(out, "d")); err == nil {
		t.Error("a sandbox was made for it")
	}
}
