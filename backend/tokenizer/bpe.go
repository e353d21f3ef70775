package tokenizer

import (
	"container/heap"
	"fmt"
	"unicode"
)

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
func (t *Tokenizer) encodeBPE(text string, out []int) []int {
	for _, word := range t.pretok([]rune(text)) {
		var mapped []rune
		for _, b := range []byte(string(word)) {
			mapped = append(mapped, byteToRune[b])
		}
		out = t.mergeWord(string(mapped), out)
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

// preTokenizer returns the word splitter named by tokenizer.ggml.pre. Each
// is a hand-written matcher for the regular expression in the comment, since
// Go's regexp has no lookahead.
func preTokenizer(name string) (func([]rune) [][]rune, error) {
	switch name {
	case "", "default", "gpt2", "gpt-2":
		// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
		return splitGPT2, nil
	case "llama3", "llama-bpe", "llama-v3", "smaug-bpe", "dbrx":
		// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
		return func(r []rune) [][]rune { return splitLlama3(r, 3) }, nil
	case "qwen2", "qwen35", "deepseek-r1-qwen":
		// same as llama3 with single digits: \p{N}
		return func(r []rune) [][]rune { return splitLlama3(r, 1) }, nil
	}
	return nil, fmt.Errorf("unsupported BPE pre-tokenizer %q (supported: gpt2, llama-bpe, qwen2)", name)
}

func isL(r rune) bool     { return unicode.IsLetter(r) }
func isN(r rune) bool     { return unicode.IsNumber(r) }
func isS(r rune) bool     { return unicode.IsSpace(r) }
func isOther(r rune) bool { return !isS(r) && !isL(r) && !isN(r) }
func isNL(r rune) bool    { return r == '\r' || r == '\n' }

func span(r []rune, i int, pred func(rune) bool) int {
	for i < len(r) && pred(r[i]) {
		i++
	}
	return i
}

// contraction matches 's 't 're 've 'm 'll 'd at i and returns its end, or i.
func contraction(r []rune, i int, fold bool) int {
	if r[i] != '\'' || i+1 >= len(r) {
		return i
	}
	low := func(c rune) rune {
		if fold {
			return unicode.ToLower(c)
		}
		return c
	}
	c := low(r[i+1])
	switch c {
	case 's', 't', 'm', 'd':
		return i + 2
	}
	if i+2 < len(r) {
		pair := string([]rune{c, low(r[i+2])})
		if pair == "re" || pair == "ve" || pair == "ll" {
			return i + 3
		}
	}
	return i
}

// whitespace applies \s+(?!\S)|\s+ at a whitespace rune i.
func whitespace(r []rune, i int) int {
	j := span(r, i, isS)
	if j < len(r) && j-1 > i {
		return j - 1 // leave the last space to lead the next word
	}
	return j
}

func splitGPT2(r []rune) [][]rune {
	var words [][]rune
	for i := 0; i < len(r); {
		j := contraction(r, i, false)
		if j == i {
			k := i
			if r[k] == ' ' && k+1 < len(r) {
				k++
			}
			switch {
			case isL(r[k]):
				j = span(r, k, isL)
			case isN(r[k]):
				j = span(r, k, isN)
			case isOther(r[k]):
				j = span(r, k, isOther)
			default:
				j = whitespace(r, i)
			}
		}
		words = append(words, r[i:j])
		i = j
	}
	return words
}

func splitLlama3(r []rune, maxDigits int) [][]rune {
	var words [][]rune
	for i := 0; i < len(r); {
		j := contraction(r, i, true)
		switch {
		case j > i:
		case isL(r[i]):
			j = span(r, i, isL)
		case !isNL(r[i]) && !isN(r[i]) && i+1 < len(r) && isL(r[i+1]):
			j = span(r, i+1, isL)
		case isN(r[i]):
			j = i
			for j < len(r) && j-i < maxDigits && isN(r[j]) {
				j++
			}
		case isOther(r[i]) || (r[i] == ' ' && i+1 < len(r) && isOther(r[i+1])):
			k := i
			if r[k] == ' ' {
				k++
			}
			j = span(r, span(r, k, isOther), isNL)
		default: // whitespace
			end := span(r, i, isS)
			lastNL := -1
			for k := i; k < end; k++ {
				if isNL(r[k]) {
					lastNL = k
				}
			}
			if lastNL >= 0 {
				j = lastNL + 1
			} else {
				j = whitespace(r, i)
			}
		}
		words = append(words, r[i:j])
		i = j
	}
	return words
}
