package grammar

// rawSpec is text written as it is, unquoted and unescaped, as the XML
// tool-call formats write a string parameter's value: its characters
// follow spec's pattern automaton and length bounds (a JSON string's, read
// without the quotes and escapes), and it never holds stop, the tag that
// closes the value, so the parser ends the value where the grammar did.
type rawSpec struct {
	spec *strSpec
	stop string // no byte of stop occurs again after its first: '<' leads
}

// A raw frame: phase 0 before the first byte, strIn after; i counts
// characters, a is the pattern's state, b how many bytes of stop the text
// ends with.

func (r *rawSpec) state(f frame) int32 {
	if f.phase == 0 {
		return r.spec.dfa.start
	}
	return f.a
}

// step advances a raw frame by byte c.
func (r *rawSpec) step(f frame, c byte) (frame, bool) {
	match := int32(0)
	switch {
	case c == r.stop[f.b]:
		match = f.b + 1
	case c == r.stop[0]:
		match = 1
	}
	if int(match) == len(r.stop) {
		return frame{}, false
	}
	t := r.state(f)
	if t < 0 {
		return frame{}, false
	}
	next, ok := r.spec.feed(frame{n: f.n, i: f.i, phase: strIn, a: t}, c)
	next.b = match
	return next, ok
}

// ends reports whether the text may end after f.
func (r *rawSpec) ends(f frame) bool {
	t := r.state(f)
	d := r.spec.dfa
	return t >= 0 && !d.mid[t] && d.accept[t] && int(f.i) >= r.spec.min
}

func rawNode(spec *strSpec, stop string) *node {
	return newNode(node{kind: kRaw, raw: &rawSpec{spec: spec, stop: stop}})
}
