package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// stringOracle says whether text is a string the grammar should write: a
// JSON string in the canonical form (Go's encoder would write it so), of
// min to max characters, matching re anywhere (JSON Schema's reading).
func stringOracle(text string, min, max int, re *regexp.Regexp) bool {
	var s string
	if !strings.HasPrefix(text, `"`) || json.Unmarshal([]byte(text), &s) != nil || canonical(s) != text {
		return false
	}
	n := utf8.RuneCountInString(s)
	return n >= min && n <= max && (re == nil || re.MatchString(s))
}

// Every text of up to seven bytes over a small alphabet (quote, backslash,
// n for escapes, é for a two-byte character) is accepted exactly when the
// oracle accepts it, and no prefix the grammar allows is a dead end.
func TestStringPatternsExhaustive(t *testing.T) {
	alphabet := []byte{'"', 'a', 'b', '0', '\\', 'n', '-', 0xc3, 0xa9}
	for _, c := range []struct {
		pattern  string
		min, max int
	}{
		{"", 0, 5}, {"", 2, 3}, {`^a+b?$`, 0, 5}, {`[ab]{2,3}`, 0, 5}, {`^\d*$`, 1, 5}, {`a|b0`, 0, 5},
		{`^(ab)*$`, 0, 5}, {`^[^a]*$`, 0, 5}, {`é`, 0, 5}, {`^.{2}$`, 0, 5}, {`^\n?-$`, 0, 5}, {`^(aa)*$`, 1, 3},
		{`^[ab]*$`, 2, 3}, {`^$`, 0, 5}, {`b$`, 0, 5}, {`^a`, 0, 5}, {`^[\w-]+$`, 0, 4}, {`^(?:a|é){1,2}b?$`, 0, 5},
		{`^\\"?$`, 0, 5}, {`^[^\\]+$`, 0, 5}, {`^(a?){3}b$`, 0, 5},
	} {
		schema := fmt.Sprintf(`{"type":"string","minLength":%d,"maxLength":%d`, c.min, c.max)
		var re *regexp.Regexp
		if c.pattern != "" {
			schema += fmt.Sprintf(`,"pattern":%s`, canonical(c.pattern))
			re = regexp.MustCompile(c.pattern)
		}
		schema += "}"
		g, err := FromSchema([]byte(schema))
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		found := 0
		var walk func(prefix string, states []cursor)
		walk = func(prefix string, states []cursor) {
			got, want := slicesAny(states, canEnd), stringOracle(prefix, c.min, c.max, re)
			if got != want {
				t.Fatalf("%s: %q accepted %v, want %v", schema, prefix, got, want)
			}
			if got {
				found++
			}
			if len(prefix) == 7 {
				return
			}
			for _, b := range alphabet {
				next := prefix + string([]byte{b})
				if ns := advance(states, b, nil); len(ns) > 0 {
					walk(next, ns)
				} else if stringOracle(next, c.min, c.max, re) {
					t.Fatalf("%s: %q refused, but it is valid", schema, next)
				}
			}
		}
		walk("", g.start())
		if found == 0 {
			t.Fatalf("%s: nothing accepted", schema)
		}
		var ends func(states []cursor, budget int) bool
		ends = func(states []cursor, budget int) bool {
			if slicesAny(states, canEnd) {
				return true
			}
			for i := 0; budget > 0 && i < len(alphabet); i++ {
				if ns := advance(states, alphabet[i], nil); len(ns) > 0 && ends(ns, budget-1) {
					return true
				}
			}
			return false
		}
		var check func(depth int, states []cursor)
		check = func(depth int, states []cursor) {
			if !ends(states, 12) {
				t.Fatalf("%s: a dead end", schema)
			}
			for i := 0; depth < 5 && i < len(alphabet); i++ {
				if ns := advance(states, alphabet[i], nil); len(ns) > 0 {
					check(depth+1, ns)
				}
			}
		}
		check(0, g.start())
	}
}

// What the pattern compiler refuses, it names, at the schema's path.
func TestPatternRefused(t *testing.T) {
	for pattern, msg := range map[string]string{
		`(a)\1`:      "backreferences",
		`a(?=b)`:     "lookaround",
		`(?<!a)b`:    "lookaround",
		`\bword\b`:   "word boundaries",
		`\p{L}+`:     "Unicode property escapes",
		`a{2000}`:    "repetition counts past 1000",
		`(ab`:        "missing )",
		`ab)`:        "unmatched )",
		`[a-`:        "missing ]",
		`*a`:         "nothing to repeat",
		`[z-a]`:      "range out of order",
		`\u{1F600}`:  "needs the u flag",
		`\cA`:        "control escapes",
		`a{3,2}`:     "out of order",
		`^\x01$`:     "no string of 0 to 256 characters",
		`^a{300}$`:   "no string of 0 to 256 characters",
		`\q`:         `unknown escape \q`,
		`(?i)abc`:    "lookaround",
		`[a-\d]`:     "a range ending in a class",
		`^[^\s\S]$`:  "no string",
		`^\v\f$`:     "no string",
		`^(a|b)\Bc$`: "word boundaries",
	} {
		_, err := FromSchema([]byte(fmt.Sprintf(`{"properties":{"p":{"type":"string","pattern":%s}}}`, canonical(pattern))))
		var se *SchemaError
		if !errors.As(err, &se) || se.Path != "#/properties/p" || se.Keyword != "pattern" || !strings.Contains(se.Msg, msg) {
			t.Errorf("pattern %q: %v, want a pattern error at #/properties/p saying %q", pattern, err, msg)
		}
	}
}

// utf8Seqs covers exactly the encodings of its range.
func TestUTF8Seqs(t *testing.T) {
	for _, r := range []rrange{{0, 0x7f}, {0x41, 0x5a}, {0x80, 0x7ff}, {0x7f, 0x801}, {0xe000, 0x10ffff}, {0x2028, 0x2029}, {0x100, 0xffff}, {0x10000, 0x10ffff}, {0x123, 0x4567}} {
		seqs := utf8Seqs(r.lo, r.hi, nil)
		in := func(b []byte) bool {
			for _, s := range seqs {
				if len(s) != len(b) {
					continue
				}
				ok := true
				for i := range s {
					ok = ok && s[i].lo <= b[i] && b[i] <= s[i].hi
				}
				if ok {
					return true
				}
			}
			return false
		}
		for c := rune(0); c <= utf8.MaxRune; c += 1 + c/64 {
			if c >= 0xd800 && c <= 0xdfff {
				continue
			}
			if got, want := in(utf8.AppendRune(nil, c)), c >= r.lo && c <= r.hi; got != want {
				t.Fatalf("range %x-%x: U+%04X in %v, want %v", r.lo, r.hi, c, got, want)
			}
		}
		// and nothing that is not a whole, valid encoding
		for _, s := range seqs {
			b := make([]byte, len(s))
			for i := range s {
				b[i] = s[i].hi
			}
			if !utf8.Valid(b) {
				t.Fatalf("range %x-%x: sequence %v admits invalid %x", r.lo, r.hi, s, b)
			}
		}
	}
}
