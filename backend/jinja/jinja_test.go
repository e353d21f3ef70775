package jinja

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// golden is one rendering by Python's Jinja2 (testdata/gen.py).
type golden struct {
	Name         string  `json:"name"`
	Template     string  `json:"template"`
	Conversation string  `json:"conversation"`
	Output       *string `json:"output"`
	Error        string  `json:"error"`
}

func readGolden(t *testing.T, path string) []golden {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []golden
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var g golden
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatal(err)
		}
		out = append(out, g)
	}
	return out
}

type snippet struct {
	name, src string
	vars      map[string]Value
}

// readSnippets parses testdata/snippets.txt the way gen.py does.
func readSnippets(t *testing.T) []snippet {
	t.Helper()
	b, err := os.ReadFile("testdata/snippets.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out []snippet
	for _, block := range strings.Split(string(b), "=== ")[1:] {
		name, body, _ := strings.Cut(block, "\n")
		body = strings.TrimSuffix(body, "\n")
		vars := map[string]Value{}
		lines := strings.Split(body, "\n")
		if last := lines[len(lines)-1]; strings.HasPrefix(last, `{"`) {
			v, err := FromJSON([]byte(last))
			if err != nil {
				t.Fatalf("%s: vars: %v", name, err)
			}
			for _, k := range v.(*Dict).Keys() {
				vars[k], _ = v.(*Dict).Get(k)
			}
			body = strings.Join(lines[:len(lines)-1], "\n")
		}
		out = append(out, snippet{strings.TrimSpace(name), body, vars})
	}
	return out
}

func TestSnippetsMatchJinja2(t *testing.T) {
	want := map[string]golden{}
	for _, g := range readGolden(t, "testdata/snippets.golden.jsonl") {
		want[g.Name] = g
	}
	for _, s := range readSnippets(t) {
		t.Run(s.name, func(t *testing.T) {
			g, ok := want[s.name]
			if !ok {
				t.Fatalf("no golden output: run python3 testdata/gen.py")
			}
			got, err := render(s.src, s.vars)
			if g.Output == nil {
				if err == nil {
					t.Fatalf("rendered %q; Jinja2 failed with %s", got, g.Error)
				}
				t.Logf("error %v (Jinja2: %s)", err, g.Error)
				return
			}
			if err != nil {
				t.Fatalf("error %v; Jinja2 rendered %q", err, *g.Output)
			}
			if diff := cmp.Diff(*g.Output, got); diff != "" {
				t.Errorf("output differs from Jinja2 (-want +got):\n%s", diff)
			}
		})
	}
}

func render(src string, vars map[string]Value) (string, error) {
	tpl, err := Compile(src)
	if err != nil {
		return "", err
	}
	return tpl.Render(vars)
}

// FuzzTemplate: any source compiles or fails with an error, and a compiled
// one renders or fails with an error within its budget: what a render
// allocates stays within a small multiple of its byte budget plus what
// its steps' bookkeeping costs, whatever the template does.
func FuzzTemplate(f *testing.F) {
	for _, s := range readSnippetsF(f) {
		f.Add(s)
	}
	for _, s := range []string{
		"{{ 'x'|center(2**40) }}",
		"{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
		"{% set l = [] %}{% set _ = l.append(l) %}{{ l }}{{ l == l }}",
		"{{ range(100)|join('x' * 100000) }}",
		"{{ ((((((((1)))))))) }}",
	} {
		f.Add(s)
	}
	const vars = `{"messages": [{"role": "user", "content": "hi", "tool_calls": [{"function": {"name": "f", "arguments": {"a": [1, 2.5, null]}}}]}], "tools": [{"type": "function"}], "n": 3, "s": "text"}`
	f.Fuzz(func(t *testing.T, src string) {
		tpl, err := Compile(src)
		if err != nil {
			return
		}
		v, _ := FromJSON([]byte(vars)) // fresh: a template may append to them
		ctx := map[string]Value{}
		for _, k := range v.(*Dict).Keys() {
			ctx[k], _ = v.(*Dict).Get(k)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		tpl.render(ctx, small)
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > 8*uint64(small.bytes)+uint64(small.work/workStep)*512 {
			t.Fatalf("rendering allocated %d MiB", n>>20)
		}
	})
}

func readSnippetsF(f *testing.F) []string {
	b, err := os.ReadFile("testdata/snippets.txt")
	if err != nil {
		f.Fatal(err)
	}
	var out []string
	for _, block := range strings.Split(string(b), "=== ")[1:] {
		_, body, _ := strings.Cut(block, "\n")
		out = append(out, body)
	}
	return out
}

func TestErrorsNameTheLine(t *testing.T) {
	cases := []struct{ src, want string }{
		{"a\n\n{% if x %}b", "line 3: block is not closed: expected {% endif %}"},
		{"{{ 1 +\n }}", "line 2: unexpected '}}'"},
		{"ok\n{% for x in [1] %}{% endif %}", "line 2: unexpected {% endif %}, expected {% endfor %}"},
		{"{% set x %}", "line 1: block is not closed: expected {% endset %}"},
		{"{{ 'abc }}", "line 1: string literal is not closed"},
		{"{# never", "line 1: comment is not closed with #}"},
		{"\n{% include 'x' %}", "line 2: unsupported statement {% include %}"},
		{"{{ x | nosuchfilter }}", "line 1: filter nosuchfilter: unknown filter"},
		{"{{ x is nosuchtest }}", "line 1: test nosuchtest: unknown test"},
		{"\n\n{{ [1] + 'a' }}", "line 3: unsupported operand types for +: list and str"},
		{"{% macro m() %}{{ m() }}{{ m() }}{% endmacro %}{{ m() }}", "calls nested over 64 deep"},
		{"{{ 'x' * 100000000000 }}", "template ran out of its budget: it built over 64 MiB"},
		{"{% set ns = 1 %}{% set ns.a = 2 %}", "only namespace() objects take attributes"},
	}
	for _, c := range cases {
		_, err := render(c.src, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.src, err, c.want)
		}
	}
}

// TestConcurrentRenders: a compiled template is shared by every request;
// renders in parallel give each its own output (run with -race).
func TestConcurrentRenders(t *testing.T) {
	tpl, err := Compile("{% set ns = namespace(n=0) %}{% macro m(x) %}<{{ x }}>{% endmacro %}" +
		"{% for i in range(n) %}{% set ns.n = ns.n + i %}{{ m(i) }}{% endfor %}={{ ns.n }}{{ l.append(n) }}{{ l|length }}")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for range 50 {
				out, err := tpl.Render(map[string]Value{"n": int64(g), "l": NewList()})
				want := ""
				sum := 0
				for i := range g {
					want += fmt.Sprintf("<%d>", i)
					sum += i
				}
				want += fmt.Sprintf("=%dNone1", sum)
				if err != nil || out != want {
					t.Errorf("%q, %v; want %q", out, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
}
