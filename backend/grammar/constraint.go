package grammar

import (
	"math"
	"slices"
	"strings"
	"sync"

	"jspark/backend/tokenizer"
)

// trie indexes a vocabulary by token bytes, so that one walk of the
// automaton prices every token sharing a prefix at once.
type trie struct {
	kids map[byte]*trie
	ids  []int
}

type vocab struct {
	root  *trie
	empty []int // tokens with no bytes (control tokens)
	// Inside a JSON string every token made only of plain string bytes is
	// allowed, whatever the grammar: those are listed once (plain), and only
	// the tokens holding a quote, backslash or control byte need a walk.
	plain   []int
	special *trie
	maxLen  int // bytes of the longest token
}

// plainByte is a byte a JSON string holds unescaped.
func plainByte(c byte) bool { return c >= 0x20 && c != 0x7f && c != '"' && c != '\\' }

var vocabs sync.Map // *tokenizer.Tokenizer → *vocab

func vocabOf(t *tokenizer.Tokenizer) *vocab {
	if v, ok := vocabs.Load(t); ok {
		return v.(*vocab)
	}
	v := &vocab{root: &trie{}, special: &trie{}}
	for id := 0; id < t.VocabSize(); id++ {
		b := t.AppendPiece(nil, id, false)
		if len(b) == 0 {
			v.empty = append(v.empty, id)
			continue
		}
		v.maxLen = max(v.maxLen, len(b))
		v.root.add(b, id)
		plain := true
		for _, c := range b {
			plain = plain && plainByte(c)
		}
		if plain {
			v.plain = append(v.plain, id)
		} else {
			v.special.add(b, id)
		}
	}
	actual, _ := vocabs.LoadOrStore(t, v)
	return actual.(*vocab)
}

func (n *trie) add(b []byte, id int) {
	for _, c := range b {
		if n.kids == nil {
			n.kids = map[byte]*trie{}
		}
		k := n.kids[c]
		if k == nil {
			k = &trie{}
			n.kids[c] = k
		}
		n = k
	}
	n.ids = append(n.ids, id)
}

// Constraint follows one generation; it implements engine.Constraint.
type Constraint struct {
	tok    *tokenizer.Tokenizer
	v      *vocab
	states []state
	text   strings.Builder
}

// NewConstraint starts g over a tokenizer's vocabulary.
func (g *Grammar) NewConstraint(t *tokenizer.Tokenizer) *Constraint {
	return &Constraint{tok: t, v: vocabOf(t), states: closure(state{frame{n: g.root}}, nil)}
}

// Done reports whether the output is complete: nothing may follow. Where
// it may end but could also go on (another tool call, more digits), the
// mask allows end-of-generation and the model chooses.
func (c *Constraint) Done() bool {
	return len(c.states) > 0 && !slices.ContainsFunc(c.states, func(s state) bool { return len(s) > 0 })
}

// Text is the output accepted so far.
func (c *Constraint) Text() string { return c.text.String() }

func advance(states []state, b byte) []state {
	var out []state
	for _, s := range states {
		out = step(s, b, out)
	}
	return dedup(out)
}

// dedup drops identical states (alternatives that merged again). The sets
// are small: pairwise comparison beats building keys.
func dedup(states []state) []state {
	if len(states) < 2 {
		return states
	}
	out := states[:0]
	for _, s := range states {
		dup := false
		for _, o := range out {
			if slices.Equal(s, o) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, s)
		}
	}
	return out
}

// inString reports whether the only state is inside a JSON string with room
// for any token's worth of plain bytes.
func (c *Constraint) inString() bool {
	if len(c.states) != 1 || len(c.states[0]) == 0 {
		return false
	}
	f := c.states[0][len(c.states[0])-1]
	return f.n.kind == kStr && f.phase == 1 && f.n.max-f.i >= c.v.maxLen
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
	return c.walkAll()
}

// walkAll prices every token by walking the whole vocabulary trie.
func (c *Constraint) walkAll() []bool {
	mask := make([]bool, c.tok.VocabSize())
	c.walk(mask, c.v.root)
	return mask
}

func (c *Constraint) walk(mask []bool, root *trie) {
	var walk func(n *trie, states []state)
	walk = func(n *trie, states []state) {
		for b, k := range n.kids {
			ns := advance(states, b)
			if len(ns) == 0 {
				continue
			}
			for _, id := range k.ids {
				mask[id] = true
			}
			walk(k, ns)
		}
	}
	walk(root, c.states)
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
		c.states = advance(c.states, x)
	}
	c.text.Write(b)
	return c.Done() || len(c.states) == 0
}

// Valid reports whether text is a complete output of g (for tests).
func (g *Grammar) Valid(text string) bool {
	states := closure(state{frame{n: g.root}}, nil)
	for i := 0; i < len(text); i++ {
		states = advance(states, text[i])
		if len(states) == 0 {
			return false
		}
	}
	return slices.ContainsFunc(states, canEnd)
}

// canEnd reports whether output in state s may end here: the stack is
// empty, or a number that may stop here is all that is left (a number at
// the top level has no byte after it to close it, so the model ends it
// with end-of-generation, which the mask then allows).
func canEnd(s state) bool {
	if len(s) == 0 {
		return true
	}
	f := s[len(s)-1]
	if f.n.kind != kNum || !numDone(f) {
		return false
	}
	return slices.ContainsFunc(closure(s[:len(s)-1], nil), func(p state) bool { return len(p) == 0 })
}
