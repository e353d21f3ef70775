package grammar

// strSpec is a compiled string: its characters follow dfa (the pattern's,
// or anyDFA), and it holds between min and max characters (code points,
// as JSON Schema counts them).
type strSpec struct {
	dfa      *dfa
	min, max int
	// next[t][a], for pattern strings, is the fewest characters, at least
	// a, after which state t reaches a match (max+1: none within max). Nil
	// for plain strings, which reach a match after any number.
	next [][]int32
}

// The phases of a string frame.
const (
	strBefore = iota // before the opening quote
	strIn            // inside, between bytes
	strEscape        // after a backslash
)

// escapes are what the grammar writes after a backslash, with the byte
// each stands for (Go's encoder writes exactly these, and \u00XX).
var (
	escapes = [256]byte{'"': '"', '\\': '\\', 'n': '\n', 'r': '\r', 't': '\t'}
	escaped = [...]byte{'"', '\\', '\n', '\r', '\t'}
)

func plainSpec(min, max int) *strSpec { return &strSpec{dfa: anyDFA(), min: min, max: max} }

// plain reports whether every string of plain bytes fits, length aside.
func (p *strSpec) plain() bool { return p.next == nil && p.dfa == anyDFA() }

// feasible reports whether state t with count characters written can
// still end within the length bounds.
func (p *strSpec) feasible(t int32, count int) bool {
	if count > p.max {
		return false
	}
	if p.next == nil {
		return true
	}
	return int(p.next[t][max(0, p.min-count)]) <= p.max-count
}

// step advances a string frame by byte c: to a new frame (ok), or past the
// closing quote (closed), or not at all.
func (p *strSpec) step(f frame, c byte) (next frame, ok, closed bool) {
	switch f.phase {
	case strBefore:
		if c == '"' && p.dfa.start >= 0 && p.feasible(p.dfa.start, 0) {
			return frame{n: f.n, phase: strIn, a: p.dfa.start}, true, false
		}
	case strIn:
		switch {
		case c == '"':
			return frame{}, false, !p.dfa.mid[f.a] && p.dfa.accept[f.a] && int(f.i) >= p.min
		case c == '\\':
			for _, d := range escaped {
				if _, ok := p.feed(f, d); ok {
					return frame{n: f.n, i: f.i, phase: strEscape, a: f.a}, true, false
				}
			}
		case c >= 0x20 && c != 0x7f:
			next, ok = p.feed(f, c)
			return next, ok, false
		}
	case strEscape:
		if d := escapes[c]; d != 0 {
			next, ok = p.feed(f, d)
			return next, ok, false
		}
	}
	return frame{}, false, false
}

// feed moves the pattern state by one decoded byte d.
func (p *strSpec) feed(f frame, d byte) (frame, bool) {
	t := p.dfa.next(f.a, d)
	if t < 0 {
		return frame{}, false
	}
	count := int(f.i)
	if d < 0x80 || d >= 0xc0 { // a character starts here
		count++
	}
	if !p.feasible(t, count) {
		return frame{}, false
	}
	return frame{n: f.n, i: int32(count), phase: strIn, a: t}, true
}

// lengths fills next for a pattern string: which numbers of further
// characters take each state to a match, up to max. It costs states×max
// bits and steps; cells bounds that product.
func (p *strSpec) lengths(cells int) error {
	d := p.dfa
	n := len(d.accept)
	if n*(p.max+1) > cells {
		return errLengthCells
	}
	// finish[u]: the character boundaries a state inside a character
	// reaches (continuation bytes only); succ[t]: those one whole
	// character takes a boundary state to.
	finish := make([][]int32, n)
	var walk func(u int32, seen map[int32]bool)
	walk = func(u int32, seen map[int32]bool) {
		for k := range d.classes {
			v := d.trans[int(u)*d.classes+k]
			if v < 0 || seen[v] {
				continue
			}
			seen[v] = true
			if d.mid[v] {
				walk(v, seen)
			}
		}
	}
	reps := classReps(d)
	for u := range n {
		if !d.mid[u] {
			continue
		}
		seen := map[int32]bool{}
		walk(int32(u), seen)
		for v := range seen {
			if !d.mid[v] {
				finish[u] = append(finish[u], v)
			}
		}
	}
	succ := make([][]int32, n)
	for t := range n {
		if d.mid[t] {
			continue
		}
		seen := map[int32]bool{}
		for k, c := range reps {
			u := d.trans[t*d.classes+k]
			if u < 0 || c >= 0x80 && c < 0xc0 {
				continue
			}
			targets := []int32{u}
			if d.mid[u] {
				targets = finish[u]
			}
			for _, v := range targets {
				if !seen[v] {
					seen[v] = true
					succ[t] = append(succ[t], v)
				}
			}
		}
	}
	words := (p.max + 64) / 64
	bits := make([][]uint64, n)
	for t := range bits {
		bits[t] = make([]uint64, words)
	}
	set := func(t, l int) { bits[t][l/64] |= 1 << (l % 64) }
	has := func(t int32, l int) bool { return bits[t][l/64]&(1<<(l%64)) != 0 }
	for l := 0; l <= p.max; l++ {
		for t := range n {
			if d.mid[t] {
				continue
			}
			if l == 0 {
				if d.accept[t] {
					set(t, 0)
				}
				continue
			}
			for _, v := range succ[t] {
				if has(v, l-1) {
					set(t, l)
					break
				}
			}
		}
		for u := range n {
			for _, v := range finish[u] {
				if has(v, l) {
					set(u, l)
					break
				}
			}
		}
	}
	p.next = make([][]int32, n)
	for t := range n {
		row := make([]int32, p.min+1)
		nearest := int32(p.max + 1)
		for l := p.max; l >= 0; l-- {
			if has(int32(t), l) {
				nearest = int32(l)
			}
			if l <= p.min {
				row[l] = nearest
			}
		}
		p.next[t] = row
	}
	return nil
}

// classReps is one byte of each of d's classes.
func classReps(d *dfa) []byte {
	reps := make([]byte, d.classes)
	seen := make([]bool, d.classes)
	for c := 0; c < 256; c++ {
		if k := d.class[c]; !seen[k] {
			seen[k], reps[k] = true, byte(c)
		}
	}
	return reps
}
