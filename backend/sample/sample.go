// Package sample picks the next token from logits: logit bias and
// penalties, then greedy, or top-k → top-p → min-p → temperature → a draw
// from a seeded RNG, in llama.cpp's order.
package sample

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Params are the sampling settings of one request.
type Params struct {
	Temperature   float32 // ≤ 0: greedy
	TopK          int     // ≤ 0: off
	TopP          float32 // ≥ 1 or ≤ 0: off
	MinP          float32 // ≤ 0: off
	RepeatPenalty float32 // 1 or 0: off
	RepeatLastN   int     // window of recent tokens the penalty looks at (default 64)
	// PresencePenalty is subtracted once from the logit of every token the
	// response has already produced, FrequencyPenalty once per occurrence
	// (OpenAI's definitions; like vLLM, only output tokens count).
	PresencePenalty  float32
	FrequencyPenalty float32
	// LogitBias is added to the named tokens' logits before anything else.
	LogitBias map[int]float32
	Seed      uint64
}

// Greedy reports whether these params always take the arg-max.
func (p Params) Greedy() bool { return p.Temperature <= 0 || p.TopK == 1 }

// Sampler holds one request's RNG.
type Sampler struct {
	P   Params
	rng *rand.Rand
	buf []cand
}

type cand struct {
	id int
	l  float32
}

// New makes a sampler; the same params and seed give the same draws.
func New(p Params) *Sampler {
	return &Sampler{P: p, rng: rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15))}
}

// Argmax is the lowest id of the largest logit.
func Argmax(logits []float32) int {
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	return best
}

// Sample picks a token. history is the sequence so far, prompt then output;
// output is its suffix that this response produced. The repetition penalty
// looks at the last RepeatLastN tokens of history, the presence and frequency
// penalties at output. logits may be modified.
func (s *Sampler) Sample(logits []float32, history, output []int) int {
	p := s.P
	for id, b := range p.LogitBias {
		if id >= 0 && id < len(logits) {
			logits[id] += b
		}
	}
	if p.PresencePenalty != 0 || p.FrequencyPenalty != 0 {
		counts := map[int]int{}
		for _, id := range output {
			if id >= 0 && id < len(logits) {
				counts[id]++
			}
		}
		for id, n := range counts {
			logits[id] -= p.PresencePenalty + p.FrequencyPenalty*float32(n)
		}
	}
	if p.RepeatPenalty > 0 && p.RepeatPenalty != 1 {
		window := p.RepeatLastN
		if window <= 0 {
			window = 64
		}
		seen := map[int]bool{}
		for _, id := range history[max(0, len(history)-window):] {
			if seen[id] || id < 0 || id >= len(logits) {
				continue
			}
			seen[id] = true
			if logits[id] > 0 {
				logits[id] /= p.RepeatPenalty
			} else {
				logits[id] *= p.RepeatPenalty
			}
		}
	}
	if p.Greedy() {
		return Argmax(logits)
	}
	c := s.buf[:0]
	for i, l := range logits {
		c = append(c, cand{i, l})
	}
	slices.SortStableFunc(c, func(a, b cand) int {
		switch {
		case a.l > b.l:
			return -1
		case a.l < b.l:
			return 1
		}
		return 0
	})
	if p.TopK > 0 && p.TopK < len(c) {
		c = c[:p.TopK]
	}
	probs := softmax(c, 1)
	if p.TopP > 0 && p.TopP < 1 {
		var cum float64
		for i, pr := range probs {
			cum += pr
			if cum >= float64(p.TopP) {
				c, probs = c[:i+1], probs[:i+1]
				break
			}
		}
	}
	if p.MinP > 0 {
		limit := probs[0] * float64(p.MinP)
		keep := 1
		for keep < len(probs) && probs[keep] >= limit {
			keep++
		}
		c = c[:keep]
	}
	probs = softmax(c, p.Temperature)
	s.buf = c
	r := s.rng.Float64()
	var cum float64
	for i, pr := range probs {
		cum += pr
		if r < cum {
			return c[i].id
		}
	}
	return c[len(c)-1].id
}

func softmax(c []cand, temp float32) []float64 {
	out := make([]float64, len(c))
	var sum float64
	for i, x := range c {
		out[i] = math.Exp(float64(x.l-c[0].l) / float64(temp))
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// LogSoftmax returns log-probabilities of logits.
func LogSoftmax(logits []float32) []float64 {
	m := logits[Argmax(logits)]
	var sum float64
	for _, l := range logits {
		sum += math.Exp(float64(l - m))
	}
	out := make([]float64, len(logits))
	lse := float64(m) + math.Log(sum)
	for i, l := range logits {
		out[i] = float64(l) - lse
	}
	return out
}
