package server

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"

	"jspark/backend/engine"
	"jspark/backend/sample"
)

// generation holds the fields that chat and text completions share, as the
// request gave them, so that both APIs check them in one place.
type generation struct {
	model     string
	n         *int
	maxTokens *int   // nil: the API's own default
	maxParam  string // the field maxTokens came in
	sampling  Sampling
	stop      json.RawMessage
	// logprobs is the number of alternatives per token (0..20); nil: no
	// log-probabilities.
	logprobs      *int
	logprobsParam string
}

// check validates g against OpenAI's rules and the model served, and turns
// it into a job without a prompt (MaxTokens 0 when g names no limit).
func (s *Server) check(g generation) (job, error) {
	if err := s.checkModel(g.model); err != nil {
		return job{}, err
	}
	if g.n != nil && *g.n != 1 {
		return job{}, badRequest("n", "n must be 1 (got %d)", *g.n)
	}
	if g.maxTokens != nil {
		if err := s.maxTokens(g.maxParam, *g.maxTokens); err != nil {
			return job{}, err
		}
	}
	params, err := g.sampling.params(s.e.Model().Tok.VocabSize(), s.seed)
	if err != nil {
		return job{}, err
	}
	stops, err := parseStop(g.stop)
	if err != nil {
		return job{}, err
	}
	j := job{stops: stops, req: engine.Request{Sampling: params, IgnoreEOS: g.sampling.IgnoreEOS}}
	if g.maxTokens != nil {
		j.req.MaxTokens = *g.maxTokens
	}
	if g.logprobs != nil {
		if n := *g.logprobs; n < 0 || n > 20 {
			return job{}, badRequest(g.logprobsParam, "%s must be in 0..20, got %d", g.logprobsParam, n)
		}
		j.req.TopLogprobs = max(1, *g.logprobs)
	}
	return j, nil
}

// params checks the sampling fields against OpenAI's and vLLM's ranges;
// vocab bounds the token ids of logit_bias, and seed gives the seed of a
// request that names none.
func (p Sampling) params(vocab int, seed func() uint64) (sample.Params, error) {
	out := sample.Params{Temperature: 1, TopP: 1, RepeatPenalty: 1}
	type field struct {
		name   string
		v      *float32
		lo, hi float32
		open   bool // lo itself is excluded
		dst    *float32
	}
	for _, f := range []field{
		{"temperature", p.Temperature, 0, 2, false, &out.Temperature},
		{"top_p", p.TopP, 0, 1, true, &out.TopP},
		{"min_p", p.MinP, 0, 1, false, &out.MinP},
		{"presence_penalty", p.PresencePenalty, -2, 2, false, &out.PresencePenalty},
		{"frequency_penalty", p.FrequencyPenalty, -2, 2, false, &out.FrequencyPenalty},
	} {
		if f.v == nil {
			continue
		}
		if x := *f.v; x < f.lo || x > f.hi || (f.open && x == f.lo) {
			l := "["
			if f.open {
				l = "("
			}
			return out, badRequest(f.name, "%s %g is outside %s%g, %g]", f.name, x, l, f.lo, f.hi)
		}
		*f.dst = *f.v
	}
	if p.RepetitionPenalty != nil {
		if x := *p.RepetitionPenalty; !(x > 0) {
			return out, badRequest("repetition_penalty", "repetition_penalty %g must be positive (1 is off)", x)
		}
		out.RepeatPenalty = *p.RepetitionPenalty
	}
	if p.TopK != nil {
		if *p.TopK < -1 {
			return out, badRequest("top_k", "top_k %d must be -1 or 0 (off) or positive", *p.TopK)
		}
		out.TopK = *p.TopK
	}
	if p.Seed != nil {
		out.Seed = *p.Seed
	} else {
		out.Seed = seed()
	}
	if len(p.LogitBias) > 0 {
		out.LogitBias = make(map[int]float32, len(p.LogitBias))
		for k, b := range p.LogitBias {
			id, err := strconv.Atoi(k)
			if err != nil || id < 0 || id >= vocab {
				return out, badRequest("logit_bias", "logit_bias key %q is not a token id in [0, %d)", k, vocab)
			}
			if b < -100 || b > 100 {
				return out, badRequest("logit_bias", "logit_bias[%q] = %g is outside [-100, 100]", k, b)
			}
			out.LogitBias[id] = b
		}
	}
	return out, nil
}

func parseStop(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var many []string
	var one string
	if json.Unmarshal(raw, &one) == nil {
		many = []string{one}
	} else if err := json.Unmarshal(raw, &many); err != nil {
		return nil, badRequest("stop", "stop must be a string or an array of strings")
	}
	if len(many) > 4 {
		return nil, badRequest("stop", "at most 4 stop sequences, got %d", len(many))
	}
	// An empty string would match before every token: it stops nothing.
	return slices.DeleteFunc(many, func(s string) bool { return s == "" }), nil
}
