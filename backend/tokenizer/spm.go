package tokenizer

import (
	"container/heap"
	"unicode/utf8"
)

type symbol struct {
	start, n   int // byte range in the text
	prev, next int
}

type bigram struct {
	left, right int
	score       float32
	rank        int // BPE merge rank; lower merges first
	size        int
}

// bigramQueue pops the best pair: highest score (SPM) or lowest rank (BPE),
// ties to the leftmost.
type bigramQueue struct {
	items []bigram
	bpe   bool
}

func (q *bigramQueue) Len() int { return len(q.items) }
func (q *bigramQueue) Less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	if q.bpe {
		if a.rank != b.rank {
			return a.rank < b.rank
		}
	} else if a.score != b.score {
		return a.score > b.score
	}
	return a.left < b.left
}
func (q *bigramQueue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *bigramQueue) Push(x any)    { q.items = append(q.items, x.(bigram)) }
func (q *bigramQueue) Pop() any {
	x := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return x
}

// splitChars makes one symbol per UTF-8 character (invalid bytes alone).
func splitChars(text string) []symbol {
	syms := make([]symbol, 0, len(text))
	for off := 0; off < len(text); {
		_, n := utf8.DecodeRuneInString(text[off:])
		syms = append(syms, symbol{start: off, n: n, prev: len(syms) - 1, next: len(syms) + 1})
		off += n
	}
	if len(syms) > 0 {
		syms[len(syms)-1].next = -1
	}
	return syms
}

// encodeSPM merges the highest-scoring adjacent pair whose concatenation is
// a token until none is left, then falls back to byte tokens for pieces
// that are not in the vocabulary.
func (t *Tokenizer) encodeSPM(text string, out []int) []int {
	syms := splitChars(text)
	q := &bigramQueue{}
	revMerge := map[string][2]int{}
	try := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		s := text[syms[l].start : syms[r].start+syms[r].n]
		id, ok := t.ids[s]
		if !ok {
			return
		}
		heap.Push(q, bigram{left: l, right: r, score: t.Scores[id], size: len(s)})
		revMerge[s] = [2]int{l, r}
	}
	for i := 1; i < len(syms); i++ {
		try(i-1, i)
	}
	for q.Len() > 0 {
		bg := heap.Pop(q).(bigram)
		l, r := &syms[bg.left], &syms[bg.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != bg.size {
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
	var resegment func(i int)
	resegment = func(i int) {
		s := text[syms[i].start : syms[i].start+syms[i].n]
		if id, ok := t.ids[s]; ok {
			out = append(out, id)
			return
		}
		if p, ok := revMerge[s]; ok {
			resegment(p[0])
			resegment(p[1])
			return
		}
		for j := 0; j < len(s); j++ {
			if id := t.byteIDs[s[j]]; id >= 0 {
				out = append(out, id)
			} else if t.UNK >= 0 {
				out = append(out, t.UNK)
			}
		}
	}
	for i := 0; i >= 0 && i < len(syms); i = syms[i].next {
		resegment(i)
	}
	return out
}
