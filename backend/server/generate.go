package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
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
	forced     bool // the output is calls only (tool_choice required or named)
	maxCalls   int  // 1 when parallel_tool_calls is false
	ids        func(i int) string
	// format is the syntax of the model's calls; tools type the values of
	// the XML formats.
	format chat.Format
	tools  []chat.Tool
	// reasoning splits a leading <think> block off the output; openThink
	// says the prompt already opened it.
	reasoning, openThink bool
}

// splitter turns a job's raw output text into deltas: the reasoning block
// first, then the answer as content and tool calls.
type splitter struct {
	reason *chat.Reasoning // nil: no reasoning split
	parser *chat.Parser    // nil: all content
}

func (j job) splitter() *splitter {
	sp := &splitter{}
	if j.reasoning {
		sp.reason = chat.NewReasoning(j.openThink)
	}
	// Harmony's channels are parsed with or without tools: its analysis
	// is reasoning, and only its final channel is content.
	if j.parseTools || j.format == chat.FormatHarmony {
		sp.parser = &chat.Parser{Format: j.format, Tools: j.tools, IDFunc: j.ids, MaxCalls: j.maxCalls, Forced: j.forced}
	}
	return sp
}

func (sp *splitter) answer(text string, d *chat.Delta) {
	if sp.parser == nil {
		d.Content += text
		return
	}
	d.Add(sp.parser.Feed(text))
}

func (sp *splitter) feed(text string) (d chat.Delta) {
	if sp.reason != nil {
		d.Reasoning, text = sp.reason.Feed(text)
	}
	sp.answer(text, &d)
	return d
}

// finish flushes what the stages hold. A call cut short after its name
// stays a call (its arguments as far as they went; the finish reason,
// length, says why); one cut before is dropped, never content.
func (sp *splitter) finish() (d chat.Delta) {
	if sp.reason != nil {
		var text string
		d.Reasoning, text = sp.reason.Finish()
		sp.answer(text, &d)
	}
	if sp.parser != nil {
		pd, _ := sp.parser.Finish()
		d.Add(pd)
	}
	return d
}

// done reports that the output is complete (the one call allowed is).
func (sp *splitter) done() bool { return sp.parser != nil && sp.parser.Done() }

// calls is the number of tool calls the output made.
func (sp *splitter) calls() int {
	if sp.parser == nil {
		return 0
	}
	return sp.parser.Calls()
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
	finish string // stop, length or tool_calls
	usage  engine.Usage
}

func bytesOf(s string) []int {
	out := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = int(s[i])
	}
	return out
}

// hooks are what a handler does at each point of a job's life, so that no
// endpoint infers a point from the data it gets. run calls accepted once,
// when the engine has taken the request (a stream starts there, headers
// and a first event, before the first token, which a long prefill delays);
// output for each piece after that; and finished exactly once, last, with
// how the job ended or why it failed, also when it never reached the
// engine. finished's error is the handler's. accepted and output may be
// nil; finished may not.
type hooks struct {
	accepted func() error
	// prompt, for a job that asked for its prompt's log-probabilities
	// (engine.Request.PromptLogprobs), gets them once, after accepted and
	// before the first output.
	prompt   func([]engine.PromptLogprob) error
	output   func(output) error
	finished func(result, error) error
}

// run submits j and drives h through its life.
func (s *Server) run(ctx context.Context, j job, h hooks) error {
	h = observe(ctx, h)
	res, err := s.generate(ctx, j, h)
	return h.finished(res, err)
}

// generate submits j and calls h's accepted and output hooks until the end.
func (s *Server) generate(ctx context.Context, j job, h hooks) (res result, err error) {
	ctx, cancelCause := context.WithCancelCause(ctx)
	cancel := func() { cancelCause(nil) }
	// stop ends the request on the client's terms: the engine finishes it
	// as a stop (and counts it so), not as an abort.
	stop := func() { cancelCause(engine.ErrStopped) }
	defer cancel()
	defer context.AfterFunc(s.stop, cancel)() // Abort ends it too
	if s.stop.Err() != nil {
		return result{}, errShuttingDown
	}
	s.running.Add(1)
	defer s.running.Add(-1)
	events, err := s.e.Submit(ctx, j.req)
	if err != nil {
		return result{}, engineError(err)
	}
	if h.accepted != nil {
		if err := h.accepted(); err != nil {
			return result{}, err
		}
	}
	tok := s.e.Model().Tok
	sp := j.splitter()
	var pending []byte // bytes of an unfinished UTF-8 character
	var held string    // text that may begin a stop string
	stopped := false
	var outErr error
	send := func(d chat.Delta, lps []LogprobEntry) {
		if h.output != nil && outErr == nil && (d.Reasoning != "" || d.Content != "" || len(d.Calls) > 0 || len(lps) > 0) {
			if outErr = h.output(output{delta: d, logprobs: lps}); outErr != nil {
				cancel() // nobody will read the rest
			}
		}
	}
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
			case ev.Finish == engine.FinishAbort && outErr != nil: // the client is gone or stopped reading
				return res, outErr
			case ev.Finish == engine.FinishAbort && s.stop.Err() != nil:
				return res, errShuttingDown
			case ev.Finish == engine.FinishAbort && ctx.Err() != nil:
				return res, ctx.Err()
			case ev.Finish == engine.FinishAbort: // the engine closed under it: never a normal end
				return res, engineError(cmp.Or(ev.Err, engine.ErrClosed))
			case ev.Finish == engine.FinishError: // its step failed (a device error)
				return res, &APIError{Status: http.StatusInternalServerError, Message: fmt.Sprintf("the model's step failed: %v", ev.Err),
					Type: "server_error", Code: strp("step_failed")}
			default:
				return res, ev.Err
			}
			continue
		}
		if ev.Prompt != nil && h.prompt != nil && outErr == nil {
			if outErr = h.prompt(ev.Prompt); outErr != nil {
				cancel()
			}
		}
		if stopped {
			continue
		}
		var lps []LogprobEntry
		if j.req.TopLogprobs > 0 || ev.Top != nil {
			lps = []LogprobEntry{logprobEntry(tok, ev)}
		}
		pending = tok.AppendPiece(pending, ev.Token, sp.parser != nil && s.preserved[ev.Token])
		cut := validPrefix(pending)
		text := held + string(pending[:cut])
		pending = append(pending[:0], pending[cut:]...)
		if i, _ := firstStop(text, j.stops); i >= 0 {
			send(sp.feed(text[:i]), lps)
			stopped = true
			stop()
			continue
		}
		keep := holdFor(text, j.stops)
		held = text[len(text)-keep:]
		send(sp.feed(text[:len(text)-keep]), lps)
		if sp.done() { // the one call allowed is complete
			stopped = true
			stop()
		}
	}
	var last chat.Delta
	if !stopped {
		last = sp.feed(held + string(pending))
	}
	last.Add(sp.finish())
	send(last, nil)
	if sp.calls() > 0 && res.finish == "stop" {
		res.finish = "tool_calls"
	}
	return res, outErr
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
	case errors.Is(err, engine.ErrClosed):
		return errShuttingDown
	case errors.Is(err, engine.ErrQueueFull):
		return &APIError{Status: 429, Message: "the engine's queue is full; retry shortly", Type: "rate_limit_error", Code: strp("queue_full"), RetryAfter: 1}
	}
	return badRequest("", "%v", err)
}
