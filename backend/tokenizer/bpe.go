package tokenizer

import "container/heap"

// byteToRune is GPT-2's reversible map from bytes to printable runes.
var byteToRune, runeToByte = func() ([256]rune, map[rune]byte) {
	var fwd [256]rune
	back := map[rune]byte{}
	n := 0
	for b := 0; b < 256; b++ {
		if ('!' <= b && b <= '~') || (0xa1 <= b && b <= 0xac) || (0xae <= b && b <= 0xff) {
			fwd[b] = rune(b)
		} else {
			fwd[b] = rune(256 + n)
			n++
		}
		back[fwd[b]] = byte(b)
	}
	return fwd, back
}()

// encodeBPE splits text into pre-tokenizer words, maps each word's bytes to
// GPT-2 runes and applies the ranked merges.
func (t *Tokenizer) encodeBPE(text string, m *matcher, out []int) []int {
	var mapped []rune
	for _, word := range t.pre.split([]rune(text), m) {
		mapped = mapped[:0]
		for _, b := range []byte(string(word)) {
			mapped = append(mapped, byteToRune[b])
		}
		w := string(mapped)
		if id, ok := t.ids[w]; ok && t.pre.ignoreMerges {
			out = append(out, id)
			continue
		}
		out = t.mergeWord(w, out)
	}
	return out
}

func (t *Tokenizer) mergeWord(word string, out []int) []int {
	syms := splitChars(word)
	q := &bigramQueue{bpe: true}
	try := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		a := word[syms[l].start : syms[l].start+syms[l].n]
		b := word[syms[r].start : syms[r].start+syms[r].n]
		rank, ok := t.merges[[2]string{a, b}]
		if !ok {
			return
		}
		heap.Push(q, bigram{left: l, right: r, rank: rank, size: len(a) + len(b)})
	}
	for i := 1; i < len(syms); i++ {
		try(i-1, i)
	}
	for q.Len() > 0 {
		bg := heap.Pop(q).(bigram)
		l, r := &syms[bg.left], &syms[bg.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != bg.size || l.next != bg.right {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = bg.left
		}
		try(l.prev, bg.left)
		try(bg.left, l.next)
	}
	for i := 0; i >= 0 && i < len(syms); i = syms[i].next {
		s := word[syms[i].start : syms[i].start+syms[i].n]
		if id, ok := t.ids[s]; ok {
			out = append(out, id)
			continue
		}
		for _, r := range s {
			if id, ok := t.ids[string(r)]; ok {
				out = append(out, id)
			}
		}
	}
	return out
}
