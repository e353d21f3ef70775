package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"jspark/agent/target"
	"jspark/backend/usage"
	"net/http"
	"strings"
	"time"
)

// Record is one request as the bench saw it. Sent and End are seconds from
// the bench's start; TTFT is seconds from Sent to the first output event
// (content, reasoning or a tool-call delta), -1 when none came; Gaps are the
// seconds between successive output events (an event is one streamed chunk
// with output, which may hold several tokens).
type Record struct {
	Target string `json:"target"`
	Screen string `json:"screen"`
	Case   string `json:"case"`           // the table row it feeds, e.g. "4K exact repeat"
	Trial  int    `json:"trial"`          // 1..N; 0 for first-use and warm-up requests
	Role   string `json:"role,omitempty"` // incumbent, arrival, long, short, first, repeat …
	Salt   string `json:"salt,omitempty"`

	Sent             float64   `json:"sent"`
	TTFT             float64   `json:"ttft"`
	Gaps             []float64 `json:"gaps"`
	End              float64   `json:"end"`
	PromptTokens     int       `json:"prompt_tokens"`
	CompletionTokens int       `json:"completion_tokens"`
	CachedTokens     int       `json:"cached_tokens"`
	Finish           string    `json:"finish_reason,omitempty"`
	Error            string    `json:"error,omitempty"`
	Cut              bool      `json:"cut,omitempty"` // the bench closed the stream on purpose

	// Timing is usage.jspark.timing, where jspark serve reports it.
	Timing *usage.Timing `json:"timing,omitempty"`

	Text     string     `json:"text,omitempty"`
	Pieces   []string   `json:"pieces,omitempty"`    // per-token text from logprobs, where asked
	TokenIDs []int      `json:"token_ids,omitempty"` // where the server returns them
	Calls    []ToolCall `json:"tool_calls,omitempty"`
}

// ToolCall is one streamed tool call, assembled.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Duration is the whole HTTP request, send to end of stream.
func (r *Record) Duration() float64 { return r.End - r.Sent }

// Events are the absolute times (seconds from the bench's start) of the
// record's output events.
func (r *Record) Events() []float64 {
	if r.TTFT < 0 {
		return nil
	}
	t := r.Sent + r.TTFT
	out := []float64{t}
	for _, g := range r.Gaps {
		t += g
		out = append(out, t)
	}
	return out
}

// OK is a request that produced output and no error.
func (r *Record) OK() bool { return r.Error == "" && r.TTFT >= 0 }

// client streams requests to one OpenAI-compatible server and timestamps
// every server-sent event as it is read. NOTE: the bench reads the stream
// itself, as vLLM's bench serve does, rather than through an SDK: it needs
// each event's arrival time and fields the SDKs drop or rewrite (an explicit
// temperature 0, ignore_eos, logprob pieces, returned token ids).
type client struct {
	url, key, model string
	http            *http.Client
	zero            time.Time
}

// maxLine bounds one server-sent event line.
const maxLine = 16 << 20

// stream posts body to path (under the base URL) with streaming and usage
// on, fills rec and calls onEvent at each output event. A cancelled ctx
// ends the stream and marks the record cut; other failures land in
// rec.Error and are returned.
func (c *client) stream(ctx context.Context, path string, body map[string]any, rec *Record, onEvent func(time.Time)) error {
	body["stream"] = true
	body["stream_options"] = map[string]any{"include_usage": true}
	if c.model != "" {
		body["model"] = c.model
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return c.post(ctx, path, b, nil, rec, onEvent)
}

// post sends body, as it is, to path with the extra headers, and reads the
// answer into rec as stream does: server-sent events, or one JSON
// response when the body did not ask for a stream (a replayed request).
func (c *client) post(ctx context.Context, path string, body []byte, header http.Header, rec *Record, onEvent func(time.Time)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	// Replayable: Go resends a request whose reused keep-alive connection
	// the server had closed before answering (llama-server closes one
	// after 5 requests; the bench lost requests to EOF), which it does
	// only for requests marked idempotent. The server saw nothing of the
	// first try.
	req.Header.Set("Idempotency-Key", target.IdempotencyKey())
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	rec.TTFT = -1
	rec.Gaps = []float64{}
	sent := time.Now()
	rec.Sent = sent.Sub(c.zero).Seconds()
	defer func() { rec.End = time.Since(c.zero).Seconds() }()
	resp, err := c.http.Do(req)
	if err != nil {
		return c.fail(ctx, rec, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return c.fail(ctx, rec, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(msg))))
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return c.whole(ctx, resp.Body, sent, rec, onEvent)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	var last time.Time
	var text strings.Builder
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			break
		}
		now := time.Now()
		var ch chunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return c.fail(ctx, rec, fmt.Errorf("event %q: %w", data, err))
		}
		if msg, failed := ch.failure(); failed {
			return c.fail(ctx, rec, errors.New(msg))
		}
		if ch.apply(rec, &text) {
			if rec.TTFT < 0 {
				rec.TTFT = now.Sub(sent).Seconds()
			} else {
				rec.Gaps = append(rec.Gaps, now.Sub(last).Seconds())
			}
			last = now
			if onEvent != nil {
				onEvent(now)
			}
		}
	}
	rec.Text = text.String()
	if err := sc.Err(); err != nil {
		return c.fail(ctx, rec, err)
	}
	return nil
}

// maxWhole bounds a response that is not a stream.
const maxWhole = 64 << 20

// whole reads a response that is one JSON body: its output is one event,
// at its arrival.
func (c *client) whole(ctx context.Context, body io.Reader, sent time.Time, rec *Record, onEvent func(time.Time)) error {
	b, err := io.ReadAll(io.LimitReader(body, maxWhole+1))
	if err == nil && len(b) > maxWhole {
		err = fmt.Errorf("the response is over %d bytes", maxWhole)
	}
	if err != nil {
		return c.fail(ctx, rec, err)
	}
	now := time.Now()
	var ch chunk
	if err := json.Unmarshal(b, &ch); err != nil {
		return c.fail(ctx, rec, fmt.Errorf("response %.200q: %w", b, err))
	}
	if msg, failed := ch.failure(); failed {
		return c.fail(ctx, rec, errors.New(msg))
	}
	var text strings.Builder
	// A whole Responses API answer has its output in items the bench does
	// not read: its usage says whether there was any.
	if ch.apply(rec, &text) || rec.CompletionTokens > 0 {
		rec.TTFT = now.Sub(sent).Seconds()
		if onEvent != nil {
			onEvent(now)
		}
	}
	rec.Text = text.String()
	return nil
}

func (c *client) fail(ctx context.Context, rec *Record, err error) error {
	if ctx.Err() != nil {
		rec.Cut = true
		return nil
	}
	rec.Error = err.Error()
	return err
}

// chunk is one streamed chat or completions event, or a whole response:
// the fields the bench reads, from OpenAI's shapes (chat, completions and
// the Responses API's events) and their common extensions (vLLM's
// reasoning fields and token_ids).
type chunk struct {
	Choices []struct {
		Delta        delta   `json:"delta"`
		Message      *delta  `json:"message"` // a whole chat response's
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
		Logprobs     *struct {
			Tokens  []string `json:"tokens"` // completions
			Content []struct {
				Token string `json:"token"`
			} `json:"content"` // chat
		} `json:"logprobs"`
		TokenIDs []int `json:"token_ids"`
	} `json:"choices"`
	Usage *wireUsage `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`

	// A Responses API event: its type, the text of a *.delta event, an
	// error event's message and the finished response's usage.
	Type     string          `json:"type"`
	Delta    json.RawMessage `json:"delta"`
	Message  string          `json:"message"`
	Response *struct {
		Usage *wireUsage `json:"usage"`
	} `json:"response"`
}

// delta is a chat chunk's delta, or a whole chat response's message.
type delta struct {
	Content          string `json:"content"`
	ReasoningContent string `json:"reasoning_content"`
	Reasoning        string `json:"reasoning"`
	ToolCalls        []struct {
		Index    *int   `json:"index"`
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// wireUsage is chat's and completions' usage, or the Responses API's.
type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	InputTokens        int `json:"input_tokens"`
	OutputTokens       int `json:"output_tokens"`
	InputTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	Jspark *struct {
		Timing *usage.Timing `json:"timing"`
	} `json:"jspark"`
}

// failure is the error a chunk reports, if any.
func (ch *chunk) failure() (string, bool) {
	switch {
	case ch.Error != nil:
		return ch.Error.Message, true
	case ch.Type == "error":
		return ch.Message, true
	case ch.Type == "response.failed":
		return "the response failed", true
	}
	return "", false
}

// count folds a usage into rec.
func (u *wireUsage) count(rec *Record) {
	rec.PromptTokens, rec.CompletionTokens = u.PromptTokens+u.InputTokens, u.CompletionTokens+u.OutputTokens
	if d := u.PromptTokensDetails; d != nil {
		rec.CachedTokens = d.CachedTokens
	}
	if d := u.InputTokensDetails; d != nil {
		rec.CachedTokens = d.CachedTokens
	}
	if j := u.Jspark; j != nil && j.Timing != nil {
		rec.Timing = j.Timing
	}
}

// apply folds the chunk into rec and says whether it carried output.
func (ch *chunk) apply(rec *Record, text *strings.Builder) bool {
	if ch.Usage != nil {
		ch.Usage.count(rec)
	}
	out := false
	if ch.Type != "" { // a Responses API event
		if r := ch.Response; r != nil && r.Usage != nil {
			r.Usage.count(rec)
		}
		var d string
		if strings.HasSuffix(ch.Type, ".delta") && json.Unmarshal(ch.Delta, &d) == nil && d != "" {
			out = true
			if ch.Type == "response.output_text.delta" {
				text.WriteString(d)
			}
		}
		return out
	}
	for _, c := range ch.Choices {
		d := c.Delta
		if c.Message != nil {
			d = *c.Message
		}
		if d.Content != "" || d.ReasoningContent != "" || d.Reasoning != "" || c.Text != "" || len(d.ToolCalls) > 0 {
			out = true
		}
		text.WriteString(d.Content)
		text.WriteString(c.Text)
		for _, tc := range d.ToolCalls {
			i := len(rec.Calls)
			if tc.Index != nil {
				i = *tc.Index
			}
			if i < 0 || i > 64 {
				continue
			}
			for len(rec.Calls) <= i {
				rec.Calls = append(rec.Calls, ToolCall{})
			}
			call := &rec.Calls[i]
			if tc.ID != "" {
				call.ID = tc.ID
			}
			call.Name += tc.Function.Name
			call.Arguments += tc.Function.Arguments
		}
		if lp := c.Logprobs; lp != nil {
			rec.Pieces = append(rec.Pieces, lp.Tokens...)
			for _, t := range lp.Content {
				rec.Pieces = append(rec.Pieces, t.Token)
			}
		}
		rec.TokenIDs = append(rec.TokenIDs, c.TokenIDs...)
		if c.FinishReason != nil && *c.FinishReason != "" {
			rec.Finish = *c.FinishReason
		}
	}
	return out
}
