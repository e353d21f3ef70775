package recipes

import (
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
		{"unknown field", strings.Replace(good, "tools:", "tool:", 1), "bad.yaml:2: field tool is not a field of Recipe"},
		{"wrong type", strings.Replace(good, "max_tokens: 64", "max_tokens: many", 1), "bad.yaml:4: cannot unmarshal !!str `many` into int"},
		{"bad duration", "window: soon\n" + good, `bad.yaml:1: "soon" is not a duration (like 180s or 2m)`},
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
		{"repeat with tasks", good + "  - name: r2\n    repeat_of: r1\n    tasks: [a]\n", `bad.yaml:13: rounds[1]: a repeat round takes its concurrency and tasks from "r1"; leave them out`},
		{"duplicate round", good + "  - name: r1\n    concurrency: 1\n    tasks: [a]\n", `bad.yaml:13: rounds[1].name: "r1" is used by an earlier round`},
		{"empty", "", "bad.yaml:1: empty recipe"},
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
