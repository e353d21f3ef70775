package server

import (
	"errors"
	"strings"

	"jspark/backend/chat"
)

// responseBuilder turns a job's deltas into Responses API output items
// (reasoning, message, function_call), one open at a time, and, when
// streaming, into the API's events: each item is added, receives its text
// or arguments as deltas, and is done before the next one is added.
type responseBuilder struct {
	id      string
	created int64
	model   string
	req     *ResponsesRequest
	tools   *responseTools // splits a flattened namespace function's name
	sse     *sse           // nil: not streaming
	seq     int            // the next event's sequence_number
	items   []map[string]any
	open    *openItem
}

// openItem is the output item being produced.
type openItem struct {
	kind         string // reasoning, message or function_call
	id           string
	callID, name string
	namespace    string          // of a namespaced function
	text         strings.Builder // reasoning or message text, or arguments
}

// event sends one streamed event; without a stream it does nothing.
func (b *responseBuilder) event(typ string, fields map[string]any) error {
	if b.sse == nil {
		return nil
	}
	fields["type"] = typ
	fields["sequence_number"] = b.seq
	b.seq++
	return b.sse.event(typ, fields)
}

// start opens the stream once the engine has accepted the request.
func (b *responseBuilder) start() error {
	resp := b.response(nil)
	if err := b.event("response.created", map[string]any{"response": resp}); err != nil {
		return err
	}
	return b.event("response.in_progress", map[string]any{"response": resp})
}

// add takes one delta: reasoning, then content, then calls, in the order
// the splitter produces them.
func (b *responseBuilder) add(d chat.Delta) error {
	if d.Reasoning != "" {
		if err := b.text("reasoning", "rs_", "response.reasoning_text.delta", d.Reasoning); err != nil {
			return err
		}
	}
	if d.Content != "" {
		if err := b.text("message", "msg_", "response.output_text.delta", d.Content); err != nil {
			return err
		}
	}
	for _, c := range d.Calls {
		if c.Name != "" {
			n := b.tools.split(c.Name)
			if err := b.begin(&openItem{kind: "function_call", id: newID("fc_"), callID: c.ID, name: n.name, namespace: n.namespace}); err != nil {
				return err
			}
			continue
		}
		if b.open == nil || b.open.kind != "function_call" {
			continue // arguments of a call that was never opened: nothing to attach them to
		}
		b.open.text.WriteString(c.Arguments)
		if err := b.event("response.function_call_arguments.delta", map[string]any{
			"item_id": b.open.id, "output_index": len(b.items), "delta": c.Arguments}); err != nil {
			return err
		}
	}
	return nil
}

// text appends to the open item of kind, opening one if needed.
func (b *responseBuilder) text(kind, prefix, typ, delta string) error {
	if b.open == nil || b.open.kind != kind {
		if err := b.begin(&openItem{kind: kind, id: newID(prefix)}); err != nil {
			return err
		}
	}
	b.open.text.WriteString(delta)
	fields := map[string]any{"item_id": b.open.id, "output_index": len(b.items), "content_index": 0, "delta": delta}
	if kind == "message" {
		fields["logprobs"] = []any{}
	}
	return b.event(typ, fields)
}

// begin completes the open item and opens it.
func (b *responseBuilder) begin(it *openItem) error {
	if err := b.end("completed"); err != nil {
		return err
	}
	b.open = it
	if err := b.event("response.output_item.added", map[string]any{"output_index": len(b.items), "item": it.item("in_progress")}); err != nil {
		return err
	}
	if it.kind == "message" {
		return b.event("response.content_part.added", map[string]any{
			"item_id": it.id, "output_index": len(b.items), "content_index": 0, "part": outputText("")})
	}
	return nil
}

// end closes the open item, if any, with status: completed, or incomplete
// for the last item of a response that max_output_tokens cut.
func (b *responseBuilder) end(status string) error {
	it := b.open
	if it == nil {
		return nil
	}
	b.open = nil
	idx := len(b.items)
	done := it.item(status)
	b.items = append(b.items, done)
	var err error
	switch it.kind {
	case "message":
		err = errors.Join(
			b.event("response.output_text.done", map[string]any{"item_id": it.id, "output_index": idx, "content_index": 0, "text": it.text.String(), "logprobs": []any{}}),
			b.event("response.content_part.done", map[string]any{"item_id": it.id, "output_index": idx, "content_index": 0, "part": outputText(it.text.String())}))
	case "reasoning":
		err = b.event("response.reasoning_text.done", map[string]any{"item_id": it.id, "output_index": idx, "content_index": 0, "text": it.text.String()})
	case "function_call":
		err = b.event("response.function_call_arguments.done", map[string]any{"item_id": it.id, "output_index": idx, "name": it.name, "arguments": it.text.String()})
	}
	return errors.Join(err, b.event("response.output_item.done", map[string]any{"output_index": idx, "item": done}))
}

func outputText(s string) map[string]any {
	return map[string]any{"type": "output_text", "text": s, "annotations": []any{}}
}

// item is the item's object in the API's shape, with status (in_progress
// when added, completed or incomplete when done; reasoning items carry
// none).
func (it *openItem) item(status string) map[string]any {
	done := status != "in_progress"
	m := map[string]any{"type": it.kind, "id": it.id}
	switch it.kind {
	case "message":
		content := []any{}
		if done {
			content = append(content, outputText(it.text.String()))
		}
		m["status"], m["role"], m["content"] = status, "assistant", content
	case "reasoning":
		content := []any{}
		if done {
			content = append(content, map[string]any{"type": "reasoning_text", "text": it.text.String()})
		}
		m["summary"], m["content"] = []any{}, content
	case "function_call":
		m["status"], m["call_id"], m["name"], m["arguments"] = status, it.callID, it.name, it.text.String()
		if it.namespace != "" {
			m["namespace"] = it.namespace
		}
	}
	return m
}

// response is the response object: in progress (res nil), completed, or
// incomplete when max_output_tokens cut it.
func (b *responseBuilder) response(res *result) map[string]any {
	r := b.req
	tools := []any{}
	for _, t := range r.Tools {
		tools = append(tools, t)
	}
	var toolChoice any = "auto"
	if len(r.ToolChoice) > 0 {
		toolChoice = r.ToolChoice
	}
	format := any(map[string]any{"type": "text"})
	if r.Text != nil && r.Text.Format != nil {
		format = r.Text.Format
	}
	m := map[string]any{
		"id": b.id, "object": "response", "created_at": b.created, "model": b.model,
		"status": "in_progress", "output": b.items, "error": nil, "incomplete_details": nil, "usage": nil,
		"instructions": nil, "max_output_tokens": r.MaxOutputTokens, "tools": tools, "tool_choice": toolChoice,
		"parallel_tool_calls": r.ParallelToolCalls == nil || *r.ParallelToolCalls,
		"temperature":         orOne(r.Temperature), "top_p": orOne(r.TopP), "text": map[string]any{"format": format},
		"store": false, "metadata": map[string]any{}, "previous_response_id": nil, "background": false, "truncation": "disabled",
	}
	if b.items == nil {
		m["output"] = []any{}
	}
	if r.Instructions != "" {
		m["instructions"] = r.Instructions
	}
	if res == nil {
		return m
	}
	m["status"] = "completed"
	if res.finish == "length" {
		m["status"], m["incomplete_details"] = "incomplete", map[string]any{"reason": "max_output_tokens"}
	}
	u := res.usage
	m["usage"] = map[string]any{
		"input_tokens": u.PromptTokens, "input_tokens_details": map[string]any{"cached_tokens": u.CachedTokens},
		"output_tokens": u.CompletionTokens, "total_tokens": u.PromptTokens + u.CompletionTokens,
		"jspark": usageOf(u).Jspark,
	}
	return m
}

func orOne(x *float32) float32 {
	if x == nil {
		return 1
	}
	return *x
}

// finish closes the last item and returns the final response object.
func (b *responseBuilder) finish(res *result) (map[string]any, error) {
	status := "completed"
	if res.finish == "length" {
		status = "incomplete"
	}
	err := b.end(status)
	return b.response(res), err
}

// fail ends a stream that broke after it started.
func (b *responseBuilder) fail(err error) {
	b.end("incomplete")
	resp := b.response(nil)
	resp["status"] = "failed"
	code := "server_error"
	var ae *APIError
	if errors.As(err, &ae) && ae.Code != nil {
		code = *ae.Code
	}
	resp["error"] = map[string]any{"code": code, "message": err.Error()}
	b.event("response.failed", map[string]any{"response": resp})
}
