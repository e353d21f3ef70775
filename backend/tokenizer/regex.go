package tokenizer

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// This file is a small regular-expression engine over runes, made for the
// pre-tokenizer regexes of tokenizer.json files (see pretok.go). Go's regexp
// has no lookahead, and those regexes use \s+(?!\S), so we compile our own.
//
// Syntax (ECMAScript's, as Hugging Face's and llama.cpp's regexes are read):
// literals and escapes (\r \n \t \f \v \0 \xHH \uHHHH \u{H…}, an escaped
// punctuation character), . (any rune but a line break), classes [..] and
// [^..] with ranges, \s \S \d \D \w \W and \p{X} \P{X} (X a Unicode general
// category such as L, Lu, N, P, M, S, or a script such as Han), groups (..)
// and (?:..), (?i:..) (simple case folding), a one-character lookahead (?=X)
// or (?!X), the anchors ^ and $ (start and end of the text matched), | and
// the greedy quantifiers * + ? {m} {m,} {m,n}.
//
// Matching is leftmost-first with backtracking, as std::regex's and the
// JavaScript engines' are. The refusals keep that fast and bounded: no lazy
// quantifiers, no backreferences, lookahead of one character only, no
// expression that matches the empty string, no repetition of one that can.

// class is a set of runes. Membership of ASCII runes is one bit; other runes
// are tested against the ranges and items, then against their case-fold
// orbit if fold.
type class struct {
	ascii  [2]uint64 // membership for r < 128, negation included
	ranges []rune    // sorted, disjoint lo, hi pairs (seal moves plain ranges here)
	items  []classItem
	neg    bool
	fold   bool
	// and, from [A&&[B]] (Java's and Oniguruma's intersection, which
	// Kimi-K2's pattern uses), is a class every member is also in.
	and *class
}

type classItem struct {
	lo, hi rune                // a range, when table is nil
	table  *unicode.RangeTable // a category or script
	not    bool                // \P{..}, \S, \D, \W: the item's complement
}

func (it classItem) has(r rune) bool {
	in := it.lo <= r && r <= it.hi
	if it.table != nil {
		in = unicode.Is(it.table, r)
	}
	return in != it.not
}

func (c *class) has(r rune) bool {
	if r < 128 {
		return c.ascii[r>>6]>>(r&63)&1 != 0
	}
	return c.slow(r)
}

func (c *class) slow(r rune) bool {
	in := c.raw(r)
	if !in && c.fold {
		for f := unicode.SimpleFold(r); f != r && !in; f = unicode.SimpleFold(f) {
			in = c.raw(f)
		}
	}
	return in != c.neg
}

func (c *class) raw(r rune) bool {
	if c.and != nil && !c.and.has(r) {
		return false
	}
	// The first pair whose hi ≥ r holds r if its lo ≤ r.
	if i := sort.Search(len(c.ranges)/2, func(i int) bool { return c.ranges[2*i+1] >= r }); 2*i < len(c.ranges) && c.ranges[2*i] <= r {
		return true
	}
	for _, it := range c.items {
		if it.has(r) {
			return true
		}
	}
	return false
}

// seal sorts and merges the plain ranges (deepseek-llm's letter class has
// over a hundred) and computes the ASCII bitmap once the items are known.
func (c *class) seal() *class {
	var plain []classItem
	rest := c.items[:0:0]
	for _, it := range c.items {
		if it.table == nil && !it.not {
			plain = append(plain, it)
		} else {
			rest = append(rest, it)
		}
	}
	for i := 0; i < len(c.ranges); i += 2 {
		plain = append(plain, classItem{lo: c.ranges[i], hi: c.ranges[i+1]})
	}
	slices.SortFunc(plain, func(a, b classItem) int { return int(a.lo - b.lo) })
	c.ranges, c.items = c.ranges[:0:0], rest
	for _, it := range plain {
		if n := len(c.ranges); n > 0 && it.lo <= c.ranges[n-1]+1 {
			c.ranges[n-1] = max(c.ranges[n-1], it.hi)
			continue
		}
		c.ranges = append(c.ranges, it.lo, it.hi)
	}
	c.ascii = [2]uint64{}
	for r := rune(0); r < 128; r++ {
		if c.slow(r) {
			c.ascii[r>>6] |= 1 << (r & 63)
		}
	}
	return c
}

// parts lists a sealed class's ranges and items, negation aside.
func (c *class) parts() []classItem {
	var out []classItem
	for i := 0; i < len(c.ranges); i += 2 {
		out = append(out, classItem{lo: c.ranges[i], hi: c.ranges[i+1]})
	}
	return append(out, c.items...)
}

func runeClass(r rune, fold bool) *class {
	return (&class{items: []classItem{{lo: r, hi: r}}, fold: fold}).seal()
}

var (
	spaceItem = classItem{table: unicode.White_Space}
	digitItem = classItem{lo: '0', hi: '9'}
	wordItems = []classItem{{lo: 'a', hi: 'z'}, {lo: 'A', hi: 'Z'}, digitItem, {lo: '_', hi: '_'}}
	// anyClass is ".": every rune but ECMAScript's line terminators.
	anyClass = (&class{neg: true, items: []classItem{{lo: '\n', hi: '\n'}, {lo: '\r', hi: '\r'}, {lo: 0x2028, hi: 0x2029}}}).seal()
)

type nodeOp uint8

const (
	nEmpty nodeOp = iota
	nClass        // one rune of cls
	nBegin        // ^
	nEnd          // $
	nLook         // (?=cls) or, with neg, (?!cls)
	nCat
	nAlt
	nRepeat // subs[0] repeated min..max times (max -1: unbounded)
)

type node struct {
	op       nodeOp
	cls      *class
	neg      bool
	subs     []*node
	min, max int
}

// nullable reports whether n can match the empty string.
func (n *node) nullable() bool {
	switch n.op {
	case nClass:
		return false
	case nCat:
		for _, s := range n.subs {
			if !s.nullable() {
				return false
			}
		}
		return true
	case nAlt:
		for _, s := range n.subs {
			if s.nullable() {
				return true
			}
		}
		return false
	case nRepeat:
		return n.min == 0 || n.subs[0].nullable()
	}
	return true // empty, anchors, lookahead
}

type parser struct {
	src  []rune
	pos  int
	fold bool
}

func parseRegex(src string) (*node, error) {
	p := &parser{src: []rune(src)}
	n, err := p.alt()
	if err == nil && p.pos < len(p.src) {
		err = p.errorf("unmatched )")
	}
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w", src, err)
	}
	return n, nil
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("at rune %d: %s", p.pos, fmt.Sprintf(format, args...))
}

func (p *parser) more() bool { return p.pos < len(p.src) }
func (p *parser) peek() rune { return p.src[p.pos] }

func (p *parser) alt() (*node, error) {
	var alts []*node
	for {
		n, err := p.cat()
		if err != nil {
			return nil, err
		}
		alts = append(alts, n)
		if !p.more() || p.peek() != '|' {
			break
		}
		p.pos++
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return &node{op: nAlt, subs: alts}, nil
}

func (p *parser) cat() (*node, error) {
	var seq []*node
	for p.more() && p.peek() != '|' && p.peek() != ')' {
		n, err := p.repeat()
		if err != nil {
			return nil, err
		}
		seq = append(seq, n)
	}
	switch len(seq) {
	case 0:
		return &node{op: nEmpty}, nil
	case 1:
		return seq[0], nil
	}
	return &node{op: nCat, subs: seq}, nil
}

func (p *parser) repeat() (*node, error) {
	start := p.pos
	n, err := p.atom()
	if err != nil {
		return nil, err
	}
	if !p.more() {
		return n, nil
	}
	lo, hi, ok := p.quantifier()
	if !ok {
		return n, nil
	}
	if n.op != nClass && n.op != nCat && n.op != nAlt && n.op != nRepeat {
		return nil, p.errorf("nothing to repeat before %q", string(p.src[start:p.pos]))
	}
	if p.more() && p.peek() == '?' {
		return nil, p.errorf("lazy quantifiers are not supported")
	}
	if p.more() && strings.ContainsRune("*+{", p.peek()) {
		if _, _, again := p.quantifier(); again {
			return nil, p.errorf("nothing to repeat: two quantifiers in a row")
		}
	}
	if hi >= 0 && hi < lo {
		return nil, p.errorf("quantifier {%d,%d} has max < min", lo, hi)
	}
	if hi < 0 && n.nullable() {
		return nil, p.errorf("unbounded repetition of an expression that can match empty")
	}
	return &node{op: nRepeat, subs: []*node{n}, min: lo, max: hi}, nil
}

// quantifier reads * + ? {m} {m,} {m,n}. A "{" that starts none of these
// is a literal, as in ECMAScript's web-compatible grammar.
func (p *parser) quantifier() (lo, hi int, ok bool) {
	switch p.peek() {
	case '*':
		p.pos++
		return 0, -1, true
	case '+':
		p.pos++
		return 1, -1, true
	case '?':
		p.pos++
		return 0, 1, true
	case '{':
		end := p.pos + 1
		for end < len(p.src) && p.src[end] != '}' {
			end++
		}
		if end == len(p.src) {
			return 0, 0, false
		}
		body := string(p.src[p.pos+1 : end])
		a, b, comma := strings.Cut(body, ",")
		lo, err := strconv.Atoi(a)
		if err != nil || lo < 0 || lo > 1000 {
			return 0, 0, false
		}
		hi = lo
		if comma {
			hi = -1
			if b != "" {
				if hi, err = strconv.Atoi(b); err != nil || hi < 0 || hi > 1000 {
					return 0, 0, false
				}
			}
		}
		p.pos = end + 1
		return lo, hi, true
	}
	return 0, 0, false
}

func (p *parser) atom() (*node, error) {
	r := p.peek()
	p.pos++
	switch r {
	case '(':
		return p.group()
	case '[':
		c, err := p.class()
		if err != nil {
			return nil, err
		}
		return &node{op: nClass, cls: c}, nil
	case '.':
		return &node{op: nClass, cls: anyClass}, nil
	case '^':
		return &node{op: nBegin}, nil
	case '$':
		return &node{op: nEnd}, nil
	case '*', '+', '?':
		return nil, p.errorf("nothing to repeat before %q", r)
	case '\\':
		c, err := p.escape(false)
		if err != nil {
			return nil, err
		}
		return &node{op: nClass, cls: c}, nil
	}
	return &node{op: nClass, cls: runeClass(r, p.fold)}, nil
}

func (p *parser) group() (*node, error) {
	kind := ""
	for _, k := range []string{"?:", "?i:", "?=", "?!"} {
		if strings.HasPrefix(string(p.src[p.pos:min(p.pos+3, len(p.src))]), k) {
			kind = k
			p.pos += len(k)
			break
		}
	}
	if kind == "" && p.more() && p.peek() == '?' {
		return nil, p.errorf("unsupported group (?%c", p.src[min(p.pos+1, len(p.src)-1)])
	}
	outer := p.fold
	if kind == "?i:" {
		p.fold = true
	}
	n, err := p.alt()
	p.fold = outer
	if err != nil {
		return nil, err
	}
	if !p.more() || p.peek() != ')' {
		return nil, p.errorf("missing )")
	}
	p.pos++
	if kind == "?=" || kind == "?!" {
		if n.op != nClass {
			return nil, p.errorf("lookahead must hold one character or class")
		}
		return &node{op: nLook, cls: n.cls, neg: kind == "?!"}, nil
	}
	return n, nil
}

// class parses the inside of [..] after the "[".
func (p *parser) class() (*class, error) {
	c := &class{fold: p.fold}
	if p.more() && p.peek() == '^' {
		c.neg = true
		p.pos++
	}
	first := true
	for {
		if !p.more() {
			return nil, p.errorf("missing ]")
		}
		r := p.peek()
		if r == ']' && !first {
			p.pos++
			return c.seal(), nil
		}
		if r == '&' && strings.HasPrefix(string(p.src[p.pos:]), "&&[") && !first {
			p.pos += 3
			and, err := p.class()
			if err != nil {
				return nil, err
			}
			if c.and != nil {
				return nil, p.errorf("only one && in a class is supported")
			}
			c.and = and
			continue
		}
		first = false
		lo, single, err := p.classAtom(c)
		if err != nil {
			return nil, err
		}
		if !single {
			continue
		}
		// A range lo-hi, unless "-" ends the class or follows a set.
		if p.pos+1 < len(p.src) && p.peek() == '-' && p.src[p.pos+1] != ']' {
			p.pos++
			hi, single, err := p.classAtom(c)
			if err != nil {
				return nil, err
			}
			if !single {
				c.items = append(c.items, classItem{lo: lo, hi: lo}, classItem{lo: '-', hi: '-'})
				continue
			}
			if hi < lo {
				return nil, p.errorf("range %q-%q out of order", lo, hi)
			}
			c.items = append(c.items, classItem{lo: lo, hi: hi})
			continue
		}
		c.items = append(c.items, classItem{lo: lo, hi: lo})
	}
}

// classAtom reads one rune (single true) or one escape set, which it adds
// to c itself.
func (p *parser) classAtom(c *class) (r rune, single bool, err error) {
	r = p.peek()
	p.pos++
	if r != '\\' {
		return r, true, nil
	}
	e, err := p.escape(true)
	if err != nil {
		return 0, false, err
	}
	parts := e.parts()
	if len(parts) == 1 && parts[0].table == nil && parts[0].lo == parts[0].hi && !e.neg {
		return parts[0].lo, true, nil
	}
	if e.neg { // \S, \D, \W, \P{..} are stored negated: turn them into items
		if len(parts) > 1 { // \W: the complement of a union is not a union of complements
			return 0, false, p.errorf(`\W inside a class is not supported`)
		}
		parts[0].not = !parts[0].not
	}
	c.items = append(c.items, parts...)
	return 0, false, nil
}

// escape reads what follows a backslash.
func (p *parser) escape(inClass bool) (*class, error) {
	if !p.more() {
		return nil, p.errorf("trailing backslash")
	}
	r := p.peek()
	p.pos++
	set := func(neg bool, items ...classItem) *class {
		return (&class{items: items, neg: neg, fold: p.fold}).seal()
	}
	switch r {
	case 's', 'S':
		return set(r == 'S', spaceItem), nil
	case 'd', 'D':
		return set(r == 'D', digitItem), nil
	case 'w', 'W':
		return set(r == 'W', wordItems...), nil
	case 'p', 'P':
		if !p.more() || p.peek() != '{' {
			return nil, p.errorf(`\%c needs {name}`, r)
		}
		end := p.pos
		for end < len(p.src) && p.src[end] != '}' {
			end++
		}
		if end == len(p.src) {
			return nil, p.errorf(`\%c{ has no }`, r)
		}
		name := string(p.src[p.pos+1 : end])
		t := unicode.Categories[name]
		if t == nil {
			t = unicode.Scripts[name]
		}
		if t == nil {
			return nil, p.errorf(`unknown Unicode category or script %q`, name)
		}
		p.pos = end + 1
		return set(r == 'P', classItem{table: t}), nil
	case 'n':
		r = '\n'
	case 'r':
		r = '\r'
	case 't':
		r = '\t'
	case 'f':
		r = '\f'
	case 'v':
		r = '\v'
	case '0':
		r = 0
	case 'x', 'u':
		v, err := p.hex(r)
		if err != nil {
			return nil, err
		}
		r = v
	case 'b', 'B':
		if !inClass {
			return nil, p.errorf(`word boundaries \%c are not supported`, r)
		}
		if r == 'b' {
			r = '\b'
		}
	default:
		if r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			return nil, p.errorf(`unsupported escape \%c`, r)
		}
	}
	return runeClass(r, p.fold), nil
}

// hex reads \xHH, \uHHHH or \u{H…} after the x or u.
func (p *parser) hex(kind rune) (rune, error) {
	n := 2
	if kind == 'u' {
		n = 4
		if p.more() && p.peek() == '{' {
			end := p.pos
			for end < len(p.src) && p.src[end] != '}' {
				end++
			}
			v, err := strconv.ParseUint(string(p.src[min(p.pos+1, end):end]), 16, 32)
			if end == len(p.src) || err != nil || v > unicode.MaxRune {
				return 0, p.errorf(`bad \u{…} escape`)
			}
			p.pos = end + 1
			return rune(v), nil
		}
	}
	if p.pos+n > len(p.src) {
		return 0, p.errorf(`short \%c escape`, kind)
	}
	v, err := strconv.ParseUint(string(p.src[p.pos:p.pos+n]), 16, 32)
	if err != nil {
		return 0, p.errorf(`bad \%c escape`, kind)
	}
	p.pos += n
	return rune(v), nil
}
