package grammar

import (
	"encoding/binary"
	"slices"
	"sync"
)

// A pattern (or "any string") becomes a DFA over the bytes of the decoded
// string's UTF-8. The string automaton feeds it raw bytes and the bytes
// that escapes stand for, so the pattern is checked on what the string
// means, not on how it is written.

// nstate is a Thompson NFA state: a byte-range edge to next, or epsilon
// edges, or an anchor (^ or $) before next, or the match.
type nstate struct {
	lo, hi byte
	next   int // byte edge target; -1: none
	eps    []int
	anchor rop // rBegin, rEnd, or rClass for none
	match  bool
}

type nfaBuilder struct {
	states   []nstate
	alphabet []rrange // what classes are cut to
	limit    int
	err      error
}

func (b *nfaBuilder) add(s nstate) int {
	if len(b.states) >= b.limit && b.err == nil {
		b.err = errPatternStates
	}
	b.states = append(b.states, s)
	return len(b.states) - 1
}

func (b *nfaBuilder) eps() int { return b.add(nstate{next: -1, anchor: rClass}) }

// frag compiles n between two new states, returning them.
func (b *nfaBuilder) frag(n *rnode) (in, out int) {
	if b.err != nil {
		return b.eps(), b.eps()
	}
	in, out = b.eps(), b.eps()
	link := func(from, to int) { b.states[from].eps = append(b.states[from].eps, to) }
	switch n.op {
	case rClass:
		for _, r := range intersect(normalize(n.runes), b.alphabet) {
			for _, s := range utf8Seqs(r.lo, r.hi, nil) {
				prev := in
				for i, br := range s {
					to := out
					if i < len(s)-1 {
						to = b.eps()
					}
					e := b.add(nstate{lo: br.lo, hi: br.hi, next: to, anchor: rClass})
					link(prev, e)
					prev = to
				}
			}
		}
	case rCat:
		prev := in
		for _, sub := range n.subs {
			si, so := b.frag(sub)
			link(prev, si)
			prev = so
		}
		link(prev, out)
	case rAlt:
		for _, sub := range n.subs {
			si, so := b.frag(sub)
			link(in, si)
			link(so, out)
		}
	case rBegin, rEnd:
		a := b.add(nstate{next: -1, anchor: n.op, eps: []int{out}})
		link(in, a)
	case rRep:
		prev := in
		for range n.min {
			si, so := b.frag(n.subs[0])
			link(prev, si)
			prev = so
		}
		if n.max < 0 {
			si, so := b.frag(n.subs[0])
			link(prev, si)
			link(so, si)
			link(so, out)
			link(prev, out)
			return in, out
		}
		for range n.max - n.min {
			si, so := b.frag(n.subs[0])
			link(prev, si)
			link(prev, out)
			prev = so
		}
		link(prev, out)
	}
	return in, out
}

// dfa is a deterministic automaton over bytes; trans[state*classes+class]
// is the next state, or -1 where no match can follow.
type dfa struct {
	class   [256]uint8
	classes int
	trans   []int32
	accept  []bool
	mid     []bool // inside a UTF-8 sequence
	start   int32
}

func (d *dfa) next(s int32, c byte) int32 { return d.trans[int(s)*d.classes+int(d.class[c])] }

// buildDFA compiles a parsed pattern searched anywhere in the string
// (wrapped as .*(re).*), or the whole-string language of re when anchored
// is set, over the characters of alphabet. At most limit states are built.
func buildDFA(re *rnode, anchored bool, alphabet []rrange, limit int) (*dfa, error) {
	if !anchored {
		any := &rnode{op: rRep, subs: []*rnode{{op: rClass, runes: alphabet}}, min: 0, max: -1}
		re = &rnode{op: rCat, subs: []*rnode{any, re, any}}
	}
	b := &nfaBuilder{alphabet: alphabet, limit: 16 * limit}
	in, out := b.frag(re)
	b.states[out].match = true
	if b.err != nil {
		return nil, b.err
	}
	nfa := b.states

	// Byte classes: bytes no edge tells apart share a class.
	var cut [257]bool
	for _, s := range nfa {
		if s.next >= 0 {
			cut[s.lo], cut[int(s.hi)+1] = true, true
		}
	}
	d := &dfa{}
	var reps []byte
	k := -1
	for c := 0; c < 256; c++ {
		if c == 0 || cut[c] {
			k++
			reps = append(reps, byte(c))
		}
		d.class[c] = uint8(k)
	}
	d.classes = k + 1

	// closure follows epsilon edges, and ^ only at the start; $ is left for
	// accepting.
	closure := func(set []int, atStart bool) []int {
		seen := make(map[int]bool, len(set))
		stack := append([]int(nil), set...)
		var out []int
		for len(stack) > 0 {
			s := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[s] {
				continue
			}
			seen[s] = true
			out = append(out, s)
			st := nfa[s]
			if st.anchor == rEnd || st.anchor == rBegin && !atStart {
				continue
			}
			stack = append(stack, st.eps...)
		}
		slices.Sort(out)
		return out
	}
	accepting := func(set []int) bool {
		for _, s := range closureEnd(nfa, set) {
			if nfa[s].match {
				return true
			}
		}
		return false
	}
	key := func(set []int) string {
		buf := make([]byte, 0, 4*len(set))
		for _, s := range set {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(s))
		}
		return string(buf)
	}
	ids := map[string]int32{}
	var sets [][]int
	var rem []int // continuation bytes still due in each state
	addState := func(set []int, r int) (int32, error) {
		k := key(set)
		if id, ok := ids[k]; ok {
			return id, nil
		}
		if len(sets) >= limit {
			return 0, errPatternStates
		}
		id := int32(len(sets))
		ids[k] = id
		sets = append(sets, set)
		rem = append(rem, r)
		d.accept = append(d.accept, r == 0 && accepting(set))
		d.mid = append(d.mid, r > 0)
		d.trans = append(d.trans, make([]int32, d.classes)...)
		return id, nil
	}
	if _, err := addState(closure([]int{in}, true), 0); err != nil {
		return nil, err
	}
	for i := 0; i < len(sets); i++ {
		for k, c := range reps {
			var next []int
			for _, s := range sets[i] {
				if st := nfa[s]; st.next >= 0 && st.lo <= c && c <= st.hi {
					next = append(next, st.next)
				}
			}
			d.trans[i*d.classes+k] = -1
			if len(next) == 0 {
				continue
			}
			r := rem[i] - 1
			if rem[i] == 0 {
				r = utf8Len(c) - 1
			}
			id, err := addState(closure(next, false), r)
			if err != nil {
				return nil, err
			}
			d.trans[i*d.classes+k] = id
		}
	}
	d.prune()
	return d, nil
}

// closureEnd follows epsilon edges and $ (the string ends here).
func closureEnd(nfa []nstate, set []int) []int {
	seen := map[int]bool{}
	stack := append([]int(nil), set...)
	var out []int
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[s] {
			continue
		}
		seen[s] = true
		out = append(out, s)
		if nfa[s].anchor != rBegin {
			stack = append(stack, nfa[s].eps...)
		}
	}
	return out
}

// utf8Len is the length of the sequence lead byte c starts.
func utf8Len(c byte) int {
	switch {
	case c < 0x80:
		return 1
	case c >= 0xf0:
		return 4
	case c >= 0xe0:
		return 3
	}
	return 2
}

// prune cuts every transition into a state from which no match is
// reachable, so that the string automaton never walks into a dead end.
func (d *dfa) prune() {
	n := len(d.accept)
	live := slices.Clone(d.accept)
	for changed := true; changed; {
		changed = false
		for s := range n {
			if live[s] {
				continue
			}
			for k := range d.classes {
				if t := d.trans[s*d.classes+k]; t >= 0 && live[t] {
					live[s], changed = true, true
					break
				}
			}
		}
	}
	for i, t := range d.trans {
		if t >= 0 && !live[t] {
			d.trans[i] = -1
		}
	}
	if !live[d.start] {
		d.start = -1
	}
}

// anyDFA accepts every writable string; plain strings (no pattern) use it.
var anyDFA = sync.OnceValue(func() *dfa {
	re := &rnode{op: rRep, subs: []*rnode{{op: rClass, runes: writable}}, min: 0, max: -1}
	d, err := buildDFA(re, true, writable, 64)
	if err != nil {
		panic(err) // a fixed, small automaton
	}
	return d
})
