package server

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"jspark/backend/engine"
)

// CompletionRequest is the body of POST /v1/completions.
type CompletionRequest struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	MaxTokens     *int            `json:"max_tokens"`
	Stream        bool            `json:"stream"`
	StreamOptions *StreamOptions  `json:"stream_options"`
	Sampling
	Stop      json.RawMessage `json:"stop"`
	N         *int            `json:"n"`
	CacheSalt string          `json:"cache_salt"`
}

type completionChoice struct {
	Text         string  `json:"text"`
	Index        int     `json:"index"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

type completionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *Usage             `json:"usage,omitempty"`
}

func (s *Server) completions(c echo.Context) error {
	var r CompletionRequest
	if err := decode(c, &r); err != nil {
		return err
	}
	if err := s.checkModel(r.Model); err != nil {
		return err
	}
	if r.N != nil && *r.N != 1 {
		return badRequest("n", "n must be 1 (got %d)", *r.N)
	}
	tok := s.e.Model().Tok
	var prompt []int
	var text string
	var ids []int
	switch {
	case json.Unmarshal(r.Prompt, &text) == nil:
		prompt = tok.Encode(text, true, true)
	case json.Unmarshal(r.Prompt, &ids) == nil && len(ids) > 0:
		prompt = ids
	default:
		return badRequest("prompt", "prompt must be a string or an array of token ids")
	}
	params, err := r.Sampling.params(tok.VocabSize())
	if err != nil {
		return err
	}
	stops, err := parseStop(r.Stop)
	if err != nil {
		return err
	}
	maxTok := 16
	if r.MaxTokens != nil {
		if *r.MaxTokens <= 0 {
			return badRequest("max_tokens", "max_tokens must be positive, got %d", *r.MaxTokens)
		}
		maxTok = *r.MaxTokens
	}
	j := job{stops: stops, req: engine.Request{Prompt: prompt, MaxTokens: maxTok, Sampling: params, IgnoreEOS: r.IgnoreEOS, CacheSalt: r.CacheSalt}}
	id, created := newID("cmpl-"), now()
	if !r.Stream {
		var out string
		res, err := s.run(c.Request().Context(), j, func(o output) error { out += o.delta.Content; return nil })
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, completionResponse{ID: id, Object: "text_completion", Created: created, Model: s.opt.ServedName,
			Choices: []completionChoice{{Text: out, FinishReason: &res.finish}}, Usage: usageOf(res.usage)})
	}
	sse := newSSE(c)
	send := func(ch []completionChoice, u *Usage) error {
		return sse.send(completionResponse{ID: id, Object: "text_completion", Created: created, Model: s.opt.ServedName, Choices: ch, Usage: u})
	}
	res, err := s.run(c.Request().Context(), j, func(o output) error {
		return send([]completionChoice{{Text: o.delta.Content}}, nil)
	})
	if err != nil {
		if !sse.started {
			return err
		}
		sse.sendError(err)
		return nil
	}
	send([]completionChoice{{FinishReason: &res.finish}}, nil)
	if r.StreamOptions != nil && r.StreamOptions.IncludeUsage {
		send([]completionChoice{}, usageOf(res.usage))
	}
	sse.done()
	return nil
}
