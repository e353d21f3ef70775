package grammar

// cursor is a parse state: a stack whose top frame f is held by value over
// the stack below it, up. Steps that stay inside one node (a byte of a
// string, a number, a literal or an enum value; most of the bytes) replace
// f and allocate nothing; only steps that enter or leave a node build
// stacks. The zero cursor is the complete output.
type cursor struct {
	f  frame
	up *stack
}

func (c cursor) done() bool { return c.f.n == nil }

func toCursor(s *stack) cursor {
	if s == nil {
		return cursor{}
	}
	return cursor{s.f, s.up}
}

func (c cursor) stack() *stack {
	if c.done() {
		return nil
	}
	return push(c.up, c.f)
}

func cursors(stacks []*stack, out []cursor) []cursor {
	for _, s := range stacks {
		out = append(out, toCursor(s))
	}
	return out
}

// up pops out of a finished node: the states closure reaches from below.
func popTo(up *stack, out []cursor) []cursor { return cursors(closure(up, nil), out) }

// advanceOne appends c's successors after byte b.
func advanceOne(c cursor, b byte, out []cursor) []cursor {
	f := c.f
	n := f.n
	if n == nil {
		return out
	}
	switch n.kind {
	case kStr:
		next, ok, closed := n.str.step(f, b)
		switch {
		case ok:
			return append(out, cursor{next, c.up})
		case closed:
			return popTo(c.up, out)
		}
		return out
	case kLit:
		if n.lit[f.i] != b {
			return out
		}
		if int(f.i)+1 < len(n.lit) {
			return append(out, cursor{frame{n: n, i: f.i + 1}, c.up})
		}
		return popTo(c.up, out)
	case kRaw:
		if next, ok := n.raw.step(f, b); ok {
			out = append(out, cursor{next, c.up})
		}
		if n.raw.ends(f) { // the text may end here: b belongs to what follows
			for _, p := range closure(c.up, nil) {
				out = cursors(step(p, b, nil), out)
			}
		}
		return out
	case kNum:
		if text, ok := n.num.step(f.s, b); ok {
			out = append(out, cursor{frame{n: n, s: text}, c.up})
		}
		if n.num.complete(f.s) { // the number may end here: b belongs to what follows
			for _, p := range closure(c.up, nil) {
				out = cursors(step(p, b, nil), out)
			}
		}
		return out
	}
	return cursors(step(c.stack(), b, nil), out)
}

// maxLive bounds how many parses a constraint follows at once. An
// ambiguous schema (anyOf branches that share a long prefix, nested) could
// otherwise multiply them, and the mask's cost with them.
//
// NOTE: dropping the parses past the bound keeps every output valid (each
// kept parse is one); it only makes some valid outputs unreachable.
const maxLive = 256

// advance steps every cursor by b, without duplicates, into out[:0].
func advance(states []cursor, b byte, out []cursor) []cursor {
	out = out[:0]
	for _, c := range states {
		out = advanceOne(c, b, out)
	}
	return dedup(out)
}

func sameCursor(a, b cursor) bool { return a.f == b.f && equal(a.up, b.up) }

func (c cursor) hash() uint64 {
	h := uint64(0)
	if c.up != nil {
		h = c.up.hash
	}
	if c.f.n != nil {
		h ^= c.f.n.id * 0x9e3779b97f4a7c15
	}
	h ^= uint64(uint32(c.f.i))<<32 | uint64(uint32(c.f.a))
	h = (h ^ uint64(uint32(c.f.b))<<16 ^ uint64(uint32(c.f.phase))) * 1099511628211
	for i := 0; i < len(c.f.s); i++ {
		h = (h ^ uint64(c.f.s[i])) * 1099511628211
	}
	return h
}

// dedup drops identical cursors (alternatives that merged again) and keeps
// at most maxLive.
func dedup(states []cursor) []cursor {
	if len(states) < 2 {
		return states
	}
	out := states[:0]
	if len(states) <= 16 {
		for _, s := range states {
			dup := false
			for _, o := range out {
				if sameCursor(s, o) {
					dup = true
					break
				}
			}
			if !dup {
				out = append(out, s)
			}
		}
	} else {
		seen := make(map[uint64][]int, len(states))
		for _, s := range states {
			h := s.hash()
			dup := false
			for _, i := range seen[h] {
				if sameCursor(s, out[i]) {
					dup = true
					break
				}
			}
			if !dup {
				seen[h] = append(seen[h], len(out))
				out = append(out, s)
			}
		}
	}
	if len(out) > maxLive {
		out = out[:maxLive]
	}
	return out
}
