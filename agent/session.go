// Package agent runs coding-agent sessions: one session is a linear tool loop
// over go-openai (send → stream → run the tool calls in the sandbox → append
// the results → send …) until the window's cut or the nudges run out; the
// round runner opens a round's sessions together, samples the backend's
// counters until the cut and collects the records.
//
// Around it, each concern has its package: record (results.json's schema),
// metrics (a backend's counters), target (the servers driven), report (the
// tables and report.html) and external (Pi, Codex and opencode: install,
// configuration, the server-side recorder). The bench (agent/bench) uses
// them too.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"jspark/agent/record"
	"jspark/recipes"
	"jspark/tools"
)

// Session is one agent working on one task.
type Session struct {
	Name    string
	Task    *recipes.Task
	Recipe  *recipes.Recipe
	Client  *openai.Client
	Model   string
	Seed    *int // the sampling seed every request carries (nil: none)
	Tools   []*tools.Tool
	Env     *tools.Env
	Start   time.Time             // the round's start, the zero of every time
	Log     io.Writer             // the trajectory, one JSON line per step
	OnStep  func(*record.Request) // progress
	payload *payloadCapture       // the first request's bytes
	logErr  error                 // the trajectory's first write error
	final   string                // the last reply's text
	infra   string                // why the serving side ended the session, if it did
}

// Begin sets the round's clock and who hears of each request.
func (s *Session) Begin(_ context.Context, start time.Time, onStep func(*record.Request)) {
	s.Start, s.OnStep = start, onStep
}

// Finish notes an infrastructure failure in the record and returns the
// first request's body and the last reply's text; the error is the
// trajectory's first write error.
func (s *Session) Finish(sr *record.Session) (payload []byte, final string, err error) {
	sr.Infra = s.infra
	return s.payload.first, s.final, s.logErr
}

// maxConsecutiveErrors ends a session whose backend keeps failing.
const maxConsecutiveErrors = 5

// Run is the loop. It returns when ctx ends (the cut) or the session stops on
// its own; every request is in the returned list, the unfinished one too.
func (s *Session) Run(ctx context.Context) ([]record.Request, record.End) {
	msgs := []openai.ChatCompletionMessage{
		{Role: openai.ChatMessageRoleSystem, Content: s.Recipe.System},
		{Role: openai.ChatMessageRoleUser, Content: s.Task.Prompt},
	}
	var reqs []record.Request
	nudges, errs := 0, 0
	for turn := 0; ; turn++ {
		if ctx.Err() != nil {
			return reqs, record.EndCut
		}
		if end, ok := s.limited(reqs); ok {
			return reqs, end
		}
		r, reply := s.send(ctx, turn, msgs)
		reqs = append(reqs, r)
		var apiErr *openai.APIError
		switch {
		case r.Cut:
			s.write(&reqs[len(reqs)-1], nil, nil)
			return reqs, record.EndCut
		case r.Error != "" && errors.As(reply.err, &apiErr) && apiErr.Code == "context_length_exceeded":
			s.write(&reqs[len(reqs)-1], nil, nil)
			trimmed, ok := trim(msgs)
			if !ok || s.Recipe.Context.OnFull == "stop" {
				return reqs, record.EndContextFull
			}
			msgs = trimmed
			reqs[len(reqs)-1].Trimmed = true
			continue
		case r.Error != "":
			s.write(&reqs[len(reqs)-1], nil, nil)
			if errs++; errs >= maxConsecutiveErrors {
				if servingFault(reply.err) {
					s.infra = fmt.Sprintf("the backend failed %d requests in a row: %s", errs, r.Error)
				}
				return reqs, record.EndAPIErrors
			}
			select { // a full queue says retry shortly; so does anything else
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		errs = 0
		s.final = reply.message.Content
		msgs = append(msgs, reply.message)
		if len(reply.message.ToolCalls) == 0 {
			s.write(&reqs[len(reqs)-1], &reply.message, nil)
			if nudges++; nudges > s.Recipe.Nudge.Max {
				return reqs, record.EndNoToolCall
			}
			msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: s.Recipe.Nudge.Message})
			continue
		}
		nudges = 0
		results, end := s.runTools(ctx, reply.message.ToolCalls, reqs)
		msgs = append(msgs, results...)
		s.write(&reqs[len(reqs)-1], &reply.message, results)
		if end != "" {
			return reqs, end
		}
	}
}

// runTools runs a reply's tool calls (the last of reqs), within what is
// left of the recipe's tool time; end is why the session stops ("": it
// goes on): the cut, or the tool time spent.
func (s *Session) runTools(ctx context.Context, calls []openai.ToolCall, reqs []record.Request) (results []openai.ChatCompletionMessage, end record.End) {
	q := &reqs[len(reqs)-1]
	tctx := ctx
	if limit := s.Recipe.Limits.ToolTime(); limit > 0 {
		var cancel context.CancelFunc
		tctx, cancel = context.WithTimeout(ctx, limit-toolTime(reqs))
		defer cancel()
	}
	start := time.Now()
	defer func() { q.ToolsSec = time.Since(start).Seconds() }()
	for i, tc := range calls {
		out := s.call(tctx, tc, &q.Calls[i])
		if out.Err != nil {
			if ctx.Err() == nil {
				return results, record.EndToolSeconds
			}
			return results, record.EndCut
		}
		results = append(results, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: tc.ID, Content: out.Output})
	}
	return results, ""
}

// limited says whether the session has reached one of the recipe's limits
// (budgets beyond the window), before it sends another request: as many
// requests as limits.turns, completions of limits.output_tokens, tools
// that ran limits.tool_seconds.
func (s *Session) limited(reqs []record.Request) (record.End, bool) {
	l := s.Recipe.Limits
	out := 0
	for _, q := range reqs {
		out += q.OutputTokens()
	}
	switch {
	case l.Turns > 0 && len(reqs) >= l.Turns:
		return record.EndTurns, true
	case l.OutputTokens > 0 && out >= l.OutputTokens:
		return record.EndOutputTokens, true
	case l.ToolSeconds > 0 && toolTime(reqs) >= l.ToolTime():
		return record.EndToolSeconds, true
	}
	return "", false
}

// toolTime is how long the tools of reqs ran together.
func toolTime(reqs []record.Request) time.Duration {
	t := 0.0
	for _, q := range reqs {
		t += q.ToolsSec
	}
	return time.Duration(t * float64(time.Second))
}

func (s *Session) since(t time.Time) float64 { return t.Sub(s.Start).Seconds() }

// servingFault reports whether a request failed for the serving side
// rather than for what the agent sent or the model said: no HTTP answer at
// all (the backend unreachable), a 5xx, or a 429 (its queue full). A
// session that such failures end is not scored.
func servingFault(err error) bool {
	var re *openai.RequestError
	if errors.As(err, &re) {
		return re.HTTPStatusCode >= 500 || re.HTTPStatusCode == http.StatusTooManyRequests
	}
	var ae *openai.APIError
	if errors.As(err, &ae) {
		return ae.HTTPStatusCode >= 500 || ae.HTTPStatusCode == http.StatusTooManyRequests
	}
	var ue *url.Error
	return errors.As(err, &ue)
}

type reply struct {
	message openai.ChatCompletionMessage
	err     error
}

// send streams one request and assembles the assistant's message; a stream
// that breaks its contract (see assembler) is an error of that request.
func (s *Session) send(ctx context.Context, turn int, msgs []openai.ChatCompletionMessage) (record.Request, reply) {
	req := s.request(msgs)
	r := record.Request{Turn: turn, Sent: s.since(time.Now()), TTFT: -1}
	stream, err := s.Client.CreateChatCompletionStream(ctx, req)
	if err != nil {
		r.End = s.since(time.Now())
		return s.failed(ctx, r, err), reply{err: err}
	}
	defer stream.Close()
	a := newAssembler()
	for {
		// Raw, to read usage.jspark, which go-openai's Usage does not carry.
		raw, err := stream.RecvRaw()
		if errors.Is(err, io.EOF) {
			break
		}
		var chunk openai.ChatCompletionStreamResponse
		if err == nil {
			err = json.Unmarshal(raw, &chunk)
		}
		if err == nil && chunk.Usage != nil {
			if err = checkUsage(chunk.Usage); err == nil {
				r.Timing, err = jsparkTiming(raw)
			}
		}
		for i := 0; err == nil && i < len(chunk.Choices); i++ {
			ch := chunk.Choices[i]
			if err = a.choice(ch); err != nil {
				break
			}
			// Reasoning is output too: a thinking model's first token is
			// reasoning.
			if d := ch.Delta; d.Content != "" || d.ReasoningContent != "" || len(d.ToolCalls) > 0 {
				if r.TTFT < 0 {
					r.TTFT = s.since(time.Now()) - r.Sent
				}
				r.StreamedTokens++
			}
			if ch.FinishReason != "" {
				r.Finish = record.Clip(string(ch.FinishReason))
			}
		}
		if err != nil {
			r.End = s.since(time.Now())
			recordCalls(&r, a.message(turn))
			return s.failed(ctx, r, err), reply{err: err}
		}
		if chunk.Usage != nil {
			r.PromptTokens, r.CompletionTokens = chunk.Usage.PromptTokens, chunk.Usage.CompletionTokens
			if d := chunk.Usage.PromptTokensDetails; d != nil {
				r.CachedTokens = d.CachedTokens
			}
		}
	}
	r.End = s.since(time.Now())
	msg := a.message(turn)
	recordCalls(&r, msg)
	return r, reply{message: msg}
}

// recordCalls mirrors the message's calls into the record, arguments clipped.
func recordCalls(r *record.Request, msg openai.ChatCompletionMessage) {
	for _, c := range msg.ToolCalls {
		r.Calls = append(r.Calls, record.NewCall(c.ID, c.Function.Name, c.Function.Arguments))
	}
}

// failed records an error, or the cut when ctx ended.
func (s *Session) failed(ctx context.Context, r record.Request, err error) record.Request {
	if ctx.Err() != nil {
		r.Cut = true
		return r
	}
	r.Error = err.Error()
	return r
}

func (s *Session) request(msgs []openai.ChatCompletionMessage) openai.ChatCompletionRequest {
	sp := s.Recipe.Sampling
	req := openai.ChatCompletionRequest{
		Model:         s.Model,
		Messages:      msgs,
		MaxTokens:     sp.MaxTokens,
		Stream:        true,
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
		Seed:          s.Seed,
	}
	if sp.Temperature != nil {
		req.Temperature = float32(*sp.Temperature)
	}
	if sp.TopP != nil {
		req.TopP = float32(*sp.TopP)
	}
	for _, t := range s.Tools {
		req.Tools = append(req.Tools, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: t.Name, Description: t.Description, Parameters: t.Parameters,
		}})
	}
	switch tc := sp.ToolChoice; tc {
	case "":
	case "auto", "required", "none":
		req.ToolChoice = tc
	default:
		req.ToolChoice = openai.ToolChoice{Type: openai.ToolTypeFunction, Function: openai.ToolFunction{Name: tc}}
	}
	return req
}

// call runs one tool call; unknown tools and bad arguments are answers the
// model reads, not session errors.
func (s *Session) call(ctx context.Context, tc openai.ToolCall, rec *record.Call) tools.Result {
	var t *tools.Tool
	for _, c := range s.Tools {
		if c.Name == tc.Function.Name {
			t = c
		}
	}
	var res tools.Result
	if t == nil {
		res = tools.Result{Output: fmt.Sprintf("error: no tool named %q", tc.Function.Name), Failed: true}
	} else {
		res = t.Run(ctx, s.Env, json.RawMessage(tc.Function.Arguments))
	}
	rec.ExitCode, rec.Failed = res.ExitCode, res.Failed
	return res
}

// trim drops the oldest half of the exchanges after the task (an exchange is
// an assistant message and the tool results or nudge that follow it).
func trim(msgs []openai.ChatCompletionMessage) ([]openai.ChatCompletionMessage, bool) {
	var starts []int
	for i := 2; i < len(msgs); i++ {
		if msgs[i].Role == openai.ChatMessageRoleAssistant {
			starts = append(starts, i)
		}
	}
	if len(starts) < 2 {
		return nil, false
	}
	cut := starts[len(starts)/2]
	out := append([]openai.ChatCompletionMessage{}, msgs[:2]...)
	return append(out, msgs[cut:]...), true
}

// step is one line of the trajectory.
type step struct {
	Session string                         `json:"session"`
	Request *record.Request                `json:"request"`
	Reply   *openai.ChatCompletionMessage  `json:"reply,omitempty"`
	Results []openai.ChatCompletionMessage `json:"tool_results,omitempty"`
}

// write appends the step to the trajectory, texts clipped; the first write
// error is kept for the round to report.
func (s *Session) write(r *record.Request, msg *openai.ChatCompletionMessage, results []openai.ChatCompletionMessage) {
	if s.Log != nil && s.logErr == nil {
		st := step{Session: s.Name, Request: r}
		if msg != nil {
			m := clipMessage(*msg)
			st.Reply = &m
		}
		for _, res := range results {
			st.Results = append(st.Results, clipMessage(res))
		}
		b, err := json.Marshal(st)
		if err == nil {
			_, err = s.Log.Write(append(b, '\n'))
		}
		s.logErr = err
	}
	if s.OnStep != nil {
		s.OnStep(r)
	}
}

// clipMessage is msg with its texts clipped for the record.
func clipMessage(m openai.ChatCompletionMessage) openai.ChatCompletionMessage {
	m.Content = record.Clip(m.Content)
	m.ReasoningContent = record.Clip(m.ReasoningContent)
	if len(m.ToolCalls) > 0 {
		calls := make([]openai.ToolCall, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			c.Function.Arguments = record.Clip(c.Function.Arguments)
			calls[i] = c
		}
		m.ToolCalls = calls
	}
	return m
}
