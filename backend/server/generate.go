package server

import (
	"context"
	"errors"
	"strings"
	"unicode/utf8"

	"jspark/backend/chat"
	"jspark/backend/engine"
	"jspark/backend/tokenizer"
)

// job is one generation as the HTTP layer sees it.
type job struct {
	req        engine.Request
	stops      []string
	parseTools bool
	maxCalls   int // 1 when parallel_tool_calls is false
	ids        func(i int) string
}

// LogprobEntry is one token's log-probability in OpenAI's chat shape.
type LogprobEntry struct {
	Token       string       `json:"token"`
	Logprob     float32      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []TopLogprob `json:"top_logprobs"`
}

// TopLogprob is one alternative.
type TopLogprob struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// output is what a job produced, delivered in pieces as it streams.
type output struct {
	delta    chat.Delta
	logprobs []LogprobEntry
}

// result is how a job ended.
type result struct {
	finish    string // stop, length or tool_calls
	usage     engine.Usage
	calls     int
	truncated bool // an unterminated tool call at the end
}

func bytesOf(s string) []int {
	out := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = int(s[i])
	}
	return out
}

// run submits j and calls emit for each piece of output until the end.
func (s *Server) run(ctx context.Context, j job, emit func(output) error) (result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := s.e.Submit(ctx, j.req)
	if err != nil {
		return result{}, engineError(err)
	}
	tok := s.e.Model().Tok
	parser := &chat.Parser{IDFunc: j.ids, MaxCalls: j.maxCalls}
	var pending []byte // bytes of an unfinished UTF-8 character
	var held string    // text that may begin a stop string
	stopped := false
	var emitErr error
	send := func(text string, lps []LogprobEntry) {
		if emitErr != nil {
			return
		}
		var d chat.Delta
		if j.parseTools {
			d = parser.Feed(text)
		} else {
			d.Content = text
		}
		if d.Content != "" || len(d.Calls) > 0 || len(lps) > 0 {
			emitErr = emit(output{delta: d, logprobs: lps})
		}
	}
	var res result
	for ev := range events {
		if ev.Finish != "" {
			res.usage = ev.Usage
			switch {
			case stopped:
				res.finish = "stop"
			case ev.Finish == engine.FinishLength:
				res.finish = "length"
			case ev.Finish == engine.FinishStop:
				res.finish = "stop"
			case ev.Finish == engine.FinishAbort:
				if ctx.Err() != nil && !stopped {
					return res, ctx.Err()
				}
				res.finish = "stop"
			default:
				return res, ev.Err
			}
			continue
		}
		if stopped {
			continue
		}
		var lps []LogprobEntry
		if j.req.TopLogprobs > 0 || ev.Top != nil {
			lps = []LogprobEntry{logprobEntry(tok, ev)}
		}
		pending = tok.AppendPiece(pending, ev.Token, false)
		cut := validPrefix(pending)
		text := held + string(pending[:cut])
		pending = append(pending[:0], pending[cut:]...)
		if i, _ := firstStop(text, j.stops); i >= 0 {
			send(text[:i], lps)
			stopped = true
			cancel()
			continue
		}
		keep := holdFor(text, j.stops)
		held = text[len(text)-keep:]
		send(text[:len(text)-keep], lps)
		if parser.Done() { // the one call allowed is complete
			stopped = true
			cancel()
		}
	}
	if !stopped {
		send(held+string(pending), nil)
	}
	if j.parseTools {
		d, truncated := parser.Finish()
		res.truncated = truncated
		if emitErr == nil && (d.Content != "" || len(d.Calls) > 0) {
			emitErr = emit(output{delta: d})
		}
		res.calls = parser.Calls()
		if res.calls > 0 && res.finish == "stop" {
			res.finish = "tool_calls"
		}
	}
	return res, emitErr
}

func logprobEntry(tok *tokenizer.Tokenizer, ev engine.Event) LogprobEntry {
	piece := string(tok.AppendPiece(nil, ev.Token, true))
	e := LogprobEntry{Token: piece, Logprob: ev.Logprob, Bytes: bytesOf(piece), TopLogprobs: []TopLogprob{}}
	for _, t := range ev.Top {
		p := string(tok.AppendPiece(nil, t.Token, true))
		e.TopLogprobs = append(e.TopLogprobs, TopLogprob{Token: p, Logprob: t.Logprob, Bytes: bytesOf(p)})
	}
	return e
}

// validPrefix is the length of b without a trailing incomplete UTF-8
// character, which waits for the bytes of the next token.
func validPrefix(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}

func firstStop(text string, stops []string) (int, string) {
	best, which := -1, ""
	for _, s := range stops {
		if i := strings.Index(text, s); i >= 0 && (best < 0 || i < best) {
			best, which = i, s
		}
	}
	return best, which
}

// holdFor is how much of text's end might begin a stop string.
func holdFor(text string, stops []string) int {
	keep := 0
	for _, s := range stops {
		for n := min(len(text), len(s)-1); n > keep; n-- {
			if strings.HasSuffix(text, s[:n]) {
				keep = n
				break
			}
		}
	}
	return keep
}

func engineError(err error) error {
	var ce *engine.ContextError
	switch {
	case errors.As(err, &ce):
		e := badRequest("max_tokens", "this model's maximum context length is %d tokens; the prompt has %d tokens and max_tokens is %d (%d in all)",
			ce.Context, ce.Prompt, ce.MaxTokens, ce.Prompt+ce.MaxTokens)
		e.Code = strp("context_length_exceeded") // OpenAI's code: clients trim history on it
		return e
	case errors.Is(err, engine.ErrQueueFull):
		return &APIError{Status: 429, Message: "the engine's queue is full; retry shortly", Type: "rate_limit_error", Code: strp("queue_full"), RetryAfter: 1}
	}
	return badRequest("", "%v", err)
}
