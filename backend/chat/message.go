// Package chat turns OpenAI-style messages and tools into prompt text (chat
// templates) and model output back into content and tool calls.
package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Message is one chat message as the OpenAI API sends it.
type Message struct {
	Role       string     `json:"role"`
	Content    Content    `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// ReasoningContent is an assistant turn's reasoning, as this server and
	// vLLM return it; templates that keep reasoning in history (Qwen3) use it.
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

// Vars are a request's chat_template_kwargs: extra variables for the
// model's template (enable_thinking, for one), as JSON values.
type Vars map[string]json.RawMessage

// Content is a message's content: a string or an array of parts, of which
// text parts are kept.
type Content string

// UnmarshalJSON accepts a string, null, or [{"type":"text","text":…}, …]
// (input_text and output_text parts too, as the Responses API writes them).
func (c *Content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		*c = ""
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = Content(s)
		return nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return fmt.Errorf("content must be a string or an array of parts")
	}
	var sb strings.Builder
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text", "output_text": // chat's parts and the Responses API's
		default:
			return fmt.Errorf("content part of type %q is not supported (text only)", p.Type)
		}
		sb.WriteString(p.Text)
	}
	*c = Content(sb.String())
	return nil
}

// ToolCall is a function call made by the assistant.
type ToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names a function and carries its JSON arguments as text.
type FunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"` // always sent, "" before any arrives, as OpenAI does
}

// Tool is a function the model may call.
type Tool struct {
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Function describes a callable function; Parameters is a JSON schema.
type Function struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      bool            `json:"strict,omitempty"`
}

// CanonicalJSON re-encodes JSON with sorted object keys and no spaces, so
// that the same value always renders to the same bytes.
func CanonicalJSON(raw []byte) (string, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "{}", nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}
