package tokenizer

import (
	"slices"
	"strings"
)

// longPiece is how long a token's text may be before MinTokens looks for
// it in the text: real vocabularies' longest are runs of spaces or
// dashes, well under it.
const longPiece = 256

// maxLongScan bounds the long tokens MinTokens looks for; a vocabulary with
// more of them is bounded by its longest (the old, voidable bound).
const maxLongScan = 64

// lengths are what MinTokens needs of the vocabulary, computed once.
type lengths struct {
	short int      // the longest text of a token no longer than longPiece
	long  []string // texts of the longer tokens, longest first
	max   int      // the longest text of all
}

func (t *Tokenizer) pieceLengths() *lengths {
	t.lengthsOnce.Do(func() {
		l := &lengths{short: 1}
		for id := range t.Tokens {
			p := string(t.AppendPiece(nil, id, true))
			n := max(len(p), len(t.Tokens[id]))
			l.max = max(l.max, n)
			if n <= longPiece {
				l.short = max(l.short, n)
			} else {
				l.long = append(l.long, p)
			}
		}
		slices.SortFunc(l.long, func(a, b string) int { return len(b) - len(a) })
		t.lengths = l
	})
	return t.lengths
}

// MinTokens is a lower bound on the number of tokens Encode makes of text,
// computed without tokenizing: no token spans more than the longest text
// of a token that can appear in it. A token whose text is long (over
// longPiece bytes) counts only where the text holds it, so one huge
// vocabulary entry does not void the bound (a 32 MiB token would admit a
// 30 MB prompt to a full tokenization). It costs one scan of text per long
// token, at most maxLongScan of them.
func (t *Tokenizer) MinTokens(text string) int {
	l := t.pieceLengths()
	span := l.short
	if len(l.long) > maxLongScan {
		span = l.max
	} else {
		for _, p := range l.long {
			// SentencePiece's added leading space is not in the text.
			if strings.Contains(text, strings.TrimPrefix(p, " ")) {
				span = len(p)
				break
			}
		}
	}
	return len(text) / span
}
