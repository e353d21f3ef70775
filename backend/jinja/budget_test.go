package jinja

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

// The attacks of issue 29 on the template engine, each named after what a
// hostile template (or a hostile message) does. Before these bounds each
// ended the test binary (a stack overflow or an allocation the runtime
// refuses), panicked, hung, or took gigabytes.

// allocated runs f and returns the bytes it allocated.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// renderBounded renders src with the default limits and fails t if that
// allocated more than the budget allows (64 MiB of values, a few times
// over for builders outgrown and bookkeeping).
func renderBounded(t *testing.T, src string, vars map[string]Value) (out string, err error) {
	t.Helper()
	n := allocated(func() { out, err = render(src, vars) })
	if n > 6*uint64(defaultLimits.bytes) {
		t.Errorf("rendering allocated %d MiB", n>>20)
	}
	return out, err
}

func TestMillionDeepParenthesesFailToCompile(t *testing.T) {
	const n = 500_000 // 1,000,001 bytes: under the source bound
	src := "{{" + strings.Repeat("(", n) + "1" + strings.Repeat(")", n) + "}}"
	_, err := Compile(src)
	if err == nil || !strings.Contains(err.Error(), "nests over 200 deep") {
		t.Fatalf("error %v", err)
	}
}

func TestDeepNestingInEveryFormFailsToCompile(t *testing.T) {
	forms := map[string]func(n int) string{
		"parentheses": func(n int) string { return "{{ " + strings.Repeat("(", n) + "1" + strings.Repeat(")", n) + " }}" },
		"lists":       func(n int) string { return "{{ " + strings.Repeat("[", n) + "1" + strings.Repeat("]", n) + " }}" },
		"dicts":       func(n int) string { return "{{ " + strings.Repeat("{'a': ", n) + "1" + strings.Repeat("}", n) + " }}" },
		"not":         func(n int) string { return "{{ " + strings.Repeat("not ", n) + "1 }}" },
		"minus":       func(n int) string { return "{{ " + strings.Repeat("- ", n) + "1 }}" },
		"sum":         func(n int) string { return "{{ 1" + strings.Repeat(" + 1", n) + " }}" },
		"concat":      func(n int) string { return "{{ 'a'" + strings.Repeat(" ~ 'a'", n) + " }}" },
		"compare":     func(n int) string { return "{{ 1" + strings.Repeat(" < 2", n) + " }}" },
		"filters":     func(n int) string { return "{{ 'a'" + strings.Repeat("|string", n) + " }}" },
		"tests":       func(n int) string { return "{{ 1" + strings.Repeat(" is number", n) + " }}" },
		"attributes":  func(n int) string { return "{{ x" + strings.Repeat(".a", n) + " }}" },
		"subscripts":  func(n int) string { return "{{ x" + strings.Repeat("['a']", n) + " }}" },
		"calls":       func(n int) string { return "{{ x" + strings.Repeat("()", n) + " }}" },
		"ternaries":   func(n int) string { return "{{ 1" + strings.Repeat(" if 1 else 1", n) + " }}" },
		"statements": func(n int) string {
			return strings.Repeat("{% if 1 %}", n) + "x" + strings.Repeat("{% endif %}", n)
		},
		"loops": func(n int) string {
			return strings.Repeat("{% for i in [1] %}", n) + "x" + strings.Repeat("{% endfor %}", n)
		},
	}
	for name, form := range forms {
		t.Run(name, func(t *testing.T) {
			if _, err := Compile(form(50)); err != nil {
				t.Fatalf("50 deep: %v", err)
			}
			_, err := Compile(form(20_000))
			if err == nil || !strings.Contains(err.Error(), "nests over") {
				t.Fatalf("20,000 deep: error %v", err)
			}
		})
	}
}

func TestFiftyMegabyteTemplateIsRefusedUnread(t *testing.T) {
	src := strings.Repeat("{{ x }}", 50<<20/7)
	var err error
	n := allocated(func() { _, err = Compile(src) })
	if err == nil || !strings.Contains(err.Error(), "over the 1024 KiB a template may have") {
		t.Fatalf("error %v", err)
	}
	if n > 1<<20 {
		t.Errorf("refusing it allocated %d KiB", n>>10)
	}
}

func TestUnclosedRawBlocksFailAtTheFirst(t *testing.T) {
	// Each unclosed {% raw %} scanned to the end of the source: the square
	// of 900 KB, minutes.
	_, err := Compile(strings.Repeat("{% raw %}", 100_000))
	if err == nil || !strings.Contains(err.Error(), "raw block is not closed") {
		t.Fatalf("error %v", err)
	}
}

// TestIssueAttacksSpendTheBudget: the filters and operators issue 29 found
// exhausting memory (center, indent, tojson(indent=…), join, replace with
// huge sizes; ~ and list + past the output cap, 2.0 GiB seen; 'ab' *
// (2**62+1) past the size check into a panic), against the real limits.
func TestIssueAttacksSpendTheBudget(t *testing.T) {
	cases := map[string]string{
		"center":            "{{ 'x'|center(2**40) }}",
		"indent":            "{{ ('a\\n' * 1000)|indent(2**30) }}",
		"tojson indent":     "{{ [[[[1]]]]|tojson(indent=2**40) }}",
		"join":              "{{ range(100000)|join('x' * 10000) }}",
		"replace":           "{{ ('a' * 100000)|replace('a', 'b' * 100000) }}",
		"concatenation":     "{% set s = 'x' * 60000000 %}{{ s ~ s ~ s ~ s ~ s ~ s ~ s }}",
		"list plus":         "{% set l = [1] * 1000000 %}{{ (l + l + l + l + l + l + l + l + l + l + l + l + l + l + l + l + l + l + l + l)|length }}",
		"string repetition": "{{ 'ab' * (2**62 + 1) }}",
		"list repetition":   "{{ [1, 2] * (2**62 + 1) }}",
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := renderBounded(t, src, nil)
			if err == nil || !strings.Contains(err.Error(), "budget") {
				t.Fatalf("error %v", err)
			}
		})
	}
}

// small are limits a test can exhaust in milliseconds: the mechanism is
// the same at any size.
var small = limits{output: 8 << 20, bytes: 16 << 20, work: 20_000 * workStep, calls: 64}

// TestEverythingThatBuildsSpendsTheBudget: every construct that allocates
// or loops in proportion to a number or a size draws from the budget, and
// what a render allocates stays within a small multiple of it.
func TestEverythingThatBuildsSpendsTheBudget(t *testing.T) {
	cases := map[string]string{
		"center":             "{{ 'x'|center(2**40) }}",
		"indent width":       "{{ ('a\\n' * 1000)|indent(2**30) }}",
		"indent lines":       "{{ ('\\n' * 1000000)|indent(100, true, true) }}",
		"tojson indent":      "{{ [[[[1]]]]|tojson(indent=2**40) }}",
		"join separator":     "{{ range(10000)|join('x' * 10000) }}",
		"str.join":           "{{ ('x' * 10000).join(['a'] * 10000) }}",
		"replace":            "{{ ('a' * 10000)|replace('a', 'b' * 10000) }}",
		"str.replace":        "{{ ('a' * 10000).replace('a', 'b' * 10000) }}",
		"concatenation":      "{% set ns = namespace(s='x' * 100000) %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
		"string plus":        "{% set ns = namespace(s='x' * 100000) %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
		"list plus":          "{% set ns = namespace(l=[1] * 10000) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
		"string repetition":  "{{ 'ab' * (2**62 + 1) }}",
		"list repetition":    "{{ [1, 2] * (2**62 + 1) }}",
		"repetition flipped": "{{ (2**62 + 1) * 'ab' }}",
		"range":              "{{ range(2**62)|length }}",
		"ranges kept":        "{% set l = [] %}{% for i in range(1000) %}{% set _ = l.append(range(100000)) %}{% endfor %}",
		"repr of shared":     "{{ [('x' * 100000)] * 100000 }}",
		"tojson of shared":   "{{ ([('x' * 100000)] * 100000)|tojson }}",
		"string of shared":   "{{ ([('x' * 100000)] * 100000)|string }}",
		"pprint of shared":   "{{ ([('x' * 100000)] * 100000)|pprint }}",
		"dict key of shared": "{% set k = [('x' * 100000)] * 1000 %}{{ {k: 1}|length }}",
		"characters":         "{% for c in 'x' * 10000000 %}{% endfor %}",
		"split":              "{{ ('x,' * 3000000).split(',')|length }}",
		"splitlines":         "{{ ('x\\n' * 3000000).splitlines()|length }}",
		"macros kept":        "{% set l = [] %}{% for i in range(30000) %}{% macro m() %}{% endmacro %}{% set _ = l.append(m) %}{% endfor %}",
		"output":             "{% for i in range(100) %}{{ 'x' * 1000000 }}{% endfor %}",
		"captured output":    "{% macro m(n) %}{{ 'x' * 600000 }}{% if n %}{{ m(n - 1) }}{% endif %}{% endmacro %}{{ m(60) }}",
		"set block":          "{% for i in range(100) %}{% set s %}{{ 'x' * 1000000 }}{% endset %}{% endfor %}",
		"sort":               "{{ range(500000)|sort|length }}",
		"dictsort":           "{% set d = {} %}{% for i in range(30000) %}{% set _ = d.update({i|string: i}) %}{% endfor %}{{ d|dictsort|length }}",
		"dict updates":       "{% set d = {} %}{% for i in range(30000) %}{% set _ = d.update({i|string: 1}) %}{% endfor %}",
		"dict items":         "{% set d = {} %}{% for i in range(30000) %}{% set _ = d.update({i|string: 1}) %}{% endfor %}{% for i in range(100) %}{% set _ = d|items|list %}{% endfor %}",
		"escape":             "{{ ('<' * 5000000)|e }}",
		"reverse":            "{{ ('é' * 2000000)|reverse|length }}",
		"unique":             "{{ range(20000)|unique|length }}",
		"selectattr":         "{{ ([{'a': 1}] * 1000000)|selectattr('a')|list|length }}",
		"map":                "{% for i in range(100) %}{% set _ = range(100000)|map('string')|list %}{% endfor %}",
		"batch":              "{{ range(1000000)|batch(1)|list|length }}",
		"list extend":        "{% set l = [1] * 1000 %}{% for i in range(100) %}{% set _ = l.extend(l) %}{% endfor %}",
		"slice":              "{% set s = 'é' * 4000000 %}{% for i in range(10) %}{{ s[1:]|length }}{% endfor %}",
		"truncate":           "{% set s = 'é' * 4000000 %}{% for i in range(10) %}{{ s|truncate(10) }}{% endfor %}",
		"string index":       "{% set s = 'é' * 600000 %}{% for i in range(1000) %}{{ s[500000] }}{{ s[-500000] }}{% endfor %}",
		"in a string":        "{% set s = 'x' * 600000 %}{% for i in range(1000) %}{{ 'y' in s }}{% endfor %}",
		"equal lists":        "{% set a = ['x'] * 100000 %}{% for i in range(1000) %}{{ a == a }}{% endfor %}",
		"length":             "{% set s = 'é' * 600000 %}{% for i in range(1000) %}{{ s|length }}{% endfor %}",
		"startswith":         "{% set s = 'x' * 600000 %}{% for i in range(1000) %}{{ s.startswith('y') }}{% endfor %}",
		"count":              "{% set a = ['x'] * 100000 %}{% for i in range(1000) %}{{ a.count('y') }}{% endfor %}",
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			tpl, err := Compile(src)
			if err != nil {
				t.Fatal(err)
			}
			n := allocated(func() { _, err = tpl.render(nil, small) })
			if err == nil || !strings.Contains(err.Error(), "budget") {
				t.Fatalf("error %v", err)
			}
			// The budget, a builder's doubling, and what the steps'
			// bookkeeping (scopes, boxed values) costs.
			if n > 8*uint64(small.bytes)+uint64(small.work/workStep)*512 {
				t.Errorf("rendering allocated %d MiB", n>>20)
			}
		})
	}
}

// TestIntegerOverflowIsAnError: int64 arithmetic that would wrap (and a
// power that looped its exponent's count of times) is an error.
func TestIntegerOverflowIsAnError(t *testing.T) {
	for _, src := range []string{
		"{{ 2 ** 1000000000000000000 }}",
		"{{ 2 ** 63 }}",
		"{{ 9223372036854775807 + 1 }}",
		"{{ -9223372036854775807 - 2 }}",
		"{{ 4294967296 * 4294967296 }}",
		"{{ (-9223372036854775807 - 1) // -1 }}",
	} {
		if _, err := render(src, nil); err == nil || !strings.Contains(err.Error(), "integer overflow") {
			t.Errorf("%s: error %v", src, err)
		}
	}
	for src, want := range map[string]string{
		"{{ 2 ** 62 }}":         "4611686018427387904",
		"{{ (-2) ** 63 }}":      "-9223372036854775808",
		"{{ 3 ** 0 }}":          "1",
		"{{ 7 % -1 }}":          "0",
		"{{ 'ab' * -3 }}|":      "|",
		"{{ 2 * 'ab' }}":        "abab",
		"{{ [1] * True }}":      "[1]",
		"{{ range(5, 0, -2) }}": "[5, 3, 1]",
	} {
		if got, err := render(src, nil); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", src, got, err, want)
		}
	}
}

func TestFiveMillionDeepJSONIsRefused(t *testing.T) {
	for _, raw := range []string{strings.Repeat("[", 5_000_000), strings.Repeat(`{"a":`, 1_000_000)} {
		_, err := FromJSON([]byte(raw))
		if !errors.Is(err, ErrNested) {
			t.Fatalf("error %v", err)
		}
	}
	// Brackets inside strings are text, and 512 deep is fine.
	v, err := FromJSON([]byte(`{"a": "[[[[[[\"]]"}`))
	if err != nil || v.(*Dict).m["a"] != `[[[[[["]]` {
		t.Fatalf("%v, %v", v, err)
	}
	if _, err := FromJSON([]byte(strings.Repeat("[", 512) + strings.Repeat("]", 512))); err != nil {
		t.Fatal(err)
	}
}

func TestSelfHoldingValuesDoNotRecurseForever(t *testing.T) {
	const hold = "{% set l = [] %}{% set _ = l.append(l) %}{% set d = {} %}{% set _ = d.update({'d': d}) %}"
	for _, src := range []string{
		hold + "{{ l }}",
		hold + "{{ d }}",
		hold + "{{ l|tojson }}",
		hold + "{{ d|tojson }}",
		hold + "{{ l == [l] }}",
		hold + "{{ d == {'d': d} }}",
		hold + "{{ l < [l] }}",
		hold + "{{ l in [[l]] }}",
		hold + "{{ [l, [l]]|sort }}",
		hold + "{{ l ~ '' }}",
		hold + "{{ [l]|unique|list }}",
		hold + "{{ l|pprint }}",
	} {
		_, err := render(src, nil)
		if err == nil || !strings.Contains(err.Error(), "nested over 512 deep") {
			t.Errorf("%s: error %v", src, err)
		}
	}
}

func TestStepsEndALoopThatWritesNothing(t *testing.T) {
	tpl, err := Compile("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}")
	if err != nil {
		t.Fatal(err)
	}
	lim := defaultLimits
	lim.work = 10_000 * workStep
	if _, err := tpl.render(nil, lim); err == nil || !strings.Contains(err.Error(), "ran over 10000 steps") {
		t.Fatalf("error %v", err)
	}
}
