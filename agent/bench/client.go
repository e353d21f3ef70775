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
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+path, bytes.NewReader(b))
	if err != nil {
		return err
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
		if ch.Error != nil {
			return c.fail(ctx, rec, errors.New(ch.Error.Message))
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

func (c *client) fail(ctx context.Context, rec *Record, err error) error {
	if ctx.Err() != nil {
		rec.Cut = true
		return nil
	}
	rec.Error = err.Error()
	return err
}

// chunk is one streamed chat or completions event: the fields the bench
// reads, from OpenAI's shape and its common extensions (vLLM's reasoning
// fields and token_ids).
type chunk struct {
	Choices []struct {
		Delta struct {
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
		} `json:"delta"`
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
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// apply folds the chunk into rec and says whether it carried output.
func (ch *chunk) apply(rec *Record, text *strings.Builder) bool {
	if u := ch.Usage; u != nil {
		rec.PromptTokens, rec.CompletionTokens = u.PromptTokens, u.CompletionTokens
		if u.PromptTokensDetails != nil {
			rec.CachedTokens = u.PromptTokensDetails.CachedTokens
		}
	}
	out := false
	for _, c := range ch.Choices {
		d := c.Delta
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
