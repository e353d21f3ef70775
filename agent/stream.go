package agent

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	openai "github.com/sashabaranov/go-openai"
)

// Bounds on one streamed reply. Whatever an endpoint sends, a reply past them
// is an invalid stream: an API error for that request, never a crash, a
// million tool calls or unbounded memory.
const (
	// MaxCallsPerReply caps the tool calls of one reply; OpenAI's indices run
	// 0, 1, … so a call's index is also at most the count so far.
	MaxCallsPerReply = 64
	// maxReplyBytes caps content, reasoning, names and arguments together: a
	// reply goes back in the next request, whose body servers bound (jspark
	// serve: 32 MiB).
	maxReplyBytes = 32 << 20
	// maxResponseBytes caps one HTTP response body, SSE framing included
	// (go-openai reads a stream's lines with no length limit of its own).
	maxResponseBytes = 64 << 20
	// maxNameBytes caps a call's id and name (OpenAI's names are at most 64
	// characters).
	maxNameBytes = 256
)

// errInvalidStream marks a reply that broke the stream's contract.
var errInvalidStream = errors.New("invalid stream")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errInvalidStream, fmt.Sprintf(format, args...))
}

// assembler builds the assistant's message from stream deltas, checking every
// field of every delta before it grows anything.
type assembler struct {
	msg     openai.ChatCompletionMessage
	content []byte
	size    int // bytes of content, reasoning, ids, names and arguments so far
}

func newAssembler() *assembler {
	return &assembler{msg: openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant}}
}

func (a *assembler) grow(n int) error {
	if a.size += n; a.size > maxReplyBytes {
		return invalid("the reply is over %d bytes", maxReplyBytes)
	}
	return nil
}

// choice merges one choice of a chunk.
func (a *assembler) choice(ch openai.ChatCompletionStreamChoice) error {
	if ch.Index != 0 {
		return invalid("choice index %d: the request asked for one choice", ch.Index)
	}
	d := ch.Delta
	if d.Role != "" && d.Role != openai.ChatMessageRoleAssistant {
		return invalid("delta role %.40q: a reply is the assistant's", d.Role)
	}
	if err := a.grow(len(d.Content) + len(d.ReasoningContent)); err != nil {
		return err
	}
	a.content = append(a.content, d.Content...)
	// Sent back with the turn, so templates that keep reasoning (Qwen3)
	// render the prompt the model produced and the prefix cache holds.
	a.msg.ReasoningContent += d.ReasoningContent
	for _, tc := range d.ToolCalls {
		if err := a.call(tc); err != nil {
			return err
		}
	}
	return nil
}

// call merges one tool-call delta: a new call at index len(calls), or more of
// an existing one.
func (a *assembler) call(tc openai.ToolCall) error {
	calls := a.msg.ToolCalls
	i := len(calls)
	switch {
	case tc.Index != nil:
		i = *tc.Index
	case tc.ID == "" && tc.Function.Name == "" && len(calls) > 0:
		i = len(calls) - 1 // no index and nothing new: more of the last call
	}
	switch {
	case i < 0 || i > len(calls):
		return invalid("tool call index %d: the reply has %d calls so far (indices run 0, 1, …)", i, len(calls))
	case i == MaxCallsPerReply:
		return invalid("more than %d tool calls in one reply", MaxCallsPerReply)
	case tc.Type != "" && tc.Type != openai.ToolTypeFunction:
		return invalid("tool call %d has type %.40q, not function", i, tc.Type)
	case len(tc.ID) > maxNameBytes:
		return invalid("tool call %d: its id is over %d bytes", i, maxNameBytes)
	}
	if err := a.grow(len(tc.ID) + len(tc.Function.Name) + len(tc.Function.Arguments)); err != nil {
		return err
	}
	if i == len(calls) {
		a.msg.ToolCalls = append(calls, openai.ToolCall{Type: openai.ToolTypeFunction})
	}
	c := &a.msg.ToolCalls[i]
	if tc.ID != "" {
		c.ID = tc.ID
	}
	if c.Function.Name += tc.Function.Name; len(c.Function.Name) > maxNameBytes {
		return invalid("tool call %d: its name is over %d bytes", i, maxNameBytes)
	}
	c.Function.Arguments += tc.Function.Arguments
	return nil
}

// usage checks a chunk's usage before it is counted.
func checkUsage(u *openai.Usage) error {
	cached := 0
	if d := u.PromptTokensDetails; d != nil {
		cached = d.CachedTokens
	}
	if u.PromptTokens < 0 || u.CompletionTokens < 0 || cached < 0 || cached > u.PromptTokens {
		return invalid("usage has prompt %d, completion %d, cached %d tokens", u.PromptTokens, u.CompletionTokens, cached)
	}
	return nil
}

// message is the assembled reply, every call named.
func (a *assembler) message(turn int) openai.ChatCompletionMessage {
	a.msg.Content = string(a.content)
	for i := range a.msg.ToolCalls {
		if a.msg.ToolCalls[i].ID == "" {
			a.msg.ToolCalls[i].ID = fmt.Sprintf("call_%d_%d", turn, i)
		}
	}
	return a.msg
}

// boundedBody fails a body past its bound instead of letting a reader
// buffer it, or (io.LimitReader's way) end it quietly short.
type boundedBody struct {
	io.ReadCloser
	left int64
	err  error
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, err := b.ReadCloser.Read(one[:]); n == 0 && err != nil {
			return 0, err // the body ended exactly at the bound
		}
		return 0, b.err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// bounded is r failing with err past n bytes.
func bounded(r io.ReadCloser, n int64, err error) io.ReadCloser {
	return &boundedBody{ReadCloser: r, left: n, err: err}
}

func bound(resp *http.Response) *http.Response {
	if resp != nil && resp.Body != nil {
		resp.Body = bounded(resp.Body, maxResponseBytes, invalid("the response is over %d bytes", maxResponseBytes))
	}
	return resp
}
