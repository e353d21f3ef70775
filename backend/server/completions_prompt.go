package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"

	"github.com/labstack/echo/v4"

	"jspark/backend/engine"
)

// enginePrompt is one prompt token's log-probability as the engine gives it.
type enginePrompt = engine.PromptLogprob

// textPrompt is a completions prompt: its token ids and its text (as the
// client gave it, or its ids' text).
type textPrompt struct {
	text string
	ids  []int
}

// maxPrompts bounds a completions batch: each prompt is a request of its
// own in the engine, all submitted at once.
const maxPrompts = 64

// completionPrompts reads prompt: a string, an array of token ids, or an
// array of those (lm-evaluation-harness sends [[ids], …], batch_size of
// them), at most maxPrompts.
func (s *Server) completionPrompts(raw json.RawMessage) ([]textPrompt, error) {
	if p, ok, err := s.onePrompt(raw); ok || err != nil {
		return []textPrompt{p}, err
	}
	var many []json.RawMessage
	if json.Unmarshal(raw, &many) == nil && len(many) > 0 {
		if len(many) > maxPrompts {
			return nil, badRequest("prompt", "at most %d prompts per request, got %d", maxPrompts, len(many))
		}
		out := make([]textPrompt, len(many))
		for i, m := range many {
			p, ok, err := s.onePrompt(m)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, badRequest("prompt", "prompt[%d] must be a string or an array of token ids", i)
			}
			out[i] = p
		}
		return out, nil
	}
	return nil, badRequest("prompt", "prompt must be a string, an array of token ids, or an array of those")
}

// onePrompt reads a string or a non-empty array of token ids; ok is false
// when raw is neither.
func (s *Server) onePrompt(raw json.RawMessage) (textPrompt, bool, error) {
	tok := s.e.Model().Tok
	var text string
	if json.Unmarshal(raw, &text) == nil {
		if err := s.fits("prompt", text); err != nil {
			return textPrompt{}, true, err
		}
		return textPrompt{text: text, ids: tok.Encode(text, true, true)}, true, nil
	}
	var ids []int
	if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
		return textPrompt{text: tok.Decode(ids, false), ids: ids}, true, nil
	}
	return textPrompt{}, false, nil
}

// wholeBatch answers every prompt at once (the engine batches them) in
// one response: the choices in the prompts' order, the usage summed (a
// batch's has no jspark details: they are each request's). The first
// error fails the request and stops the other prompts.
func (s *Server) wholeBatch(c echo.Context, j job, ccs []*completion) error {
	ctx, cancel := context.WithCancel(c.Request().Context())
	defer cancel()
	choices := make([]completionChoice, len(ccs))
	usages := make([]*Usage, len(ccs))
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for i, cc := range ccs {
		wg.Go(func() {
			var err error
			if choices[i], usages[i], err = cc.answer(ctx, j); err != nil {
				mu.Lock()
				if first == nil {
					first = err
					cancel()
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	u := usages[0]
	if len(ccs) > 1 {
		u = &Usage{}
		for _, x := range usages {
			u.PromptTokens += x.PromptTokens
			u.CompletionTokens += x.CompletionTokens
			u.TotalTokens += x.TotalTokens
			u.PromptTokensDetails.CachedTokens += x.PromptTokensDetails.CachedTokens
		}
	}
	return c.JSON(http.StatusOK, completionResponse{ID: ccs[0].id, Object: "text_completion", Created: ccs[0].created, Model: s.opt.ServedName,
		Choices: choices, Usage: u})
}

// askPrompt sets what of the prompt's log-probabilities r asks the engine
// for: echo with logprobs (the legacy shape) or prompt_logprobs (vLLM's),
// with the larger number of alternatives the two name.
func (j *job) askPrompt(r *CompletionRequest) error {
	if n := r.PromptLogprobs; n != nil {
		switch {
		case *n < 0 || *n > 20:
			return badRequest("prompt_logprobs", "prompt_logprobs must be in 0..20, got %d", *n)
		case r.Stream:
			return badRequest("prompt_logprobs", "prompt_logprobs is not available with stream (as vLLM); use echo with logprobs to stream them")
		}
		j.req.PromptLogprobs, j.req.PromptTop = true, *n
	}
	if r.Echo && r.Logprobs != nil {
		j.req.PromptLogprobs = true
		j.req.PromptTop = max(j.req.PromptTop, j.req.TopLogprobs)
	}
	return nil
}

// addPrompt puts the prompt's tokens first in the legacy lists: the
// first's log-probability and alternatives null, each token's offset where
// its text starts in the echo (special tokens, which the echo does not
// spell, take no room).
func (cc *completion) addPrompt(l *completionLogprobs, pl []enginePrompt) {
	tok := cc.s.e.Model().Tok
	n := max(1, *cc.r.Logprobs)
	off := 0
	for i, id := range cc.p.ids {
		l.Tokens = append(l.Tokens, string(tok.AppendPiece(nil, id, true)))
		l.TextOffset = append(l.TextOffset, off)
		off += len(tok.AppendPiece(nil, id, false))
		if i == 0 || i >= len(pl) {
			l.TokenLogprobs, l.TopLogprobs = append(l.TokenLogprobs, nil), append(l.TopLogprobs, nil)
			continue
		}
		lp := pl[i].Logprob
		l.TokenLogprobs = append(l.TokenLogprobs, &lp)
		top := map[string]float32{}
		for _, t := range pl[i].Top[:min(n, len(pl[i].Top))] {
			top[string(tok.AppendPiece(nil, t.Token, true))] = t.Logprob
		}
		l.TopLogprobs = append(l.TopLogprobs, top)
	}
}

// vllmLogprob is one entry of vLLM's prompt_logprobs.
type vllmLogprob struct {
	Logprob      float32 `json:"logprob"`
	Rank         int     `json:"rank"`
	DecodedToken string  `json:"decoded_token"`
}

// vllmPrompt is vLLM's prompt_logprobs: per prompt token (the first null),
// the token's own entry and its top alternatives (ranks 1, 2, …), keyed by
// token id.
func (cc *completion) vllmPrompt(pl []enginePrompt) []map[string]vllmLogprob {
	tok := cc.s.e.Model().Tok
	out := make([]map[string]vllmLogprob, len(cc.p.ids))
	for i := 1; i < len(cc.p.ids) && i < len(pl); i++ {
		id := cc.p.ids[i]
		m := map[string]vllmLogprob{strconv.Itoa(id): {Logprob: pl[i].Logprob, Rank: pl[i].Rank, DecodedToken: string(tok.AppendPiece(nil, id, true))}}
		for r, t := range pl[i].Top[:min(*cc.r.PromptLogprobs, len(pl[i].Top))] {
			m[strconv.Itoa(t.Token)] = vllmLogprob{Logprob: t.Logprob, Rank: r + 1, DecodedToken: string(tok.AppendPiece(nil, t.Token, true))}
		}
		out[i] = m
	}
	return out
}
