package tokenizer

import "fmt"

// The compiled form of a regex (regex.go) and the backtracking matcher
// that runs it.

type opcode uint8

const (
	opClass opcode = iota // one rune of cls
	opSpan                // greedy run of cls, min..max long (max -1: unbounded; min ≤ 1 then)
	opSplit               // try x, then y
	opJmp                 // go to x
	opBegin               // ^
	opEnd                 // $
	opLook                // (?=cls), or (?!cls) when neg
	opMatch
)

type inst struct {
	op       opcode
	neg      bool
	cls      *class
	x, y     int // jump targets
	min, max int // opSpan's bounds
}

// prog is a compiled regex.
type prog struct {
	src  string
	inst []inst
}

func compileRegex(src string) (*prog, error) {
	n, err := parseRegex(src)
	if err != nil {
		return nil, err
	}
	if n.nullable() {
		return nil, fmt.Errorf("regex %q matches the empty string", src)
	}
	p := &prog{src: src}
	p.emit(n)
	p.inst = append(p.inst, inst{op: opMatch})
	return p, nil
}

func (p *prog) add(i inst) int {
	p.inst = append(p.inst, i)
	return len(p.inst) - 1
}

func (p *prog) emit(n *node) {
	switch n.op {
	case nClass:
		p.add(inst{op: opClass, cls: n.cls})
	case nBegin:
		p.add(inst{op: opBegin})
	case nEnd:
		p.add(inst{op: opEnd})
	case nLook:
		p.add(inst{op: opLook, cls: n.cls, neg: n.neg})
	case nCat:
		for _, s := range n.subs {
			p.emit(s)
		}
	case nAlt:
		var exits []int
		for i, s := range n.subs {
			if i == len(n.subs)-1 {
				p.emit(s)
				break
			}
			split := p.add(inst{op: opSplit})
			p.inst[split].x = split + 1
			p.emit(s)
			exits = append(exits, p.add(inst{op: opJmp}))
			p.inst[split].y = len(p.inst)
		}
		for _, j := range exits {
			p.inst[j].x = len(p.inst)
		}
	case nRepeat:
		p.repeat(n.subs[0], n.min, n.max)
	}
}

func (p *prog) repeat(sub *node, lo, hi int) {
	if sub.op == nClass {
		// A run of one class is one instruction: the matcher scans it and
		// backtracks over its length without a thread per rune.
		if hi < 0 {
			for ; lo > 1; lo-- {
				p.emit(sub)
			}
		}
		p.add(inst{op: opSpan, cls: sub.cls, min: lo, max: hi})
		return
	}
	for range lo {
		p.emit(sub)
	}
	if hi < 0 { // L: split body, out; body; jmp L
		split := p.add(inst{op: opSplit})
		p.inst[split].x = split + 1
		p.emit(sub)
		p.add(inst{op: opJmp, x: split})
		p.inst[split].y = len(p.inst)
		return
	}
	var splits []int // up to hi-lo optional copies, each inside the last
	for range hi - lo {
		split := p.add(inst{op: opSplit})
		p.inst[split].x = split + 1
		splits = append(splits, split)
		p.emit(sub)
	}
	for _, s := range splits {
		p.inst[s].y = len(p.inst)
	}
}

// matcher runs progs over one text at a time. Plain backtracking is linear
// on pre-tokenizer regexes and ordinary text, but some inputs make it
// quadratic (\s+$ retried at every space of a long run); once a text costs
// more steps than the memoized bound, the matcher switches to remembering
// every (instruction, position) it has left without a match, which a later
// visit can skip: a state's outcome depends on nothing else. That bounds a
// whole text's work by about 2 × instructions × runes, and the memory, a
// bit per state, is spent only on such texts.
type matcher struct {
	stack []thread
	memo  []uint64 // nil until the text needs it
	steps int      // work on the current text
	limit int      // steps before memoizing
	total int      // steps over all texts, for tests
}

// thread is a backtracking entry: resume at pc, pos. A span's entry (lo ≥ 0)
// stands for the shorter runs still to try, ending at pos-1 down to lo.
type thread struct {
	pc, pos, lo int
}

// split cuts text into the matches of p and the runs between them, and
// appends both, in order, to out. Matches never are empty.
func (m *matcher) split(p *prog, text []rune, out [][]rune) [][]rune {
	m.total += m.steps
	m.steps, m.memo = 0, m.memo[:0]
	m.limit = 2*len(p.inst)*(len(text)+1) + 256
	gap := 0
	for pos := 0; pos < len(text); {
		end := m.matchAt(p, text, pos)
		if end < 0 {
			pos++
			continue
		}
		if gap < pos {
			out = append(out, text[gap:pos])
		}
		out = append(out, text[pos:end])
		pos, gap = end, end
	}
	if gap < len(text) {
		out = append(out, text[gap:])
	}
	m.total += m.steps
	m.steps = 0
	return out
}

// seen marks state (pc, pos) in memo mode and reports whether it was
// already marked. States of a span's loop (loop true) have their own bits.
func (m *matcher) seen(p *prog, n, pc, pos int, loop bool) bool {
	i := pc*(n+1) + pos
	if loop {
		i += len(p.inst) * (n + 1)
	}
	w, b := i>>6, uint64(1)<<(i&63)
	if m.memo[w]&b != 0 {
		return true
	}
	m.memo[w] |= b
	return false
}

func (m *matcher) startMemo(p *prog, n int) {
	words := (2*len(p.inst)*(n+1) + 63) / 64
	if cap(m.memo) >= words {
		m.memo = m.memo[:words]
		clear(m.memo)
	} else {
		m.memo = make([]uint64, words)
	}
}

// matchAt returns the end of the leftmost-first non-empty match of p at
// start, or -1.
func (m *matcher) matchAt(p *prog, text []rune, start int) int {
	n := len(text)
	memo := len(m.memo) > 0
	m.stack = m.stack[:0]
	pc, pos := 0, start
	for {
		m.steps++
		if !memo && m.steps > m.limit {
			m.startMemo(p, n)
			memo = true
			m.stack = m.stack[:0]
			pc, pos = 0, start
		}
		if memo && m.seen(p, n, pc, pos, false) {
			goto fail
		}
		switch in := &p.inst[pc]; in.op {
		case opClass:
			if pos < n && in.cls.has(text[pos]) {
				pc, pos = pc+1, pos+1
				continue
			}
		case opSpan:
			if memo && in.max < 0 {
				// One state per rune, so the memo bounds the work.
				if in.min == 1 {
					if pos >= n || !in.cls.has(text[pos]) {
						goto fail
					}
					pos++
				}
				for {
					m.steps++
					if m.seen(p, n, pc, pos, true) {
						goto fail
					}
					if pos >= n || !in.cls.has(text[pos]) {
						break
					}
					m.stack = append(m.stack, thread{pc + 1, pos, -1})
					pos++
				}
				pc++
				continue
			}
			end, lim := pos, n
			if in.max >= 0 {
				lim = min(n, pos+in.max)
			}
			for end < lim && in.cls.has(text[end]) {
				end++
			}
			m.steps += end - pos
			if end-pos < in.min {
				break
			}
			if end > pos+in.min {
				m.stack = append(m.stack, thread{pc + 1, end, pos + in.min})
			}
			pc, pos = pc+1, end
			continue
		case opSplit:
			m.stack = append(m.stack, thread{in.y, pos, -1})
			pc = in.x
			continue
		case opJmp:
			pc = in.x
			continue
		case opBegin:
			if pos == 0 {
				pc++
				continue
			}
		case opEnd:
			if pos == n {
				pc++
				continue
			}
		case opLook:
			if (pos < n && in.cls.has(text[pos])) != in.neg {
				pc++
				continue
			}
		case opMatch:
			if pos > start {
				return pos
			}
		}
	fail:
		if len(m.stack) == 0 {
			return -1
		}
		t := &m.stack[len(m.stack)-1]
		if t.lo < 0 {
			pc, pos = t.pc, t.pos
			m.stack = m.stack[:len(m.stack)-1]
			continue
		}
		t.pos-- // a span gives back one rune
		pc, pos = t.pc, t.pos
		if t.pos <= t.lo {
			m.stack = m.stack[:len(m.stack)-1]
		}
	}
}
