// Package grammar compiles JSON schemas (tool parameters, response_format)
// into a byte-level pushdown automaton and uses it as a token constraint:
// at each step only tokens whose bytes keep the output a valid prefix are
// allowed. Every schema keyword the compiler accepts is enforced while
// decoding (bounds, lengths, patterns, enums), never checked afterwards;
// a keyword it cannot enforce is a *SchemaError naming it and its path.
//
// NOTE: the output is compact JSON with object keys in sorted order and only
// the escapes Go's encoder writes, so a generated call re-renders byte for
// byte in the next turn's prompt (chat.CanonicalJSON) and the prefix cache
// keeps holding.
package grammar

import (
	"sort"
	"sync/atomic"
)

type kind uint8

const (
	kLit kind = iota // exact bytes
	kSeq             // items in order
	kAlt             // one of items
	kStr             // a JSON string (str)
	kNum             // a JSON number (num)
	kRep             // open, item (sep item)*, close; between min and max items
	kObj             // an object's members after its "{": props in order, optional ones skippable, then "}"
	kSet             // one of set, sorted distinct literals (an enum)
	kRaw             // text as it is, not quoted (raw): the XML formats' string values
)

// node is one grammar element; trees may share nodes and, through $ref,
// form cycles. Nodes never change once compiled.
type node struct {
	kind     kind
	id       uint64 // distinct per node: states hash by it
	lit      string
	items    []*node
	item     *node
	max, min int
	open     byte
	close    byte
	props    []prop   // kObj
	set      []string // kSet
	str      *strSpec // kStr
	num      *numSpec // kNum
	raw      *rawSpec // kRaw
	// end, for kObj, is what closes the object after its members ("}"
	// when nil).
	end *node
}

var nodeIDs atomic.Uint64

func newNode(n node) *node {
	n.id = nodeIDs.Add(1)
	return &n
}

// prop is one object member: its key and value with and without the comma
// that separates it from an earlier member.
type prop struct {
	first, later *node
	required     bool
}

var closeBrace = lit("}")

func lit(s string) *node       { return newNode(node{kind: kLit, lit: s}) }
func seq(items ...*node) *node { return newNode(node{kind: kSeq, items: items}) }
func alt(items ...*node) *node { return newNode(node{kind: kAlt, items: items}) }
func rep(o, c byte, item *node, min, max int) *node {
	return newNode(node{kind: kRep, open: o, close: c, item: item, min: min, max: max})
}

// oneOf is a node for exactly the literals vals (canonical JSON texts).
func oneOf(vals []string) *node {
	vals = append([]string(nil), vals...)
	sort.Strings(vals)
	out := vals[:0]
	for i, v := range vals {
		if i == 0 || v != vals[i-1] {
			out = append(out, v)
		}
	}
	if len(out) == 1 {
		return lit(out[0])
	}
	return newNode(node{kind: kSet, set: out})
}

// frame is progress within one node. i counts bytes (lit), items (seq,
// rep), members (obj), characters (str) or the depth into the values
// (set); phase is the sub-state of str, rep and obj; a is a string's
// pattern state, and [a, b) the values of a set that share the prefix;
// s is a number's text so far.
type frame struct {
	n     *node
	i     int32
	phase int32
	a, b  int32
	s     string
}

// stack is a parse stack, top first; nil is the empty stack (the output is
// complete). Stacks are immutable and share their tails, so a step copies
// one frame, not the whole stack, and hashing is O(1).
type stack struct {
	f     frame
	up    *stack
	depth int32
	hash  uint64
}

// maxStack bounds a stack's depth: a recursive schema ($ref) cannot grow a
// stack past it, and a left-recursive one cannot make closure loop.
const maxStack = 256

func push(up *stack, f frame) *stack {
	s := &stack{f: f, up: up, depth: 1}
	h := uint64(14695981039346656037)
	if up != nil {
		s.depth = up.depth + 1
		h = up.hash
	}
	for _, x := range [...]uint64{f.n.id, uint64(uint32(f.i)), uint64(uint32(f.phase)), uint64(uint32(f.a)), uint64(uint32(f.b))} {
		h = (h ^ x) * 1099511628211
	}
	for i := 0; i < len(f.s); i++ {
		h = (h ^ uint64(f.s[i])) * 1099511628211
	}
	s.hash = h
	return s
}

// replace is s with its top frame replaced by f.
func (s *stack) replace(f frame) *stack { return push(s.up, f) }

func equal(a, b *stack) bool {
	for a != b {
		if a == nil || b == nil || a.hash != b.hash || a.depth != b.depth || a.f != b.f {
			return false
		}
		a, b = a.up, b.up
	}
	return true
}

// closure expands s until each resulting stack's top frame needs a byte,
// or the stack is empty (complete).
func closure(s *stack, out []*stack) []*stack {
	if s == nil {
		return append(out, s)
	}
	if s.depth > maxStack {
		return out
	}
	f := s.f
	switch f.n.kind {
	case kLit:
		if int(f.i) == len(f.n.lit) {
			return closure(s.up, out)
		}
	case kSeq:
		if int(f.i) == len(f.n.items) {
			return closure(s.up, out)
		}
		t := s.replace(frame{n: f.n, i: f.i + 1})
		return closure(push(t, frame{n: f.n.items[f.i]}), out)
	case kAlt:
		return expandAlt(s, f.n, out, nil)
	case kRep:
		if f.phase == 3 { // an item is due
			t := s.replace(frame{n: f.n, i: f.i + 1, phase: 2})
			return closure(push(t, frame{n: f.n.item}), out)
		}
	case kObj: // i: the next member to consider; phase 1: one was written
		for j := int(f.i); j < len(f.n.props); j++ {
			p := f.n.props[j]
			member := p.first
			if f.phase == 1 {
				member = p.later
			}
			t := s.replace(frame{n: f.n, i: int32(j + 1), phase: 1})
			out = closure(push(t, frame{n: member}), out)
			if p.required {
				return out // it cannot be skipped, nor the object closed before it
			}
		}
		end := f.n.end
		if end == nil {
			end = closeBrace
		}
		return closure(s.replace(frame{n: end}), out)
	case kSet:
		if f.b == 0 && f.a == 0 && f.i == 0 { // fresh: every value
			s = s.replace(frame{n: f.n, b: int32(len(f.n.set))})
			f = s.f
		}
		if len(f.n.set[f.a]) == int(f.i) { // a value ends here
			out = closure(s.up, out)
			if f.b-f.a == 1 {
				return out
			}
		}
	}
	return append(out, s)
}

// expandAlt replaces s's top (the choice alt) with each of its items. A
// choice whose item is a choice already being expanded (a left-recursive
// $ref such as {"anyOf":[{"$ref":"#"},…]}) is skipped: it would only repeat
// the same options.
func expandAlt(s *stack, alt *node, out []*stack, chain []*node) []*stack {
	chain = append(chain, alt)
	for _, it := range alt.items {
		if it.kind != kAlt {
			out = closure(push(s.up, frame{n: it}), out)
		} else if !containsNode(chain, it) {
			out = expandAlt(push(s.up, frame{n: it}), it, out, chain)
		}
	}
	return out
}

func containsNode(list []*node, n *node) bool {
	for _, x := range list {
		if x == n {
			return true
		}
	}
	return false
}

// step advances s by byte c; it appends the successor stacks (none when c
// is not allowed).
func step(s *stack, c byte, out []*stack) []*stack {
	if s == nil {
		return out
	}
	f := s.f
	n := f.n
	switch n.kind {
	case kLit:
		if n.lit[f.i] == c {
			return closure(s.replace(frame{n: n, i: f.i + 1}), out)
		}
	case kStr:
		next, ok, closed := n.str.step(f, c)
		switch {
		case closed:
			return closure(s.up, out)
		case ok:
			return append(out, s.replace(next))
		}
	case kNum:
		if text, ok := n.num.step(f.s, c); ok {
			out = append(out, s.replace(frame{n: n, s: text}))
		}
		if n.num.complete(f.s) { // the number may end here: c belongs to what follows
			for _, p := range closure(s.up, nil) {
				out = step(p, c, out)
			}
		}
		return out
	case kRaw:
		if next, ok := n.raw.step(f, c); ok {
			out = append(out, s.replace(next))
		}
		if n.raw.ends(f) { // the text may end here: c belongs to what follows
			for _, p := range closure(s.up, nil) {
				out = step(p, c, out)
			}
		}
		return out
	case kSet:
		lo, hi, d := int(f.a), int(f.b), int(f.i)
		if len(n.set[lo]) == d {
			lo++ // that value ended; the others go on
		}
		set := n.set
		i := lo + sort.Search(hi-lo, func(k int) bool { return set[lo+k][d] >= c })
		j := i + sort.Search(hi-i, func(k int) bool { return set[i+k][d] > c })
		if i < j {
			return closure(s.replace(frame{n: n, i: int32(d + 1), a: int32(i), b: int32(j)}), out)
		}
	case kRep:
		switch f.phase {
		case 0:
			if c == n.open {
				return append(out, s.replace(frame{n: n, phase: 1}))
			}
		case 1: // just opened: close, or the first item
			if c == n.close && n.min == 0 {
				return closure(s.up, out)
			}
			for _, p := range closure(s.replace(frame{n: n, phase: 3}), nil) {
				out = step(p, c, out)
			}
		case 2: // after an item
			if c == n.close && int(f.i) >= n.min {
				return closure(s.up, out)
			}
			if c == ',' && int(f.i) < n.max {
				return closure(s.replace(frame{n: n, i: f.i, phase: 3}), out)
			}
		}
	}
	return out
}
