package server

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"
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
	User      string          `json:"user"`
	// Logprobs asks for that many alternatives per token (0..20) in the
	// legacy shape; Echo prepends the prompt to the text.
	Logprobs *int `json:"logprobs"`
	Echo     bool `json:"echo"`
}

type completionChoice struct {
	Text         string              `json:"text"`
	Index        int                 `json:"index"`
	Logprobs     *completionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
}

// completionLogprobs is the legacy completions shape: parallel lists, one
// entry per generated token; text_offset is each token's byte offset in the
// choice's whole text.
type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float32            `json:"token_logprobs"`
	TopLogprobs   []map[string]float32 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// add appends entries whose tokens start at byte offset off.
func (l *completionLogprobs) add(es []LogprobEntry, off int) int {
	for _, e := range es {
		top := make(map[string]float32, len(e.TopLogprobs))
		for _, t := range e.TopLogprobs {
			top[t.Token] = t.Logprob
		}
		l.Tokens = append(l.Tokens, e.Token)
		l.TokenLogprobs = append(l.TokenLogprobs, e.Logprob)
		l.TopLogprobs = append(l.TopLogprobs, top)
		l.TextOffset = append(l.TextOffset, off)
		off += len(e.Token)
	}
	return off
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
	j, err := s.check(generation{model: r.Model, n: r.N, maxTokens: r.MaxTokens, maxParam: "max_tokens", sampling: r.Sampling, stop: r.Stop,
		logprobs: r.Logprobs, logprobsParam: "logprobs"})
	if err != nil {
		return err
	}
	if r.MaxTokens == nil {
		j.req.MaxTokens = 16 // OpenAI's default for this API
	}
	if r.Logprobs != nil && r.Echo {
		return badRequest("echo", "echo with logprobs needs the prompt's log-probabilities, which this server does not compute")
	}
	tok := s.e.Model().Tok
	var text string
	var ids []int
	switch {
	case json.Unmarshal(r.Prompt, &text) == nil:
		if err := s.fits("prompt", text); err != nil {
			return err
		}
		j.req.Prompt = tok.Encode(text, true, true)
	case json.Unmarshal(r.Prompt, &ids) == nil && len(ids) > 0:
		j.req.Prompt = ids
	default:
		return badRequest("prompt", "prompt must be a string or an array of token ids")
	}
	j.req.CacheSalt, j.req.Session = r.CacheSalt, sessionOf(c, r.User)
	echo := "" // the prompt as the client gave it, or its ids' text
	if r.Echo {
		echo = text
		if ids != nil {
			echo = tok.Decode(ids, false)
		}
	}
	newLogprobs := func() *completionLogprobs {
		if r.Logprobs == nil {
			return nil
		}
		return &completionLogprobs{Tokens: []string{}, TokenLogprobs: []float32{}, TopLogprobs: []map[string]float32{}, TextOffset: []int{}}
	}
	off := len(echo) // the next token's offset in the choice's text
	id, created := newID("cmpl-"), now()
	if !r.Stream {
		out := echo
		lps := newLogprobs()
		return s.run(c.Request().Context(), j, hooks{
			output: func(o output) error {
				out += o.delta.Content
				if lps != nil {
					off = lps.add(o.logprobs, off)
				}
				return nil
			},
			finished: func(res result, err error) error {
				if err != nil {
					return err
				}
				return c.JSON(http.StatusOK, completionResponse{ID: id, Object: "text_completion", Created: created, Model: s.opt.ServedName,
					Choices: []completionChoice{{Text: out, Logprobs: lps, FinishReason: &res.finish}}, Usage: usageOf(res.usage)})
			},
		})
	}
	sse := newSSE(c)
	send := func(ch []completionChoice, u *Usage) error {
		return sse.send(completionResponse{ID: id, Object: "text_completion", Created: created, Model: s.opt.ServedName, Choices: ch, Usage: u})
	}
	return s.run(c.Request().Context(), j, hooks{
		accepted: func() error { // the stream starts, with the echo if any
			if sse.open(); echo != "" {
				return send([]completionChoice{{Text: echo}}, nil)
			}
			return nil
		},
		output: func(o output) error {
			lps := newLogprobs()
			if lps != nil {
				off = lps.add(o.logprobs, off)
			}
			return send([]completionChoice{{Text: o.delta.Content, Logprobs: lps}}, nil)
		},
		finished: func(res result, err error) error {
			if err != nil {
				return sse.fail(err)
			}
			send([]completionChoice{{FinishReason: &res.finish}}, nil)
			if r.StreamOptions != nil && r.StreamOptions.IncludeUsage {
				send([]completionChoice{}, usageOf(res.usage))
			}
			sse.done()
			return nil
		},
	})
}
