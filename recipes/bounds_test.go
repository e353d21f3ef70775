package recipes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// parseErrors parses y and returns its errors, failing if there are none.
func parseErrors(t *testing.T, y string) Errors {
	t.Helper()
	_, err := Parse("big.yaml", []byte(y))
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("Parse: %v, want recipe errors", err)
	}
	return es
}

// The same key 4,000 times took the YAML decoder 21 s and 3.5 GiB (it
// compares every pair of keys and reports every duplicate pair: 8M lines).
// The duplicates are found first, in one pass, and the report is the first
// few and a count.
func TestRecipeWithOneKeyRepeated4000Times(t *testing.T) {
	y := strings.Replace(good, "name: t\n", "name: t\n"+strings.Repeat("nudge: {max: 1}\n", 4000), 1)
	es := parseErrors(t, y)
	if len(es) != maxErrors+1 {
		t.Fatalf("%d errors, want %d and a count:\n%v", len(es), maxErrors+1, es)
	}
	if got, want := es[0].Error(), "big.yaml:3: nudge: is already defined at line 2"; got != want {
		t.Errorf("first error %q, want %q", got, want)
	}
	if got, want := es[maxErrors].Msg, "… and 3989 more errors"; got != want {
		t.Errorf("last line %q, want %q", got, want)
	}
}

// 120k seed files took 42 s to validate (the decoder's duplicate check is
// quadratic in a mapping's keys): the recipe's seed files are counted
// before it is decoded.
func TestRecipeWith120kSeedFiles(t *testing.T) {
	var b strings.Builder
	for i := range 12_000 {
		fmt.Fprintf(&b, "      f%d: x\n", i)
	}
	y := strings.Replace(good, "    prompt: do it\n", "    prompt: do it\n    files:\n"+b.String(), 1)
	es := parseErrors(t, y)
	if got, want := es.Error(), "big.yaml:9: tasks[0].files: more than 10000 seed, test and solution files in the recipe"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// Every bound, with the message its author sees.
func TestRecipeBounds(t *testing.T) {
	keys := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "  k%d: 1\n", i)
		}
		return b.String()
	}
	alias := "x: &a [" + strings.Repeat("1,", 999) + "1]\ny: &b [" + strings.Repeat("*a,", 999) + "*a]\n"
	cases := []struct{ name, yaml, want string }{
		{"too big", strings.Repeat("#", MaxBytes+1), "big.yaml:1: over 1048576 bytes: a recipe is a few hundred KB at most"},
		{"too many keys", "nudge:\n" + keys(maxEntries+1) + good, "big.yaml:1: nudge: 4097 keys, more than 4096"},
		{"too many items", "tools: [" + strings.Repeat("bash, ", maxEntries) + "read]\n", "big.yaml:1: tools: 4097 items, more than 4096"},
		{"too deep", "nudge: " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "\n", "big.yaml:1: nudge" + strings.Repeat("[0]", 32) + ": nested more than 32 levels deep"},
		// A thousand aliases of a thousand items: a million values once expanded.
		{"alias bomb", alias, "big.yaml:1: more than 100000 values: a recipe is a few hundred KB at most"},
		{"concurrency", strings.Replace(good, "concurrency: 2", "concurrency: 1000000000", 1), "big.yaml:11: rounds[0].concurrency: 1000000000 is more than 1024 sessions"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := parseErrors(t, c.yaml).Error(); got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// A file past MaxBytes is refused without being read whole.
func TestLoadRefusesHugeFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "huge.yaml")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(1 << 40) // sparse: a terabyte that costs no disk
	f.Close()
	_, err = Load(p)
	if want := p + ":1: over 1048576 bytes: a recipe is a few hundred KB at most"; err == nil || err.Error() != want {
		t.Errorf("Load: %v, want %s", err, want)
	}
}

// Many decoding errors are reported as the first few and a count, as the
// bounds' are.
func TestManyDecodingErrorsAreCounted(t *testing.T) {
	var b strings.Builder
	for i := range 50 {
		fmt.Fprintf(&b, "u%d: 1\n", i)
	}
	es := parseErrors(t, b.String()+good)
	if len(es) != maxErrors+1 || es[0].Error() != "big.yaml:1: u0: not a field of the recipe" || es[maxErrors].Msg != "… and 40 more errors" {
		t.Errorf("%d errors:\n%v", len(es), es)
	}
}

// Any input is a recipe or errors that name file:line, at most maxErrors and
// a count; never a panic.
func FuzzParse(f *testing.F) {
	f.Add(good)
	f.Add(strings.Repeat("nudge: {max: 1}\n", 40) + good)
	f.Add("x: &a [1, 2]\ny: [*a, *a, *a]\n" + good)
	f.Add("tasks:\n  - files: {a: b, a: c}\n")
	f.Add("rounds: [{name: r, concurrency: 99999}]\n")
	f.Add("limits: {turns: 3}\ntasks:\n  - {id: a, check: x, tests: {t: y}, solution: {files: {a: b}, script: s}, not_runnable: r}\n")
	f.Add("system: !file builtin/work.yaml\nnudge: {message: !file ../x}\n" + good)
	f.Add("tasks:\n  - {id: a, files: {x: &s !file builtin/work/markdown_toc/files/toc.py}, tests: {y: *s}}\n")
	f.Fuzz(func(t *testing.T, y string) {
		r, err := Parse("f.yaml", []byte(y))
		if err == nil {
			if r == nil || r.Name == "" {
				t.Fatalf("no error and no recipe: %+v", r)
			}
			return
		}
		var es Errors
		if !errors.As(err, &es) {
			t.Fatalf("not recipe errors: %v", err)
		}
		if len(es) == 0 || len(es) > maxErrors+1 {
			t.Fatalf("%d errors", len(es))
		}
		for _, e := range es {
			if e.File != "f.yaml" || e.Line < 1 {
				t.Fatalf("error without file:line: %+v", e)
			}
		}
	})
}
