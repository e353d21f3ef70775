package grammar

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A pattern is parsed as an ECMA-262 regular expression (the dialect JSON
// Schema names), restricted to what a finite automaton can decide:
// literals, ., classes [...] and [^...] with ranges, \d \w \s \D \W \S,
// escapes (\t \n \r \f \v \xHH \uHHHH and escaped punctuation), groups
// (...) (?:...) (?<name>...), alternation, the quantifiers * + ? {n}
// {n,} {n,m} (lazy or not: the same language), and ^ $ as anchors.
// Refused, with a *SchemaError: backreferences, lookaround, \b \B, \p{…},
// \cX, \u{…}, and counts past maxRepeat.
//
// NOTE: a JSON Schema pattern matches anywhere in the string unless
// anchored, so a pattern is compiled as .*(pattern).* with ^ true only at
// the start and $ only at the end. Where ECMA-262 and Go's RE2 differ
// (. and negated classes on characters past U+FFFF, which JavaScript sees
// as two units; \s on Unicode spaces), the compiled language is the part
// both agree on, so the output matches under either.

const maxRepeat = 1000

// rnode is a parsed pattern.
type rnode struct {
	op       rop
	runes    []rrange // rClass: sorted, disjoint
	subs     []*rnode
	min, max int // rRep; max -1: unbounded
}

type rop uint8

const (
	rClass rop = iota
	rCat
	rAlt
	rRep
	rBegin
	rEnd
)

type rrange struct{ lo, hi rune }

type reParser struct {
	src string
	pos int
}

func (p *reParser) fail(format string, args ...any) error {
	return fmt.Errorf("pattern %q at offset %d: %s", p.src, p.pos, fmt.Sprintf(format, args...))
}

func parseRegex(src string) (*rnode, error) {
	p := &reParser{src: src}
	n, err := p.alt()
	if err != nil {
		return nil, err
	}
	if p.pos < len(src) {
		return nil, p.fail("unmatched )")
	}
	return n, nil
}

func (p *reParser) more() bool { return p.pos < len(p.src) }
func (p *reParser) peek() byte { return p.src[p.pos] }

func (p *reParser) alt() (*rnode, error) {
	var subs []*rnode
	for {
		n, err := p.cat()
		if err != nil {
			return nil, err
		}
		subs = append(subs, n)
		if !p.more() || p.peek() != '|' {
			break
		}
		p.pos++
	}
	if len(subs) == 1 {
		return subs[0], nil
	}
	return &rnode{op: rAlt, subs: subs}, nil
}

func (p *reParser) cat() (*rnode, error) {
	cat := &rnode{op: rCat}
	for p.more() && p.peek() != '|' && p.peek() != ')' {
		atom, err := p.atom()
		if err != nil {
			return nil, err
		}
		if atom, err = p.quantified(atom); err != nil {
			return nil, err
		}
		cat.subs = append(cat.subs, atom)
	}
	return cat, nil
}

func (p *reParser) quantified(atom *rnode) (*rnode, error) {
	for p.more() {
		min, max := -1, -1
		start := p.pos
		switch p.peek() {
		case '*':
			min, max = 0, -1
			p.pos++
		case '+':
			min, max = 1, -1
			p.pos++
		case '?':
			min, max = 0, 1
			p.pos++
		case '{':
			lo, hi, ok := p.counts()
			if !ok {
				return atom, nil // a literal {, as ECMA-262's Annex B reads it
			}
			min, max = lo, hi
		default:
			return atom, nil
		}
		if atom.op == rBegin || atom.op == rEnd {
			p.pos = start
			return nil, p.fail("a quantifier on an anchor")
		}
		if min > maxRepeat || max > maxRepeat {
			p.pos = start
			return nil, p.fail("repetition counts past %d are not supported", maxRepeat)
		}
		if max >= 0 && max < min {
			p.pos = start
			return nil, p.fail("{%d,%d}: the counts are out of order", min, max)
		}
		if p.more() && p.peek() == '?' {
			p.pos++ // lazy: the same language
		}
		atom = &rnode{op: rRep, subs: []*rnode{atom}, min: min, max: max}
	}
	return atom, nil
}

// counts reads {n}, {n,} or {n,m} at p.pos; ok is false (and nothing is
// consumed) when the brace does not start one.
func (p *reParser) counts() (lo, hi int, ok bool) {
	rest := p.src[p.pos:]
	end := strings.IndexByte(rest, '}')
	if end < 0 {
		return 0, 0, false
	}
	body := rest[1:end]
	a, b, comma := strings.Cut(body, ",")
	num := func(s string) (int, bool) {
		if s == "" || len(s) > 9 || strings.Trim(s, "0123456789") != "" {
			return 0, false
		}
		n, _ := strconv.Atoi(s)
		return n, true
	}
	lo, ok = num(a)
	if !ok {
		return 0, 0, false
	}
	hi = lo
	if comma {
		hi = -1
		if b != "" {
			if hi, ok = num(b); !ok {
				return 0, 0, false
			}
		}
	}
	p.pos += end + 1
	return lo, hi, true
}

func (p *reParser) atom() (*rnode, error) {
	c := p.peek()
	switch c {
	case '(':
		p.pos++
		if strings.HasPrefix(p.src[p.pos:], "?") {
			switch rest := p.src[p.pos:]; {
			case strings.HasPrefix(rest, "?:"):
				p.pos += 2
			case strings.HasPrefix(rest, "?<") && !strings.HasPrefix(rest, "?<=") && !strings.HasPrefix(rest, "?<!"):
				end := strings.IndexByte(rest, '>')
				if end < 0 {
					return nil, p.fail("unterminated group name")
				}
				p.pos += end + 1
			default:
				return nil, p.fail("lookaround (?%s…) is not supported", rest[1:min(len(rest), 3)])
			}
		}
		n, err := p.alt()
		if err != nil {
			return nil, err
		}
		if !p.more() || p.peek() != ')' {
			return nil, p.fail("missing )")
		}
		p.pos++
		return n, nil
	case '[':
		return p.class()
	case '.': // ECMA-262 leaves out the line terminators, RE2 only \n
		p.pos++
		return &rnode{op: rClass, runes: negate([]rrange{{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}})}, nil
	case '^':
		p.pos++
		return &rnode{op: rBegin}, nil
	case '$':
		p.pos++
		return &rnode{op: rEnd}, nil
	case '\\':
		p.pos++
		rs, err := p.escape(false)
		if err != nil {
			return nil, err
		}
		return &rnode{op: rClass, runes: rs}, nil
	case '*', '+', '?':
		return nil, p.fail("nothing to repeat")
	}
	r, size := utf8.DecodeRuneInString(p.src[p.pos:])
	p.pos += size
	return &rnode{op: rClass, runes: []rrange{{r, r}}}, nil
}

var (
	digitRunes = []rrange{{'0', '9'}}
	wordRunes  = []rrange{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}
	// ECMA-262's \s; RE2's is its ASCII part. \s takes the ASCII part,
	// \S the complement of the whole.
	spaceASCII = []rrange{{'\t', '\r'}, {' ', ' '}}
	spaceAll   = []rrange{{'\t', '\r'}, {' ', ' '}, {0xa0, 0xa0}, {0x1680, 0x1680}, {0x2000, 0x200a},
		{0x2028, 0x2029}, {0x202f, 0x202f}, {0x205f, 0x205f}, {0x3000, 0x3000}, {0xfeff, 0xfeff}}
)

// escape reads what follows a backslash (at p.pos).
func (p *reParser) escape(inClass bool) ([]rrange, error) {
	if !p.more() {
		return nil, p.fail("trailing backslash")
	}
	c := p.peek()
	p.pos++
	one := func(r rune) ([]rrange, error) { return []rrange{{r, r}}, nil }
	switch c {
	case 'd':
		return digitRunes, nil
	case 'D':
		return negate(digitRunes), nil
	case 'w':
		return wordRunes, nil
	case 'W':
		return negate(wordRunes), nil
	case 's':
		return spaceASCII, nil
	case 'S':
		return negate(spaceAll), nil
	case 't':
		return one('\t')
	case 'n':
		return one('\n')
	case 'r':
		return one('\r')
	case 'f':
		return one('\f')
	case 'v':
		return one('\v')
	case '0':
		if p.more() && p.peek() >= '0' && p.peek() <= '9' {
			return nil, p.fail("octal escapes are not supported")
		}
		return one(0)
	case 'x', 'u':
		n := 2
		if c == 'u' {
			n = 4
			if p.more() && p.peek() == '{' {
				return nil, p.fail(`\u{…} needs the u flag, which patterns do not have`)
			}
		}
		if p.pos+n > len(p.src) {
			return nil, p.fail(`\%c needs %d hex digits`, c, n)
		}
		v, err := strconv.ParseUint(p.src[p.pos:p.pos+n], 16, 32)
		if err != nil {
			return nil, p.fail(`\%c needs %d hex digits`, c, n)
		}
		p.pos += n
		return one(rune(v))
	case 'b':
		if inClass {
			return one('\b')
		}
		return nil, p.fail(`word boundaries (\b) are not supported`)
	case 'B':
		return nil, p.fail(`word boundaries (\B) are not supported`)
	case 'p', 'P':
		return nil, p.fail(`Unicode property escapes (\%c{…}) are not supported`, c)
	case 'c':
		return nil, p.fail(`control escapes (\c) are not supported`)
	case 'k':
		return nil, p.fail(`backreferences (\k) are not supported`)
	}
	if c >= '1' && c <= '9' {
		return nil, p.fail(`backreferences (\%c) are not supported`, c)
	}
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
		return nil, p.fail(`unknown escape \%c`, c)
	}
	p.pos--
	r, size := utf8.DecodeRuneInString(p.src[p.pos:])
	p.pos += size
	return one(r)
}

func (p *reParser) class() (*rnode, error) {
	p.pos++ // [
	neg := p.more() && p.peek() == '^'
	if neg {
		p.pos++
	}
	// set is what the class surely holds, maybe what it may hold: \s and
	// \S differ between the engines, and a negated class is the complement
	// of what its members may hold.
	var set, maybe []rrange
	for {
		if !p.more() {
			return nil, p.fail("missing ]")
		}
		if p.peek() == ']' { // after members; or []: matches nothing, [^]: anything
			p.pos++
			break
		}
		lo, loSet, loMaybe, err := p.classAtom()
		if err != nil {
			return nil, err
		}
		if loSet == nil && p.pos+1 < len(p.src) && p.peek() == '-' && p.src[p.pos+1] != ']' {
			p.pos++
			hi, hiSet, _, err := p.classAtom()
			if err != nil {
				return nil, err
			}
			if hiSet != nil {
				return nil, p.fail("a range ending in a class")
			}
			if hi < lo {
				return nil, p.fail("range out of order")
			}
			set = append(set, rrange{lo, hi})
			maybe = append(maybe, rrange{lo, hi})
			continue
		}
		if loSet != nil {
			set, maybe = append(set, loSet...), append(maybe, loMaybe...)
		} else {
			set, maybe = append(set, rrange{lo, lo}), append(maybe, rrange{lo, lo})
		}
	}
	set = normalize(set)
	if neg {
		set = negate(maybe)
	}
	return &rnode{op: rClass, runes: set}, nil
}

// classAtom reads one class member: a character, or (set) an escape class
// such as \d, with what it may hold under either engine (maybe).
func (p *reParser) classAtom() (r rune, set, maybe []rrange, err error) {
	if p.peek() == '\\' {
		p.pos++
		c := p.peek()
		rs, err := p.escape(true)
		if err != nil {
			return 0, nil, nil, err
		}
		switch {
		case c == 's':
			return 0, rs, spaceAll, nil
		case c == 'S':
			return 0, rs, negate(spaceASCII), nil
		case strings.IndexByte("dDwW", c) >= 0:
			return 0, rs, rs, nil
		}
		return rs[0].lo, nil, nil, nil
	}
	r, size := utf8.DecodeRuneInString(p.src[p.pos:])
	p.pos += size
	return r, nil, nil, nil
}

func normalize(set []rrange) []rrange {
	set = slices.Clone(set)
	slices.SortFunc(set, func(a, b rrange) int { return int(a.lo - b.lo) })
	var out []rrange
	for _, r := range set {
		if n := len(out); n > 0 && r.lo <= out[n-1].hi+1 {
			out[n-1].hi = max(out[n-1].hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

// negate is the complement of a normalized set within the code points.
func negate(set []rrange) []rrange {
	set = normalize(set)
	var out []rrange
	next := rune(0)
	for _, r := range set {
		if r.lo > next {
			out = append(out, rrange{next, r.lo - 1})
		}
		next = r.hi + 1
	}
	if next <= utf8.MaxRune {
		out = append(out, rrange{next, utf8.MaxRune})
	}
	return out
}

// intersect is a ∩ b for normalized sets.
func intersect(a, b []rrange) []rrange {
	var out []rrange
	for i, j := 0, 0; i < len(a) && j < len(b); {
		lo, hi := max(a[i].lo, b[j].lo), min(a[i].hi, b[j].hi)
		if lo <= hi {
			out = append(out, rrange{lo, hi})
		}
		if a[i].hi < b[j].hi {
			i++
		} else {
			j++
		}
	}
	return out
}

// The characters a generated string holds: what Go's encoder writes raw
// or as \" \\ \n \r \t (other control characters and U+2028/U+2029 it
// writes as \u escapes, which the grammar never does). DEL is left out as
// before; surrogates are not characters.
var (
	writable = []rrange{{'\t', '\n'}, {'\r', '\r'}, {' ', '~'}, {0x80, 0x2027}, {0x202a, 0xd7ff}, {0xe000, utf8.MaxRune}}
	// Inside a pattern, classes stay in the Basic Multilingual Plane, where
	// ECMA-262's code units and Go's code points count alike.
	writableBMP = intersect(writable, []rrange{{0, 0xffff}})
)

// byteRange is one byte position of a UTF-8 sequence.
type byteRange struct{ lo, hi byte }

// utf8Seqs appends the byte-range sequences whose strings are exactly the
// UTF-8 encodings of lo..hi (no surrogates inside).
func utf8Seqs(lo, hi rune, out [][]byteRange) [][]byteRange {
	for _, b := range []rune{0x7f, 0x7ff, 0xffff} {
		if lo <= b && b < hi {
			return utf8Seqs(b+1, hi, utf8Seqs(lo, b, out))
		}
	}
	if hi < 0x80 {
		return append(out, []byteRange{{byte(lo), byte(hi)}})
	}
	for i := 1; i < utf8.UTFMax; i++ {
		m := rune(1)<<(6*i) - 1 // the last i continuation bytes
		if lo&^m != hi&^m {
			if lo&m != 0 {
				return utf8Seqs((lo|m)+1, hi, utf8Seqs(lo, lo|m, out))
			}
			if hi&m != m {
				return utf8Seqs(hi&^m, hi, utf8Seqs(lo, (hi&^m)-1, out))
			}
		}
	}
	a, b := utf8.AppendRune(nil, lo), utf8.AppendRune(nil, hi)
	seq := make([]byteRange, len(a))
	for i := range a {
		seq[i] = byteRange{a[i], b[i]}
	}
	return append(out, seq)
}
