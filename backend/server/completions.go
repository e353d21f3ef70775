package server

import (
	"context"
	"encoding/json"

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
	// legacy shape; Echo prepends the prompt to the text and, with
	// Logprobs, its tokens' log-probabilities to the list (the first's
	// null: nothing comes before it). Echo with max_tokens 0 returns the
	// prompt alone, as lm-evaluation-harness's loglikelihood asks.
	Logprobs *int `json:"logprobs"`
	Echo     bool `json:"echo"`
	// PromptLogprobs is vLLM's: each prompt token's log-probability with
	// that many alternatives (0..20), as choices[].prompt_logprobs; not
	// with stream, as vLLM.
	PromptLogprobs *int `json:"prompt_logprobs"`
}

type completionChoice struct {
	Text           string                   `json:"text"`
	Index          int                      `json:"index"`
	Logprobs       *completionLogprobs      `json:"logprobs"`
	FinishReason   *string                  `json:"finish_reason"`
	PromptLogprobs []map[string]vllmLogprob `json:"prompt_logprobs,omitempty"`
}

// completionLogprobs is the legacy completions shape: parallel lists, one
// entry per token (the echoed prompt's, then the generated ones);
// text_offset is each token's byte offset in the choice's whole text. An
// echoed prompt's first token has null for its log-probability and its
// alternatives.
type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float32           `json:"token_logprobs"`
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
		l.TokenLogprobs = append(l.TokenLogprobs, &e.Logprob)
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
	// Echo with max_tokens 0 is the prompt alone: the engine samples one
	// token (a prefill always ends in one), which is not returned (vLLM
	// does the same).
	echoOnly := r.Echo && r.MaxTokens != nil && *r.MaxTokens == 0
	maxTokens := r.MaxTokens
	if echoOnly {
		maxTokens = nil
	}
	j, err := s.check(generation{model: r.Model, n: r.N, maxTokens: maxTokens, maxParam: "max_tokens", sampling: r.Sampling, stop: r.Stop,
		logprobs: r.Logprobs, logprobsParam: "logprobs"})
	if err != nil {
		return err
	}
	switch {
	case echoOnly:
		j.req.MaxTokens = 1
	case r.MaxTokens == nil:
		j.req.MaxTokens = 16 // OpenAI's default for this API
	}
	if err := j.askPrompt(&r); err != nil {
		return err
	}
	ps, err := s.completionPrompts(r.Prompt)
	if err != nil {
		return err
	}
	j.req.CacheSalt, j.req.Session = r.CacheSalt, sessionOf(c, r.User)
	id, created := newID("cmpl-"), now()
	ccs := make([]*completion, len(ps))
	for i, p := range ps {
		ccs[i] = &completion{s: s, r: &r, p: p, index: i, echoOnly: echoOnly, id: id, created: created}
		if r.Echo {
			ccs[i].echo = p.text // the prompt as the client gave it, or its ids' text
		}
	}
	if r.Stream {
		if len(ps) > 1 {
			return badRequest("stream", "stream takes one prompt, got %d; send several without stream", len(ps))
		}
		j.req.Prompt = ps[0].ids
		return ccs[0].stream(c, j)
	}
	return s.wholeBatch(c, j, ccs)
}

// completion is one prompt of a /v1/completions request as it is answered.
type completion struct {
	s        *Server
	r        *CompletionRequest
	p        textPrompt
	index    int // of the prompt, in a batch
	echoOnly bool
	echo     string
	id       string
	created  int64
}

func (cc *completion) newLogprobs() *completionLogprobs {
	if cc.r.Logprobs == nil {
		return nil
	}
	return &completionLogprobs{Tokens: []string{}, TokenLogprobs: []*float32{}, TopLogprobs: []map[string]float32{}, TextOffset: []int{}}
}

func (cc *completion) usage(res result) *Usage {
	u := usageOf(res.usage)
	if cc.echoOnly { // the sampled token was not returned
		u.CompletionTokens, u.TotalTokens = 0, u.PromptTokens
	}
	return u
}

// answer runs one prompt to its choice and usage.
func (cc *completion) answer(ctx context.Context, j job) (ch completionChoice, u *Usage, err error) {
	j.req.Prompt = cc.p.ids
	out, lps := cc.echo, cc.newLogprobs()
	off := len(cc.echo) // the next token's offset in the choice's text
	var promptLPs []map[string]vllmLogprob
	err = cc.s.run(ctx, j, hooks{
		prompt: func(pl []enginePrompt) error {
			if lps != nil && cc.r.Echo {
				cc.addPrompt(lps, pl)
			}
			if cc.r.PromptLogprobs != nil {
				promptLPs = cc.vllmPrompt(pl)
			}
			return nil
		},
		output: func(o output) error {
			if cc.echoOnly {
				return nil
			}
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
			ch = completionChoice{Text: out, Index: cc.index, Logprobs: lps, FinishReason: &res.finish, PromptLogprobs: promptLPs}
			u = cc.usage(res)
			return nil
		},
	})
	return ch, u, err
}

func (cc *completion) stream(c echo.Context, j job) error {
	sse := newSSE(c)
	send := func(ch []completionChoice, u *Usage) error {
		return sse.send(completionResponse{ID: cc.id, Object: "text_completion", Created: cc.created, Model: cc.s.opt.ServedName, Choices: ch, Usage: u})
	}
	off := len(cc.echo)
	// The echo goes first: at once, or with its log-probabilities once
	// the prefill has them.
	echoLater := cc.echo != "" && cc.r.Logprobs != nil
	return cc.s.run(c.Request().Context(), j, hooks{
		accepted: func() error {
			if sse.open(); cc.echo != "" && !echoLater {
				return send([]completionChoice{{Text: cc.echo}}, nil)
			}
			return nil
		},
		prompt: func(pl []enginePrompt) error {
			if !echoLater {
				return nil
			}
			lps := cc.newLogprobs()
			cc.addPrompt(lps, pl)
			return send([]completionChoice{{Text: cc.echo, Logprobs: lps}}, nil)
		},
		output: func(o output) error {
			if cc.echoOnly {
				return nil
			}
			lps := cc.newLogprobs()
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
			if cc.r.StreamOptions != nil && cc.r.StreamOptions.IncludeUsage {
				send([]completionChoice{}, cc.usage(res))
			}
			sse.done()
			return nil
		},
	})
}
