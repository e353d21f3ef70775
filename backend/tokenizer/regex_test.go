package tokenizer

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func words(ws [][]rune) []string {
	var out []string
	for _, w := range ws {
		out = append(out, string(w))
	}
	return out
}

// TestRegexSplit: the engine's matches (and the runs between them), with
// ECMAScript's leftmost-first, backtracking semantics.
func TestRegexSplit(t *testing.T) {
	cases := []struct {
		re, in string
		want   []string
	}{
		{`a|ab`, "ab", []string{"a", "b"}}, // first alternative wins, not the longest
		{`a+ab`, "aaab", []string{"aaab"}}, // a greedy run gives back
		{`\s+(?!\S)`, "a   b  ", []string{"a", "  ", " b", "  "}},
		{`(?=[\p{L}])[^a-z]`, "aBé1", []string{"a", "B", "é", "1"}},
		{`\s+$`, "a  b  ", []string{"a  b", "  "}},
		{`^a`, "aa", []string{"a", "a"}}, // ^ only at the start of the text
		{`\p{N}{1,3}`, "12345x", []string{"123", "45", "x"}},
		{`a{2}`, "aaaaa", []string{"aa", "aa", "a"}},
		{`a{2,}`, "aaaaa", []string{"aaaaa"}},
		{`(?:ab){1,2}`, "ababab", []string{"abab", "ab"}},
		{`x{,2}`, "x{,2}", []string{"x{,2}"}}, // not a quantifier: literal
		{`(?i:'s|'ll)`, "'S'ſ'Ll's", []string{"'S", "'ſ", "'Ll", "'s"}},
		{`[^\s\p{L}]+`, "a!? b", []string{"a", "!?", " b"}},
		{`\p{Lu}+`, "abÉCOLE", []string{"ab", "ÉCOLE"}},
		{`[\x41-\x43]+`, "ABCD", []string{"ABC", "D"}},
		{`[a\-z]+`, "a-zb", []string{"a-z", "b"}},
		{`[-a]+[b-]+`, "-ab-", []string{"-ab-"}},
		{`[\S]+`, "ab c", []string{"ab", " ", "c"}},
		{`[\s\p{N}]+`, "a 1\u3000٣b", []string{"a", " 1\u3000٣", "b"}},
		{` ?[^(\s|.,!?…。，、।۔،)]+`, "Hi, you…ok", []string{"Hi", ",", " you", "…", "ok"}},
		{`\d+\w`, "a12_", []string{"a", "12_"}},
		{`.+`, "ab\ncd", []string{"ab", "\n", "cd"}},
		{`\u{1F680}|\u00e9`, "🚀é", []string{"🚀", "é"}},
		{`[\r\n]`, "a\r\nb", []string{"a", "\r", "\n", "b"}},
		{`[!-/:-~！-／：-～‘-‟　-。]+`, "1“2”3", []string{"1", "“", "2", "”", "3"}},
		{`(a|b)+c`, "ababd abc", []string{"ababd ", "abc"}},
	}
	for _, c := range cases {
		p, err := compileRegex(c.re)
		if err != nil {
			t.Errorf("%s: %v", c.re, err)
			continue
		}
		var m matcher
		if d := cmp.Diff(c.want, words(m.split(p, []rune(c.in), nil))); d != "" {
			t.Errorf("%s on %q (-want +got):\n%s", c.re, c.in, d)
		}
	}
}

// TestRegexRefusals: what the engine does not support is an error naming
// it, never a silently different regex.
func TestRegexRefusals(t *testing.T) {
	cases := map[string]string{
		`a*?`:      "lazy quantifiers are not supported",
		`a**`:      "two quantifiers in a row",
		`(?<=a)b`:  "unsupported group (?<",
		`(?!ab)`:   "lookahead must hold one character or class",
		`(a)\1`:    `unsupported escape \1`,
		`\ba`:      `word boundaries \b are not supported`,
		`[z-a]`:    "out of order",
		`(a`:       "missing )",
		`a)`:       "unmatched )",
		`[ab`:      "missing ]",
		`\p{Foo}`:  `unknown Unicode category or script "Foo"`,
		`x*`:       "matches the empty string",
		`(?:a*)*b`: "unbounded repetition of an expression that can match empty",
		`a{3,2}`:   "max < min",
		`*a`:       "nothing to repeat",
		`a\`:       "trailing backslash",
		`[\W]`:     `\W inside a class is not supported`,
	}
	for re, want := range cases {
		if _, err := compileRegex(re); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", re, err, want)
		}
	}
}
