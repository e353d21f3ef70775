package engine

import (
	"fmt"
	"math"
)

// Prompt log-probabilities (Request.PromptLogprobs), as evaluation
// harnesses score a text: the log-probability of each prompt token given
// the tokens before it. The prefill computes every prompt position anyway;
// such a request also asks the model for the logits rows of its chunk's
// positions (model.Batch.Logits), and apply reads each row at the next
// prompt token. A request that does not ask gets no extra row.
//
// NOTE: a row needs its position computed, which a prefix-cache hit skips,
// so such a request takes nothing from the cache: Submit gives it a cache
// namespace of its own (its salt). Every position is computed the first
// time; after a preemption it may take back only its own blocks, whose
// positions' log-probabilities it already has.

// PromptLogprob is one prompt token's log-probability given the tokens
// before it, its rank in the vocabulary there (1: the most likely) and the
// most likely tokens there (Request.PromptTop of them).
type PromptLogprob struct {
	Logprob float32
	Rank    int
	Top     []TokenProb
}

// promptRowBytes bounds the logits one request's prompt rows take in a
// step: its prefill chunks are cut to fit (at least a block), so a long
// prompt over a large vocabulary is scored in pieces, not in one buffer
// of gigabytes.
const promptRowBytes = 128 << 20

// promptChunk is the most prompt tokens a chunk of a request that wants
// its prompt's log-probabilities may take.
func (e *Engine) promptChunk() int {
	return max(e.opt.BlockSize, promptRowBytes/(4*e.m.Vocab))
}

// wantsPromptRows: s asks for its prompt's log-probabilities and has not
// had them yet.
func (s *seq) wantsPromptRows() bool { return s.prompt != nil && !s.promptSent }

// promptSalt is a request's cache namespace when it wants its prompt's
// log-probabilities (see the note above).
func promptSalt(salt string, id int64) string {
	return fmt.Sprintf("%s\x00prompt-logprobs %d", salt, id)
}

// promptRows asks for the logits rows of the positions of s's chunk (the
// plan's last entry, n tokens from s.computed) that predict a prompt
// token: every position before the prompt's last.
func (p *plan) promptRows(s *seq, n int) {
	en := p.entries[len(p.entries)-1]
	end := min(s.computed+n, len(s.req.Prompt)-1)
	if end <= s.computed {
		return
	}
	en.promptRow, en.promptFrom, en.promptN = len(p.batch.Logits), s.computed, end-s.computed
	for pos := s.computed; pos < end; pos++ {
		p.batch.Logits = append(p.batch.Logits, en.start+pos-s.computed)
	}
}

// promptLogprobs reads an entry's prompt rows: row j, at position
// promptFrom+j, scores prompt token promptFrom+j+1.
func (e *Engine) promptLogprobs(en *entry, logits []float32) {
	s, vocab := en.s, e.m.Vocab
	for j := range en.promptN {
		row := logits[(en.promptRow+j)*vocab : (en.promptRow+j+1)*vocab]
		at := en.promptFrom + j + 1
		s.prompt[at] = scoreRow(row, s.req.Prompt[at], s.req.PromptTop)
	}
}

// scoreRow is tok's log-probability and rank under row's logits, with the
// top most likely tokens (highest first, ties by id), in three passes and
// no allocation beyond the top list.
func scoreRow(row []float32, tok, top int) PromptLogprob {
	m := row[0]
	for _, l := range row {
		m = max(m, l)
	}
	var sum float64
	for _, l := range row {
		sum += math.Exp(float64(l - m))
	}
	lse := float64(m) + math.Log(sum)
	out := PromptLogprob{Logprob: float32(float64(row[tok]) - lse), Rank: 1}
	best := make([]TokenProb, 0, top)
	for i, l := range row {
		if l > row[tok] {
			out.Rank++
		}
		if top == 0 || (len(best) == top && l <= best[top-1].Logprob) {
			continue
		}
		// Insert in order; best holds raw logits until the end.
		k := len(best)
		if k < top {
			best = append(best, TokenProb{})
		} else {
			k--
		}
		for k > 0 && best[k-1].Logprob < l {
			best[k] = best[k-1]
			k--
		}
		best[k] = TokenProb{Token: i, Logprob: l}
	}
	for i := range best {
		best[i].Logprob = float32(float64(best[i].Logprob) - lse)
	}
	out.Top = best
	return out
}
