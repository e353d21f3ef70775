package grammar

import (
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"testing"
)

// numberOracle says whether text is a number the grammar should write for
// the bounds: the grammar's own form (no exponent, no leading zeros, at
// most sigDigits digits once a fraction is written), inside the bounds by
// exact arithmetic.
var (
	numberForm  = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?$`)
	integerForm = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)
)

func numberOracle(text string, integer bool, lo, hi *big.Rat, loExcl, hiExcl bool) bool {
	form := numberForm
	if integer {
		form = integerForm
	}
	if !form.MatchString(text) {
		return false
	}
	ip, fp, _ := strings.Cut(strings.TrimPrefix(text, "-"), ".")
	if len(ip) > defaultIntDigits || fp != "" && (len(fp) > fracDigits || len(ip)+len(fp) > sigDigits) {
		return false
	}
	v, _ := new(big.Rat).SetString(text)
	if lo != nil && (v.Cmp(lo) < 0 || loExcl && v.Cmp(lo) == 0) {
		return false
	}
	if hi != nil && (v.Cmp(hi) > 0 || hiExcl && v.Cmp(hi) == 0) {
		return false
	}
	return true
}

// Every text of up to five bytes over the number alphabet is accepted by
// the grammar exactly when the oracle accepts it, and every prefix the
// grammar lets through can still be completed (no dead ends).
func TestNumberBoundsExhaustive(t *testing.T) {
	rat := func(s string) *big.Rat {
		if s == "" {
			return nil
		}
		r, _ := new(big.Rat).SetString(s)
		return r
	}
	cases := []struct {
		lo, hi         string
		loExcl, hiExcl bool
	}{
		{"", "", false, false}, {"1", "7", false, false}, {"-30", "-5", false, false}, {"-3", "12", true, true},
		{"0", "", true, false}, {"", "0", false, true}, {"0.5", "2.75", false, false}, {"-0.25", "0.125", true, false},
		{"99", "101", false, false}, {"-1000", "-999", false, true}, {"0", "0", false, false}, {"3.14159", "3.1416", false, false},
		{"0.001", "0.01", true, true}, {"-12.5", "", false, false},
	}
	alphabet := "-0123456789."
	for _, cs := range cases {
		for _, integer := range []bool{true, false} {
			typ := "number"
			if integer {
				typ = "integer"
			}
			schema := fmt.Sprintf(`{"type":%q`, typ)
			if cs.lo != "" {
				schema += fmt.Sprintf(`,%q:%s`, map[bool]string{false: "minimum", true: "exclusiveMinimum"}[cs.loExcl], cs.lo)
			}
			if cs.hi != "" {
				schema += fmt.Sprintf(`,%q:%s`, map[bool]string{false: "maximum", true: "exclusiveMaximum"}[cs.hiExcl], cs.hi)
			}
			schema += "}"
			g, err := FromSchema([]byte(schema))
			lo, hi := rat(cs.lo), rat(cs.hi)
			if err != nil {
				// Only bounds with no number between them may be refused.
				if integer && lo != nil && hi != nil && new(big.Rat).Sub(hi, lo).Cmp(big.NewRat(1, 1)) < 0 {
					continue
				}
				t.Fatalf("%s: %v", schema, err)
			}
			var walk func(prefix string, states []cursor)
			walk = func(prefix string, states []cursor) {
				if got, want := slicesAny(states, canEnd), numberOracle(prefix, integer, lo, hi, cs.loExcl, cs.hiExcl); got != want {
					t.Fatalf("%s: Valid(%q) = %v, want %v", schema, prefix, got, want)
				}
				if len(prefix) == 5 {
					return
				}
				for i := 0; i < len(alphabet); i++ {
					if next := advance(states, alphabet[i], nil); len(next) > 0 {
						walk(prefix+alphabet[i:i+1], next)
					} else if numberOracle(prefix+alphabet[i:i+1], integer, lo, hi, cs.loExcl, cs.hiExcl) {
						t.Fatalf("%s: %q refused, but it is valid", schema, prefix+alphabet[i:i+1])
					}
				}
			}
			walk("", g.start())
			// No dead ends: from every prefix of up to four bytes the
			// grammar allows, some completion of at most 14 bytes ends.
			var ends func(states []cursor, budget int) bool
			ends = func(states []cursor, budget int) bool {
				if slicesAny(states, canEnd) {
					return true
				}
				for i := 0; budget > 0 && i < len(alphabet); i++ {
					if next := advance(states, alphabet[i], nil); len(next) > 0 && ends(next, budget-1) {
						return true
					}
				}
				return false
			}
			var check func(prefix string, states []cursor)
			check = func(prefix string, states []cursor) {
				if !ends(states, 14) {
					t.Fatalf("%s: after %q no completion", schema, prefix)
				}
				for i := 0; len(prefix) < 4 && i < len(alphabet); i++ {
					if next := advance(states, alphabet[i], nil); len(next) > 0 {
						check(prefix+alphabet[i:i+1], next)
					}
				}
			}
			check("", g.start())
		}
	}
}

func slicesAny[T any](s []T, f func(T) bool) bool {
	for _, x := range s {
		if f(x) {
			return true
		}
	}
	return false
}

// Boundaries at scale: large, negative, fractional bounds, exactly at the
// bound accepted and one past refused.
func TestNumberBoundaries(t *testing.T) {
	for _, c := range []struct {
		schema string
		valid  []string
		not    []string
	}{
		{`{"type":"integer","minimum":1,"maximum":7}`, []string{"1", "7", "4"}, []string{"0", "8", "500000000000", "-30000000000", "-1", "1.0"}},
		{`{"type":"integer","exclusiveMinimum":1,"exclusiveMaximum":7}`, []string{"2", "6"}, []string{"1", "7"}},
		{`{"type":"integer","minimum":-5,"maximum":-2}`, []string{"-5", "-2", "-3"}, []string{"-6", "-1", "0", "2", "-0"}},
		{`{"type":"integer","minimum":0}`, []string{"0", "-0", "999999999999999"}, []string{"-1", "1000000000000000"}},
		{`{"type":"integer","minimum":1e20}`, []string{"100000000000000000000", "123456789012345678901"}, []string{"99999999999999999999"}},
		{`{"type":"integer","maximum":-9007199254740993}`, []string{"-9007199254740993", "-9007199254740994"}, []string{"-9007199254740992", "0"}},
		{`{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991}`, []string{"0", "-123456789012345", "123456789012345"}, []string{"1234567890123456"}},
		{`{"type":"integer","minimum":1.5,"maximum":3.5}`, []string{"2", "3"}, []string{"1", "4"}},
		{`{"type":"number","minimum":0.1,"exclusiveMaximum":0.3}`, []string{"0.1", "0.2999", "0.29999999999"}, []string{"0.09999", "0.3", "0.30", "1"}},
		{`{"type":"number","exclusiveMinimum":-1.5,"maximum":-1.25}`, []string{"-1.25", "-1.4999", "-1.3"}, []string{"-1.5", "-1.2499", "-1", "1.3"}},
		{`{"type":"number","minimum":1e-3,"maximum":2e-3}`, []string{"0.001", "0.002", "0.0015"}, []string{"0.0009", "0.0021"}},
		{`{"type":"number","maximum":100,"exclusiveMaximum":50}`, []string{"49.9", "-3"}, []string{"50", "75"}},
		{`{"type":"number","minimum":5,"exclusiveMinimum":true}`, []string{"5.1", "6"}, []string{"5", "5.0"}},
		{`{"type":"number","maximum":1e400}`, []string{"123456789012345", "1.5"}, []string{"1e3"}},
	} {
		g, err := FromSchema([]byte(c.schema))
		if err != nil {
			t.Fatalf("%s: %v", c.schema, err)
		}
		for _, v := range c.valid {
			if !g.Valid(v) {
				t.Errorf("%s: %s refused", c.schema, v)
			}
		}
		for _, v := range c.not {
			if g.Valid(v) {
				t.Errorf("%s: %s accepted", c.schema, v)
			}
		}
	}
}
