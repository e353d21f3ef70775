package recipes

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestBuiltinWork(t *testing.T) {
	r, err := Load("work")
	if err != nil {
		t.Fatal(err)
	}
	if r.Window.D() != 180*time.Second || r.File != "builtin:work" {
		t.Errorf("window %v file %s", r.Window.D(), r.File)
	}
	for name, n := range map[string]int{"c3-first": 3, "c3-repeat": 3, "c6-first": 6, "c6-repeat": 6} {
		rd := r.Round(name)
		if rd == nil {
			t.Fatalf("no round %s", name)
		}
		plan := r.Plan(rd)
		if len(plan) != n {
			t.Errorf("%s: %d sessions", name, len(plan))
		}
		if rd.RepeatOf != "" {
			first := r.Plan(r.Round(rd.RepeatOf))
			for i := range plan {
				if plan[i] != first[i] {
					t.Errorf("%s session %d: task %s, its twin has %s", name, i, plan[i].ID, first[i].ID)
				}
			}
		}
	}
	if a := r.AgentOf(r.Round("pi-validation")); a != (Agent{"pi", "0.73.1"}) || r.AgentOf(r.Round("c6-repeat")).External() {
		t.Errorf("pi-validation agent %+v", a)
	}
	if got := Builtin(); len(got) != 1 || got[0] != "work" {
		t.Errorf("builtin %v", got)
	}
}

const good = `name: t
tools: [bash, read]
sampling:
  max_tokens: 64
tasks:
  - id: a
    kind: code
    prompt: do it
rounds:
  - name: r1
    concurrency: 2
    tasks: [a]
`

// Each kind of mistake, with the exact message a recipe author sees.
func TestBadRecipes(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"syntax", "name: t\ntools:\n\t- bash\n", "bad.yaml:3: found character that cannot start any token"},
		{"unknown field", strings.Replace(good, "tools:", "tool:", 1), "bad.yaml:2: tool: not a field of the recipe"},
		{"wrong type", strings.Replace(good, "max_tokens: 64", "max_tokens: many", 1), `bad.yaml:4: sampling.max_tokens: "many" is not a whole number`},
		{"bad duration", "window: soon\n" + good, `bad.yaml:1: window: "soon" is not a duration (like 180s or 2m)`},
		{"nested unknown field", good + "nudge:\n  mx: 2\n", "bad.yaml:14: nudge.mx: not a field of nudge"},
		{"list for a number", strings.Replace(good, "max_tokens: 64", "max_tokens: [64]", 1), "bad.yaml:4: sampling.max_tokens: a list is not a whole number"},
		{"missing name", strings.Replace(good, "name: t\n", "", 1), "bad.yaml:1: name: is required"},
		{"unknown tool", strings.Replace(good, "[bash, read]", "[bash, rm]", 1), "bad.yaml:2: tools[1]: unknown tool \"rm\" (known: bash, read, write, edit, list, search)"},
		{"duplicate tool", strings.Replace(good, "[bash, read]", "[bash, bash]", 1), `bad.yaml:2: tools[1]: "bash" is listed twice`},
		{"no max_tokens", strings.Replace(good, "  max_tokens: 64\n", "  seed: 1\n", 1), "bad.yaml:3: sampling.max_tokens: is required and must be positive"},
		{"temperature", strings.Replace(good, "  max_tokens: 64\n", "  max_tokens: 64\n  temperature: 3\n", 1), "bad.yaml:5: sampling.temperature: 3 is outside [0, 2]"},
		{"tool_choice", strings.Replace(good, "  max_tokens: 64\n", "  max_tokens: 64\n  tool_choice: write\n", 1), `bad.yaml:5: sampling.tool_choice: "write" is neither auto, required, none nor one of the recipe's tools`},
		{"nudge", good + "nudge:\n  max: 2\n", "bad.yaml:13: nudge.message: is required when nudge.max is above 0"},
		{"task kind", strings.Replace(good, "kind: code", "kind: essay", 1), `bad.yaml:7: tasks[0].kind: "essay" is neither prose nor code`},
		{"task prompt", strings.Replace(good, "    prompt: do it\n", "", 1), "bad.yaml:6: tasks[0].prompt: is required"},
		{"task id", strings.Replace(good, "id: a", "id: A b", 1), "bad.yaml:6: tasks[0].id: \"A b\": use lower-case letters, digits, _ and -\nbad.yaml:12: rounds[0].tasks[0]: no task has id \"a\""},
		{"seed path", strings.Replace(good, "    prompt: do it\n", "    prompt: do it\n    files:\n      ../x: y\n", 1), "bad.yaml:10: tasks[0].files.../x: seed file paths must be relative and stay inside the workspace"},
		{"round task", strings.Replace(good, "tasks: [a]", "tasks: [a, b]", 1), `bad.yaml:12: rounds[0].tasks[1]: no task has id "b"`},
		{"concurrency", strings.Replace(good, "concurrency: 2", "concurrency: 0", 1), "bad.yaml:11: rounds[0].concurrency: must be at least 1"},
		{"repeat of nothing", good + "  - name: r2\n    repeat_of: r9\n", `bad.yaml:14: rounds[1].repeat_of: no round is named "r9"`},
		{"repeat with tasks", good + "  - name: r2\n    repeat_of: r1\n    tasks: [a]\n", `bad.yaml:13: rounds[1]: a repeat round takes its concurrency, tasks and agent from "r1"; leave them out`},
		{"repeat with agent", good + "  - name: r2\n    repeat_of: r1\n    agent: {kind: pi, version: 1.0.0}\n", `bad.yaml:13: rounds[1]: a repeat round takes its concurrency, tasks and agent from "r1"; leave them out`},
		{"agent kind", "agent: {kind: claude}\n" + good, `bad.yaml:1: agent.kind: "claude" is not an agent (known: jspark, pi, codex, opencode)`},
		{"agent version missing", "agent: {kind: pi}\n" + good, "bad.yaml:1: agent.version: is required for pi: the npm package's exact version, like 1.2.3"},
		{"agent version range", "agent:\n  kind: codex\n  version: ^0.171.0\n" + good, `bad.yaml:3: agent.version: "^0.171.0" is not an exact version (like 1.2.3; no ranges or tags)`},
		{"agent version tag", strings.Replace(good, "    tasks: [a]\n", "    tasks: [a]\n    agent: {kind: opencode, version: latest}\n", 1), `bad.yaml:13: rounds[0].agent.version: "latest" is not an exact version (like 1.2.3; no ranges or tags)`},
		{"jspark version", "agent: {kind: jspark, version: 1.0.0}\n" + good, "bad.yaml:1: agent.version: jspark's own loop has no version; leave it out"},
		{"duplicate round", good + "  - name: r1\n    concurrency: 1\n    tasks: [a]\n", `bad.yaml:13: rounds[1].name: "r1" is used by an earlier round`},
		{"empty", "", "bad.yaml:1: empty recipe"},
		{"tests without check", strings.Replace(good, "    prompt: do it\n", "    prompt: do it\n    tests: {t.py: x}\n", 1), "bad.yaml:9: tasks[0].tests: hidden tests need a check to run them: give the task a check"},
		{"test path", strings.Replace(good, "    prompt: do it\n", "    prompt: do it\n    check: 'true'\n    tests:\n      /etc/t.py: x\n", 1), "bad.yaml:11: tasks[0].tests./etc/t.py: test file paths must be relative and stay inside the workspace"},
		{"empty solution", strings.Replace(good, "    prompt: do it\n", "    prompt: do it\n    check: 'true'\n    solution: {}\n", 1), "bad.yaml:10: tasks[0].solution: give the solution's files, a script or both"},
		{"solution without check", strings.Replace(good, "    prompt: do it\n", "    prompt: do it\n    solution: {script: 'true'}\n", 1), "bad.yaml:9: tasks[0].solution: a solution is proved by the task's check: give the task a check"},
		{"solution path", strings.Replace(good, "    prompt: do it\n", "    prompt: do it\n    check: 'true'\n    solution:\n      files: {../a.py: x}\n", 1), "bad.yaml:11: tasks[0].solution.files.../a.py: solution file paths must be relative and stay inside the workspace"},
		{"solution script type", strings.Replace(good, "    prompt: do it\n", "    prompt: do it\n    check: 'true'\n    solution:\n      script: [a]\n", 1), "bad.yaml:11: tasks[0].solution.script: a list is not text"},
		{"check timeout", strings.Replace(good, "    prompt: do it\n", "    prompt: do it\n    check: 'true'\n    check_timeout: -5s\n", 1), "bad.yaml:10: tasks[0].check_timeout: must be positive"},
		{"not runnable in a round", strings.Replace(good, "    prompt: do it\n", "    prompt: do it\n    not_runnable: needs its Docker image\n", 1), `bad.yaml:13: rounds[0].tasks[0]: task "a" is not runnable here (needs its Docker image)`},
		{"limits zero", good + "limits: {turns: 0}\n", "bad.yaml:13: limits.turns: 0: must be positive (leave it out for no limit)"},
		{"limits negative", good + "limits:\n  output_tokens: -1\n", "bad.yaml:14: limits.output_tokens: -1: must be positive (leave it out for no limit)"},
		{"limits seconds as duration", good + "limits:\n  tool_seconds: 2m\n", `bad.yaml:14: limits.tool_seconds: "2m" is not a whole number`},
		{"limits unknown", good + "limits:\n  tokens: 5\n", "bad.yaml:14: limits.tokens: not a field of limits"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(c.yaml))
			if err == nil {
				t.Fatalf("no error, want %s", c.want)
			}
			if err.Error() != c.want {
				t.Errorf("got  %s\nwant %s", err, c.want)
			}
		})
	}
	if _, err := Parse("good.yaml", []byte(good)); err != nil {
		t.Fatalf("good recipe: %v", err)
	}
}

// A round's agent replaces the recipe's; a repeat takes its first round's.
func TestAgentOfRound(t *testing.T) {
	y := "agent: {kind: opencode, version: 1.18.0}\n" + good + "    agent: {kind: pi, version: 0.73.1}\n  - {name: r2, repeat_of: r1}\n  - {name: r3, concurrency: 1, tasks: [a]}\n"
	r, err := Parse("a.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]Agent{"r1": {"pi", "0.73.1"}, "r2": {"pi", "0.73.1"}, "r3": {"opencode", "1.18.0"}} {
		if got := r.AgentOf(r.Round(name)); got != want || !got.External() {
			t.Errorf("%s: agent %+v, want %+v", name, got, want)
		}
	}
	plain, _ := Parse("good.yaml", []byte(good))
	if a := plain.AgentOf(plain.Round("r1")); a != (Agent{Kind: "jspark"}) || a.External() {
		t.Errorf("default agent %+v", a)
	}
}

func TestSeveralErrorsInLineOrder(t *testing.T) {
	y := strings.Replace(strings.Replace(good, "kind: code", "kind: x", 1), "name: t\n", "name: t\nwindow: -1s\n", 1)
	_, err := Parse("f.yaml", []byte(y))
	want := "f.yaml:2: window: must be positive\nf.yaml:8: tasks[0].kind: \"x\" is neither prose nor code"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

func TestLoadUnknown(t *testing.T) {
	_, err := Load("nosuch")
	if err == nil || err.Error() != `no recipe "nosuch": not a built-in (work) nor a file` {
		t.Errorf("%v", err)
	}
}

// Hidden tests, a solution, a check timeout and limits, as a recipe gives
// them and as the runner reads them.
func TestTestsSolutionAndLimits(t *testing.T) {
	y := strings.Replace(good, "    prompt: do it\n", `    prompt: do it
    files: {a.py: stub, test_a.py: visible}
    check: python3 -m unittest -q
    check_timeout: 45s
    tests: {test_a.py: visible, z/test_hidden.py: hidden}
    solution:
      files: {a.py: real}
      script: python3 -c 'print(1)'
`, 1)
	y = strings.Replace(y, "rounds:", "  - {id: b, kind: code, prompt: p, check: 'true'}\nrounds:", 1)
	y += "limits: {turns: 40, output_tokens: 20000, tool_seconds: 90}\nshell: {timeout: 7s}\n"
	r, err := Parse("t.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	a, b := r.Task("a"), r.Task("b")
	want := []File{{"test_a.py", "visible"}, {"z/test_hidden.py", "hidden"}}
	if got := a.HiddenTests(); !slices.Equal(got, want) {
		t.Errorf("hidden tests %v, want %v", got, want)
	}
	if got := a.SolutionFiles(); !slices.Equal(got, []File{{"a.py", "real"}}) || a.Solution.Script != "python3 -c 'print(1)'" {
		t.Errorf("solution %+v", a.Solution)
	}
	if a.CheckTimeout.D() != 45*time.Second || b.CheckTimeout.D() != 7*time.Second {
		t.Errorf("check timeouts %v, %v (b takes shell.timeout)", a.CheckTimeout.D(), b.CheckTimeout.D())
	}
	if r.Limits != (Limits{Turns: 40, OutputTokens: 20000, ToolSeconds: 90}) || r.Limits.ToolTime() != 90*time.Second || r.Limits.None() {
		t.Errorf("limits %+v", r.Limits)
	}
	if ok, _ := a.Runnable(); !ok || b.Solution != nil || b.HiddenTests() == nil || len(b.HiddenTests()) != 0 {
		t.Errorf("b: %+v", b)
	}
	plain, _ := Parse("good.yaml", []byte(good))
	if !plain.Limits.None() {
		t.Errorf("a recipe without limits has %+v", plain.Limits)
	}
}

// A task that cannot run here may stand in a recipe no round runs it from.
func TestNotRunnableTask(t *testing.T) {
	y := strings.Replace(good, "rounds:", "  - {id: d, kind: code, prompt: p, check: 'true', not_runnable: needs its image}\nrounds:", 1)
	r, err := Parse("t.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := r.Task("d").Runnable(); ok || why != "needs its image" {
		t.Errorf("runnable %v, %q", ok, why)
	}
}

// Every code task of the built-in recipe has hidden tests that restore its
// visible test file as seeded, and a solution (recipes/check proves them).
func TestBuiltinHiddenTests(t *testing.T) {
	r, err := Load("work")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range r.Tasks {
		if task.Kind != "code" {
			continue
		}
		if task.Solution == nil || len(task.Solution.Files) == 0 || len(task.Tests) < 2 {
			t.Errorf("%s: solution %v, %d hidden tests", task.ID, task.Solution, len(task.Tests))
		}
		for p, c := range task.Files {
			if strings.HasPrefix(p, "test_") && task.Tests[p] != c {
				t.Errorf("%s: the hidden tests do not restore %s as seeded", task.ID, p)
			}
		}
	}
}
