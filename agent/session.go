// Package agent runs coding-agent sessions: one session is a linear tool loop
// over go-openai (send → stream → run the tool calls in the sandbox → append
// the results → send …) until the window's cut or the nudges run out; the
// round runner starts a round's sessions together, samples the backend's
// counters and writes the results.
package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"jspark/backend/engine"
	"jspark/recipes"
	"jspark/tools"
)

// Call is one tool call of a response.
type Call struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Args      string `json:"arguments"`           // clipped (see RecordLimit)
	ArgsBytes int    `json:"arguments_bytes"`     // the arguments' full length
	ExitCode  *int   `json:"exit_code,omitempty"` // bash only
	Failed    bool   `json:"failed,omitempty"`    // the call was wrong: bad arguments, unknown tool, no match
}

// Request is what one model request of a session did. Times are seconds
// from the round's start; TTFT is -1 when no output arrived.
type Request struct {
	Turn             int     `json:"turn"`
	Sent             float64 `json:"sent"`
	TTFT             float64 `json:"ttft"`
	End              float64 `json:"end"`
	PromptTokens     int     `json:"prompt_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
	CachedTokens     int     `json:"cached_tokens"`
	StreamedTokens   int     `json:"streamed_tokens"` // output chunks seen, for backends that report no usage
	Finish           string  `json:"finish_reason,omitempty"`
	Calls            []Call  `json:"tool_calls,omitempty"`
	Error            string  `json:"error,omitempty"`
	Cut              bool    `json:"cut,omitempty"` // the window ended during this request
	Trimmed          bool    `json:"trimmed,omitempty"`
	// Timing is where the request's time went by the server's engine clock
	// (usage.jspark.timing of jspark serve); nil when the backend reports
	// none or the request did not finish.
	Timing *engine.Timing `json:"timing,omitempty"`
	// ToolsSec is how long the reply's tool calls ran (jspark's own loop;
	// an external agent runs its tools out of sight).
	ToolsSec float64 `json:"tools_s,omitempty"`
}

// requestJSON is Request as results.json and trajectories write it: a TTFT
// nobody measured (no first output, -1 in memory) is null, never a number.
type requestJSON struct {
	requestFields
	TTFT *float64 `json:"ttft"`
}

type requestFields Request

func (q Request) MarshalJSON() ([]byte, error) {
	out := requestJSON{requestFields: requestFields(q)}
	if q.TTFT >= 0 {
		out.TTFT = &q.TTFT
	}
	return json.Marshal(out)
}

func (q *Request) UnmarshalJSON(b []byte) error {
	var in requestJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*q = Request(in.requestFields)
	q.TTFT = -1
	if in.TTFT != nil {
		q.TTFT = *in.TTFT
	}
	return nil
}

// Session is one agent working on one task.
type Session struct {
	Name    string
	Task    *recipes.Task
	Recipe  *recipes.Recipe
	Client  *openai.Client
	Model   string
	Tools   []*tools.Tool
	Env     *tools.Env
	Start   time.Time       // the round's start, the zero of every time
	Log     io.Writer       // the trajectory, one JSON line per step
	OnStep  func(*Request)  // progress
	payload *payloadCapture // the first request's bytes
	logErr  error           // the trajectory's first write error
	final   string          // the last reply's text
}

func (s *Session) begin(_ context.Context, start time.Time, onStep func(*Request)) {
	s.Start, s.OnStep = start, onStep
}

func (s *Session) finish(sr *SessionResult) error {
	sr.payload, sr.final = s.payload.first, s.final
	return s.logErr
}

// End says why a session stopped.
type End string

const (
	EndCut         End = "cut"          // the window ended
	EndNoToolCall  End = "no_tool_call" // the nudges ran out
	EndContextFull End = "context_full"
	EndAPIErrors   End = "api_errors"
	EndAgentDone   End = "agent_done"   // an external agent exited 0 before the cut
	EndAgentFailed End = "agent_failed" // it exited otherwise, or could not start
)

// maxConsecutiveErrors ends a session whose backend keeps failing.
const maxConsecutiveErrors = 5

// Run is the loop. It returns when ctx ends (the cut) or the session stops on
// its own; every request is in the returned list, the unfinished one too.
func (s *Session) Run(ctx context.Context) ([]Request, End) {
	msgs := []openai.ChatCompletionMessage{
		{Role: openai.ChatMessageRoleSystem, Content: s.Recipe.System},
		{Role: openai.ChatMessageRoleUser, Content: s.Task.Prompt},
	}
	var reqs []Request
	nudges, errs := 0, 0
	for turn := 0; ; turn++ {
		if ctx.Err() != nil {
			return reqs, EndCut
		}
		r, reply := s.send(ctx, turn, msgs)
		reqs = append(reqs, r)
		var apiErr *openai.APIError
		switch {
		case r.Cut:
			s.write(&reqs[len(reqs)-1], nil, nil)
			return reqs, EndCut
		case r.Error != "" && errors.As(reply.err, &apiErr) && apiErr.Code == "context_length_exceeded":
			s.write(&reqs[len(reqs)-1], nil, nil)
			trimmed, ok := trim(msgs)
			if !ok || s.Recipe.Context.OnFull == "stop" {
				return reqs, EndContextFull
			}
			msgs = trimmed
			reqs[len(reqs)-1].Trimmed = true
			continue
		case r.Error != "":
			s.write(&reqs[len(reqs)-1], nil, nil)
			if errs++; errs >= maxConsecutiveErrors {
				return reqs, EndAPIErrors
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
				return reqs, EndNoToolCall
			}
			msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: s.Recipe.Nudge.Message})
			continue
		}
		nudges = 0
		var results []openai.ChatCompletionMessage
		cut := false
		toolsStart := time.Now()
		for i, tc := range reply.message.ToolCalls {
			out := s.call(ctx, tc, &reqs[len(reqs)-1].Calls[i])
			if out.Err != nil {
				cut = true
				break
			}
			results = append(results, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: tc.ID, Content: out.Output})
		}
		reqs[len(reqs)-1].ToolsSec = time.Since(toolsStart).Seconds()
		msgs = append(msgs, results...)
		s.write(&reqs[len(reqs)-1], &reply.message, results)
		if cut {
			return reqs, EndCut
		}
	}
}

func (s *Session) since(t time.Time) float64 { return t.Sub(s.Start).Seconds() }

type reply struct {
	message openai.ChatCompletionMessage
	err     error
}

// send streams one request and assembles the assistant's message; a stream
// that breaks its contract (see assembler) is an error of that request.
func (s *Session) send(ctx context.Context, turn int, msgs []openai.ChatCompletionMessage) (Request, reply) {
	req := s.request(msgs)
	r := Request{Turn: turn, Sent: s.since(time.Now()), TTFT: -1}
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
				r.Timing, err = engineTiming(raw)
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
				r.Finish = clip(string(ch.FinishReason))
			}
		}
		if err != nil {
			r.End = s.since(time.Now())
			r.recordCalls(a.message(turn))
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
	r.recordCalls(msg)
	return r, reply{message: msg}
}

// recordCalls mirrors the message's calls into the record, arguments clipped.
func (r *Request) recordCalls(msg openai.ChatCompletionMessage) {
	for _, c := range msg.ToolCalls {
		r.Calls = append(r.Calls, Call{ID: clip(c.ID), Name: clip(c.Function.Name), Args: clip(c.Function.Arguments), ArgsBytes: len(c.Function.Arguments)})
	}
}

// failed records an error, or the cut when ctx ended.
func (s *Session) failed(ctx context.Context, r Request, err error) Request {
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
		Seed:          sp.Seed,
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
func (s *Session) call(ctx context.Context, tc openai.ToolCall, rec *Call) tools.Result {
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
	Request *Request                       `json:"request"`
	Reply   *openai.ChatCompletionMessage  `json:"reply,omitempty"`
	Results []openai.ChatCompletionMessage `json:"tool_results,omitempty"`
}

// write appends the step to the trajectory, texts clipped; the first write
// error is kept for the round to report.
func (s *Session) write(r *Request, msg *openai.ChatCompletionMessage, results []openai.ChatCompletionMessage) {
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

// payloadCapture keeps the body of the first request sent through it.
type payloadCapture struct {
	next  http.RoundTripper
	first []byte
}

func (p *payloadCapture) RoundTrip(req *http.Request) (*http.Response, error) {
	if p.first == nil && req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		p.first = b
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	resp, err := p.next.RoundTrip(req)
	return bound(resp), err
}

// sessionHeader names the session on every request (X-Session-Id: round/
// session), so a server that retains an active session's cache (jspark
// serve) keeps this one's prefix while its tools run.
type sessionHeader struct {
	next http.RoundTripper
	id   string
}

func (h sessionHeader) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context()) // a RoundTripper must not modify the request
	req.Header.Set("X-Session-Id", h.id)
	if req.Header.Get("Idempotency-Key") == "" {
		req.Header.Set("Idempotency-Key", IdempotencyKey())
	}
	return h.next.RoundTrip(req)
}

var keySeq atomic.Uint64

// IdempotencyKey is a key unique within the process for one request, as
// OpenAI's SDKs send with each request they may retry. NOTE: it makes a
// POST replayable, so that Go resends it when the reused keep-alive
// connection it went out on had been closed by the server before any
// answer (llama-server closes one after 5 requests: the runner counted an
// API error, the bench lost the request); the server saw nothing of it.
func IdempotencyKey() string { return fmt.Sprintf("jspark-%d-%d", os.Getpid(), keySeq.Add(1)) }

// engineTiming reads usage.jspark.timing from a chunk that carries usage:
// nil when the backend sends none (any endpoint but jspark serve).
func engineTiming(chunk []byte) (*engine.Timing, error) {
	var u struct {
		Usage struct {
			Jspark *struct {
				Timing *engine.Timing `json:"timing"`
			} `json:"jspark"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(chunk, &u); err != nil || u.Usage.Jspark == nil || u.Usage.Jspark.Timing == nil {
		return nil, err
	}
	t := u.Usage.Jspark.Timing
	if t.QueuedSec < 0 || t.PrefillSec < 0 || t.DecodeSec < 0 || t.PreemptedSec < 0 {
		return nil, invalid("usage.jspark.timing has a negative time: %+v", *t)
	}
	return t, nil
}
