package grammar

import (
	"fmt"
	"math"
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
}

var vocabs sync.Map // *tokenizer.Tokenizer → *vocab

func vocabOf(t *tokenizer.Tokenizer) *vocab {
	if v, ok := vocabs.Load(t); ok {
		return v.(*vocab)
	}
	v := &vocab{root: &trie{}}
	for id := 0; id < t.VocabSize(); id++ {
		b := t.AppendPiece(nil, id, false)
		if len(b) == 0 {
			v.empty = append(v.empty, id)
			continue
		}
		n := v.root
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
	actual, _ := vocabs.LoadOrStore(t, v)
	return actual.(*vocab)
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

// Done reports whether the output is complete.
func (c *Constraint) Done() bool {
	for _, s := range c.states {
		if len(s) == 0 {
			return true
		}
	}
	return false
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

// dedup drops identical states (alternatives that merged again).
func dedup(states []state) []state {
	if len(states) < 2 {
		return states
	}
	seen := map[string]bool{}
	out := states[:0]
	for _, s := range states {
		k := fmt.Sprint(s)
		if !seen[k] {
			seen[k] = true
			out = append(out, s)
		}
	}
	return out
}

// Allowed returns a mask of the tokens that keep the output valid.
func (c *Constraint) Allowed() []bool {
	mask := make([]bool, c.tok.VocabSize())
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
	walk(c.v.root, c.states)
	if c.Done() {
		for id := range c.tok.EOG {
			mask[id] = true
		}
	}
	return mask
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
	for _, s := range states {
		if len(s) == 0 {
			return true
		}
	}
	return false
}
