// Package grammar compiles JSON schemas (tool parameters, response_format)
// into a byte-level pushdown automaton and uses it as a token constraint:
// at each step only tokens whose bytes keep the output a valid prefix are
// allowed.
//
// NOTE: the output is compact JSON with object keys in sorted order and only
// the escapes Go's encoder writes, so a generated call re-renders byte for
// byte in the next turn's prompt (chat.CanonicalJSON) and the prefix cache
// keeps holding.
package grammar

import (
	"slices"
	"strings"
)

type kind int

const (
	kLit kind = iota // exact bytes
	kSeq             // items in order
	kAlt             // one of items
	kStr             // a JSON string of at most max bytes
	kNum             // a JSON number (integer when integer)
	kRep             // open, item (sep item)*, close; between min and max items
	kObj             // an object's members after its "{": props in order, optional ones skippable, then "}"
)

// node is one grammar element; trees may share nodes.
type node struct {
	kind     kind
	lit      string
	items    []*node
	item     *node
	max, min int
	integer  bool
	open     byte
	close    byte
	props    []prop // kObj
}

// prop is one object member: its key and value with and without the comma
// that separates it from an earlier member.
type prop struct {
	first, later *node
	required     bool
}

var closeBrace = lit("}")

func lit(s string) *node       { return &node{kind: kLit, lit: s} }
func seq(items ...*node) *node { return &node{kind: kSeq, items: items} }
func alt(items ...*node) *node { return &node{kind: kAlt, items: items} }
func str(max int) *node        { return &node{kind: kStr, max: max} }
func num(integer bool) *node   { return &node{kind: kNum, integer: integer} }
func rep(o, c byte, item *node, min, max int) *node {
	return &node{kind: kRep, open: o, close: c, item: item, min: min, max: max}
}

// frame is progress within one node: i counts bytes (lit, str) or items
// (seq, rep); phase is the sub-state of str, num and rep.
type frame struct {
	n     *node
	i     int
	phase int
}

// state is a stack of frames, top last. States are values: every step
// copies.
type state []frame

// maxStack bounds a state's depth: a recursive schema ($ref) cannot grow a
// stack past it, and a left-recursive one cannot make closure loop.
const maxStack = 256

func (s state) push(f frame) state {
	out := make(state, len(s), len(s)+1)
	copy(out, s)
	return append(out, f)
}

func (s state) replaceTop(f frame) state {
	out := make(state, len(s))
	copy(out, s)
	out[len(out)-1] = f
	return out
}

// closure expands s until each resulting state's top frame needs a byte,
// or the stack is empty (accepting).
func closure(s state, out []state) []state {
	if len(s) == 0 {
		return append(out, s)
	}
	if len(s) > maxStack {
		return out
	}
	f := s[len(s)-1]
	switch f.n.kind {
	case kLit:
		if f.i == len(f.n.lit) {
			return closure(s[:len(s)-1], out)
		}
	case kSeq:
		if f.i == len(f.n.items) {
			return closure(s[:len(s)-1], out)
		}
		t := s.replaceTop(frame{n: f.n, i: f.i + 1})
		return closure(t.push(frame{n: f.n.items[f.i]}), out)
	case kAlt:
		return expandAlt(s, f.n, out, nil)
	case kRep:
		if f.phase == 3 { // an item is due
			t := s.replaceTop(frame{n: f.n, i: f.i + 1, phase: 2})
			return closure(t.push(frame{n: f.n.item}), out)
		}
	case kObj: // i: the next member to consider; phase 1: one was written
		for j := f.i; j < len(f.n.props); j++ {
			p := f.n.props[j]
			member := p.first
			if f.phase == 1 {
				member = p.later
			}
			t := s.replaceTop(frame{n: f.n, i: j + 1, phase: 1})
			out = closure(t.push(frame{n: member}), out)
			if p.required {
				return out // it cannot be skipped, nor the object closed before it
			}
		}
		return closure(s.replaceTop(frame{n: closeBrace}), out)
	}
	return append(out, s)
}

// expandAlt replaces s's top (the choice alt) with each of its items. A
// choice whose item is a choice already being expanded (a left-recursive
// $ref such as {"anyOf":[{"$ref":"#"},…]}) is skipped: it would only repeat
// the same options.
func expandAlt(s state, alt *node, out []state, chain []*node) []state {
	base := s[:len(s)-1]
	chain = append(chain, alt)
	for _, it := range alt.items {
		if it.kind != kAlt {
			out = closure(base.push(frame{n: it}), out)
		} else if !slices.Contains(chain, it) {
			out = expandAlt(base.push(frame{n: it}), it, out, chain)
		}
	}
	return out
}

// numDone reports whether a number frame may end here.
func numDone(f frame) bool { return f.phase == 2 || f.phase == 3 || f.phase == 5 }

// step advances s by byte c; it returns the successor states (none when c
// is not allowed).
func step(s state, c byte, out []state) []state {
	if len(s) == 0 {
		return out
	}
	top := len(s) - 1
	f := s[top]
	n := f.n
	switch n.kind {
	case kLit:
		if n.lit[f.i] == c {
			return closure(s.replaceTop(frame{n: n, i: f.i + 1}), out)
		}
	case kStr:
		switch f.phase {
		case 0:
			if c == '"' {
				return append(out, s.replaceTop(frame{n: n, phase: 1}))
			}
		case 1:
			switch {
			case c == '"':
				return closure(s[:top], out)
			case c == '\\' && f.i+2 <= n.max:
				return append(out, s.replaceTop(frame{n: n, i: f.i + 1, phase: 2}))
			case c >= 0x20 && c != 0x7f && f.i < n.max:
				return append(out, s.replaceTop(frame{n: n, i: f.i + 1, phase: 1}))
			}
		case 2: // after a backslash: the escapes Go's encoder writes
			if strings.IndexByte(`"\nrt`, c) >= 0 {
				return append(out, s.replaceTop(frame{n: n, i: f.i + 1, phase: 1}))
			}
		}
	case kNum:
		digit := c >= '0' && c <= '9'
		next := -1
		const maxDigits = 12
		switch f.phase {
		case 0: // start
			switch {
			case c == '-':
				next = 1
			case c == '0':
				next = 3
			case digit:
				next = 2
			}
		case 1: // after '-'
			if c == '0' {
				next = 3
			} else if digit {
				next = 2
			}
		case 2: // integer digits
			if digit && f.i < maxDigits {
				next = 2
			} else if c == '.' && !n.integer {
				next = 4
			}
		case 3: // a leading zero
			if c == '.' && !n.integer {
				next = 4
			}
		case 4: // after '.'
			if digit {
				next = 5
			}
		case 5: // fraction digits
			if digit && f.i < maxDigits {
				next = 5
			}
		}
		if next >= 0 {
			i := f.i + 1
			if next == 4 {
				i = 0
			}
			out = append(out, s.replaceTop(frame{n: n, i: i, phase: next}))
		}
		if numDone(f) {
			for _, p := range closure(s[:top], nil) {
				out = step(p, c, out)
			}
		}
		return out
	case kRep:
		switch f.phase {
		case 0:
			if c == n.open {
				return append(out, s.replaceTop(frame{n: n, phase: 1}))
			}
		case 1: // just opened: close, or the first item
			if c == n.close && n.min == 0 {
				return closure(s[:top], out)
			}
			for _, p := range closure(s.replaceTop(frame{n: n, phase: 3}), nil) {
				out = step(p, c, out)
			}
		case 2: // after an item
			if c == n.close && f.i >= n.min {
				return closure(s[:top], out)
			}
			if c == ',' && f.i < n.max {
				return closure(s.replaceTop(frame{n: n, i: f.i, phase: 3}), out)
			}
		}
	}
	return out
}
