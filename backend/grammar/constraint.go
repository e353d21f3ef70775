package grammar

import (
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"jspark/backend/tokenizer"
)

// trie indexes a vocabulary by token bytes, so that one walk of the
// automaton prices every token sharing a prefix at once. Children are
// sorted by byte.
type trie struct {
	bytes []byte
	kids  []*trie
	ids   []int
}

type vocab struct {
	root  *trie
	empty []int // tokens with no bytes (control tokens)
	// Inside a plain JSON string every token made only of whole writable
	// characters (no quote, backslash or control byte) is allowed, whatever
	// the grammar: those are listed once (plain), and only the others need
	// a walk.
	plain   []int
	special *trie
	// Likewise inside raw text (the XML formats' string values): every
	// token of whole writable characters, newlines and tabs included, with
	// no '<' (which may begin the closing tag) is allowed (raw); the
	// others are walked (rawSpecial).
	raw        []int
	rawSpecial *trie
	maxLen     int // bytes of the longest token
	depth      int // bytes of the longest token, for the walk's buffers
}

// plainPiece reports whether a plain string holds b as it is: whole UTF-8
// characters, all writable, none that must be escaped.
func plainPiece(b []byte) bool {
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size <= 1 || r < 0x20 || r == '"' || r == '\\' || !writableRune(r) {
			return false
		}
		b = b[size:]
	}
	return true
}

// rawPiece reports whether raw text holds b as it is wherever it is: whole
// writable characters and no '<'.
func rawPiece(b []byte) bool {
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size <= 1 || r == '<' || !writableRune(r) {
			return false
		}
		b = b[size:]
	}
	return true
}

func writableRune(r rune) bool {
	for _, w := range writable {
		if w.lo <= r && r <= w.hi {
			return true
		}
	}
	return false
}

var vocabs sync.Map // *tokenizer.Tokenizer → *vocab

func vocabOf(t *tokenizer.Tokenizer) *vocab {
	if v, ok := vocabs.Load(t); ok {
		return v.(*vocab)
	}
	v := &vocab{root: &trie{}, special: &trie{}, rawSpecial: &trie{}}
	for id := 0; id < t.VocabSize(); id++ {
		b := t.AppendPiece(nil, id, false)
		if len(b) == 0 {
			v.empty = append(v.empty, id)
			continue
		}
		v.maxLen = max(v.maxLen, len(b))
		v.root.add(b, id)
		if plainPiece(b) {
			v.plain = append(v.plain, id)
		} else {
			v.special.add(b, id)
		}
		if rawPiece(b) {
			v.raw = append(v.raw, id)
		} else {
			v.rawSpecial.add(b, id)
		}
	}
	v.depth = v.maxLen + 1
	actual, _ := vocabs.LoadOrStore(t, v)
	return actual.(*vocab)
}

func (n *trie) add(b []byte, id int) {
	for _, c := range b {
		i := sort.Search(len(n.bytes), func(i int) bool { return n.bytes[i] >= c })
		if i == len(n.bytes) || n.bytes[i] != c {
			n.bytes = slices.Insert(n.bytes, i, c)
			n.kids = slices.Insert(n.kids, i, &trie{})
		}
		n = n.kids[i]
	}
	n.ids = append(n.ids, id)
}

// Constraint follows one generation; it implements engine.Constraint.
type Constraint struct {
	tok    *tokenizer.Tokenizer
	v      *vocab
	states []cursor
	text   strings.Builder
	bufs   [][]cursor // the walk's successor lists, one per depth, reused
}

// NewConstraint starts g over a tokenizer's vocabulary.
func (g *Grammar) NewConstraint(t *tokenizer.Tokenizer) *Constraint {
	return &Constraint{tok: t, v: vocabOf(t), states: g.start()}
}

func (g *Grammar) start() []cursor {
	return dedup(cursors(closure(push(nil, frame{n: g.root}), nil), nil))
}

// Done reports whether the output is complete: nothing may follow. Where
// it may end but could also go on (another tool call, more digits), the
// mask allows end-of-generation and the model chooses.
func (c *Constraint) Done() bool {
	return len(c.states) > 0 && !slices.ContainsFunc(c.states, func(s cursor) bool { return !s.done() })
}

// Text is the output accepted so far.
func (c *Constraint) Text() string { return c.text.String() }

// inString reports whether the only state is inside a plain JSON string
// with room for any token's worth of characters.
func (c *Constraint) inString() bool {
	if len(c.states) != 1 || c.states[0].done() {
		return false
	}
	f := c.states[0].f
	if f.n.kind != kStr || f.phase != strIn {
		return false
	}
	p := f.n.str
	return p.plain() && !p.dfa.mid[f.a] && p.max-int(f.i) >= c.v.maxLen
}

// inRaw reports whether the only state is inside plain raw text, with no
// piece of its closing tag written and room for any token.
func (c *Constraint) inRaw() bool {
	if len(c.states) != 1 || c.states[0].done() {
		return false
	}
	f := c.states[0].f
	if f.n.kind != kRaw || f.b != 0 {
		return false
	}
	p := f.n.raw.spec
	return p.plain() && (f.phase == 0 || !p.dfa.mid[f.a]) && p.max-int(f.i) >= c.v.maxLen
}

// Allowed returns a mask of the tokens that keep the output valid.
func (c *Constraint) Allowed() []bool {
	if c.inString() {
		mask := make([]bool, c.tok.VocabSize())
		for _, id := range c.v.plain {
			mask[id] = true
		}
		c.walk(mask, c.v.special)
		return mask
	}
	if c.inRaw() {
		mask := make([]bool, c.tok.VocabSize())
		for _, id := range c.v.raw {
			mask[id] = true
		}
		c.walk(mask, c.v.rawSpecial)
		return mask
	}
	return c.walkAll()
}

// walkAll prices every token by walking the whole vocabulary trie.
func (c *Constraint) walkAll() []bool {
	mask := make([]bool, c.tok.VocabSize())
	c.walk(mask, c.v.root)
	return mask
}

func (c *Constraint) walk(mask []bool, root *trie) {
	if len(c.bufs) < c.v.depth {
		c.bufs = make([][]cursor, c.v.depth)
	}
	var walk func(n *trie, states []cursor, depth int)
	walk = func(n *trie, states []cursor, depth int) {
		for i, b := range n.bytes {
			ns := advance(states, b, c.bufs[depth])
			c.bufs[depth] = ns[:0]
			if len(ns) == 0 {
				continue
			}
			k := n.kids[i]
			for _, id := range k.ids {
				mask[id] = true
			}
			if len(k.bytes) > 0 {
				walk(k, ns, depth+1)
			}
		}
	}
	walk(root, c.states, 0)
	if slices.ContainsFunc(c.states, canEnd) {
		for id := range c.tok.EOG {
			mask[id] = true
		}
	}
}

// Mask sets every forbidden logit to -Inf.
func (c *Constraint) Mask(logits []float32) {
	mask := c.Allowed()
	any := false
	for id, ok := range mask {
		if !ok && id < len(logits) {
			logits[id] = float32(math.Inf(-1))
		}
		any = any || ok
	}
	if !any && c.tok.EOS >= 0 {
		logits[c.tok.EOS] = 0 // dead end: let the request stop rather than emit garbage
	}
}

// Accept advances past token id; it reports whether the output is complete.
func (c *Constraint) Accept(id int) bool {
	b := c.tok.AppendPiece(nil, id, false)
	for _, x := range b {
		c.states = advance(c.states, x, nil)
	}
	c.text.Write(b)
	return c.Done() || len(c.states) == 0
}

// Valid reports whether text is a complete output of g (for tests).
func (g *Grammar) Valid(text string) bool {
	states := g.start()
	for i := 0; i < len(text); i++ {
		states = advance(states, text[i], nil)
		if len(states) == 0 {
			return false
		}
	}
	return slices.ContainsFunc(states, canEnd)
}

// canEnd reports whether output in state s may end here: it is complete,
// or a number that may stop here is all that is left (a number at the top
// level has no byte after it to close it, so the model ends it with
// end-of-generation, which the mask then allows).
func canEnd(s cursor) bool {
	if s.done() {
		return true
	}
	if s.f.n.kind != kNum || !s.f.n.num.complete(s.f.s) {
		return false
	}
	return slices.Contains(closure(s.up, nil), nil)
}
