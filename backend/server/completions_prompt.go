package server

import (
	"bytes"
	"encoding/json"
	"strconv"

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

// completionPrompt reads prompt: a string, an array of token ids, or an
// array holding one of those (lm-evaluation-harness sends [[ids]]).
func (s *Server) completionPrompt(raw json.RawMessage) (textPrompt, error) {
	tok := s.e.Model().Tok
	var text string
	var ids []int
	if json.Unmarshal(raw, &text) == nil {
		if err := s.fits("prompt", text); err != nil {
			return textPrompt{}, err
		}
		return textPrompt{text: text, ids: tok.Encode(text, true, true)}, nil
	}
	if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
		return textPrompt{text: tok.Decode(ids, false), ids: ids}, nil
	}
	// A batch: an array of strings or of arrays (of ids, one level down).
	var many []json.RawMessage
	first := func() []byte { return bytes.TrimSpace(many[0]) }
	if json.Unmarshal(raw, &many) == nil && len(many) > 0 && (bytes.HasPrefix(first(), []byte(`"`)) ||
		bytes.HasPrefix(first(), []byte("[")) && !bytes.HasPrefix(first(), []byte("[["))) {
		if len(many) > 1 {
			return textPrompt{}, badRequest("prompt", "one prompt per request, got %d (lm-evaluation-harness: batch_size=1, its default)", len(many))
		}
		var one []int
		if json.Unmarshal(many[0], &text) == nil || (json.Unmarshal(many[0], &one) == nil && len(one) > 0) {
			return s.completionPrompt(many[0])
		}
	}
	return textPrompt{}, badRequest("prompt", "prompt must be a string, an array of token ids, or an array of one of those")
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
