package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"jspark/backend/chat"
)

// ResponsesRequest is the body of POST /v1/responses, OpenAI's Responses API
// (what Codex CLI speaks). It is served by turning it into the equivalent
// chat request, so prompts, tools, constraints and the prefix cache behave
// exactly as for /v1/chat/completions.
//
// NOTE: nothing is stored: store is accepted and ignored, and
// previous_response_id is refused; clients send the whole input each turn,
// as Codex does (store false).
type ResponsesRequest struct {
	Model             string            `json:"model"`
	Instructions      string            `json:"instructions"`
	Input             json.RawMessage   `json:"input"`
	Tools             []json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls *bool             `json:"parallel_tool_calls"`
	MaxOutputTokens   *int              `json:"max_output_tokens"`
	Stream            bool              `json:"stream"`
	Sampling
	Text *struct {
		Format *struct {
			Type string `json:"type"`
			JSONSchemaFormat
		} `json:"format"`
	} `json:"text"`
	PreviousResponseID string          `json:"previous_response_id"`
	Conversation       json.RawMessage `json:"conversation"`
	Background         bool            `json:"background"`
	ChatTemplateKwargs chat.Vars       `json:"chat_template_kwargs"`
	CacheSalt          string          `json:"cache_salt"`
	User               string          `json:"user"`
}

// responseInput is one item of input: a message, a function call, its
// output, or reasoning. A message may come without a type.
type responseInput struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Namespace string          `json:"namespace"` // of a namespaced function's call (Codex sends it back)
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    chat.Content    `json:"output"`
	Summary   []responsePart  `json:"summary"`
}

// responsePart is a text part of a message or reasoning item.
type responsePart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// chatRequest is the chat request that r asks for, and what became of its
// tools.
func (r *ResponsesRequest) chatRequest() (*ChatRequest, *responseTools, error) {
	if r.PreviousResponseID != "" {
		return nil, nil, badRequest("previous_response_id", "previous_response_id needs stored responses, which this server does not keep; send the whole conversation as input")
	}
	if c := bytes.TrimSpace(r.Conversation); len(c) > 0 && string(c) != "null" {
		return nil, nil, badRequest("conversation", "conversations need stored state, which this server does not keep; send the whole conversation as input")
	}
	if r.Background {
		return nil, nil, badRequest("background", "background responses are not supported")
	}
	cr := &ChatRequest{Model: r.Model, ParallelToolCalls: r.ParallelToolCalls, MaxCompletionTokens: r.MaxOutputTokens,
		Sampling: r.Sampling, ChatTemplateKwargs: r.ChatTemplateKwargs, CacheSalt: r.CacheSalt, limitParam: "max_output_tokens"}
	if r.Instructions != "" {
		cr.Messages = append(cr.Messages, chat.Message{Role: "system", Content: chat.Content(r.Instructions)})
	}
	msgs, err := inputMessages(r.Input)
	if err != nil {
		return nil, nil, err
	}
	cr.Messages = append(cr.Messages, msgs...)
	rt, err := translateTools(r.Tools)
	if err != nil {
		return nil, nil, err
	}
	cr.Tools = rt.tools
	tc, err := chatToolChoice(r.ToolChoice)
	if err != nil {
		return nil, nil, err
	}
	cr.ToolChoice = tc
	if r.Text != nil && r.Text.Format != nil {
		f := r.Text.Format
		cr.ResponseFormat = &ResponseFormat{Type: f.Type}
		if f.Type == "json_schema" {
			js := f.JSONSchemaFormat
			cr.ResponseFormat.JSONSchema = &js
		}
	}
	return cr, &rt, nil
}

// chatToolChoice turns the Responses API's tool_choice ("auto", "none",
// "required" or {"type":"function","name":…}, with the namespace of a
// namespaced function) into chat's.
func chatToolChoice(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return raw, nil
	}
	var named struct {
		Type      string `json:"type"`
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	}
	if err := json.Unmarshal(raw, &named); err != nil || named.Type != "function" || named.Name == "" {
		return nil, badRequest("tool_choice", `tool_choice must be "auto", "none", "required" or {"type":"function","name":…}`)
	}
	name := named.Name
	if named.Namespace != "" {
		name = flatName(named.Namespace, name)
	}
	b, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": name}})
	return b, nil
}

// inputMessages turns input (a string, or a list of items) into chat
// messages. An assistant turn arrives as several items (reasoning, a
// message, function calls); they join into one assistant message, as the
// chat template expects it.
func inputMessages(raw json.RawMessage) ([]chat.Message, error) {
	raw = bytes.TrimSpace(raw)
	var text string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &text) == nil {
		return []chat.Message{{Role: "user", Content: chat.Content(text)}}, nil
	}
	var items []responseInput
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, badRequest("input", "input must be a string or a list of items: %v", err)
	}
	var msgs []chat.Message
	var turn *chat.Message // the assistant message being assembled
	assistant := func() *chat.Message {
		if turn == nil {
			msgs = append(msgs, chat.Message{Role: "assistant"})
			turn = &msgs[len(msgs)-1]
		}
		return turn
	}
	// A turn's reasoning and text come before its calls: another of either
	// after text or calls starts the next turn.
	nextTurn := func() {
		if turn != nil && (turn.Content != "" || len(turn.ToolCalls) > 0) {
			turn = nil
		}
	}
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		switch it.Type {
		case "message", "":
			var c chat.Content
			if err := json.Unmarshal(it.Content, &c); err != nil {
				return nil, badRequest(param, "%s.content: %v", param, err)
			}
			switch it.Role {
			case "assistant":
				nextTurn()
				assistant().Content = c
				continue
			case "user", "system", "developer":
				msgs = append(msgs, chat.Message{Role: it.Role, Content: c})
			default:
				return nil, badRequest(param, "%s.role %q is not user, system, developer or assistant", param, it.Role)
			}
		case "reasoning":
			var parts []responsePart
			if len(it.Content) > 0 && string(it.Content) != "null" {
				if err := json.Unmarshal(it.Content, &parts); err != nil {
					return nil, badRequest(param, "%s.content: %v", param, err)
				}
			}
			if len(parts) == 0 {
				parts = it.Summary
			}
			nextTurn()
			m := assistant()
			for _, p := range parts {
				m.ReasoningContent += p.Text
			}
			continue
		case "function_call":
			if it.CallID == "" || it.Name == "" {
				return nil, badRequest(param, "%s: a function_call needs call_id and name", param)
			}
			if err := checkNested(param+".arguments", it.Arguments); err != nil {
				return nil, err
			}
			name := it.Name
			if it.Namespace != "" { // the name the model was offered and wrote
				name = flatName(it.Namespace, name)
			}
			m := assistant()
			m.ToolCalls = append(m.ToolCalls, chat.ToolCall{ID: it.CallID, Type: "function",
				Function: chat.FunctionCall{Name: name, Arguments: it.Arguments}})
			continue
		case "function_call_output":
			if it.CallID == "" {
				return nil, badRequest(param, "%s: a function_call_output needs call_id", param)
			}
			msgs = append(msgs, chat.Message{Role: "tool", ToolCallID: it.CallID, Content: it.Output})
		default:
			return nil, badRequest(param, "%s.type %q is not supported (message, reasoning, function_call, function_call_output)", param, it.Type)
		}
		turn = nil
	}
	return msgs, nil
}

func (s *Server) responses(c echo.Context) error {
	var r ResponsesRequest
	if err := decode(c, &r); err != nil {
		return err
	}
	cr, rt, err := r.chatRequest()
	if err != nil {
		return err
	}
	if len(rt.skipped) > 0 {
		fmt.Fprintf(s.opt.Log, "jspark serve: responses: tools not offered to the model (no executor here): %s\n", strings.Join(rt.skipped, ", "))
	}
	j, err := s.prepare(cr)
	if err != nil {
		return err
	}
	j.req.Session = sessionOf(c, r.User)
	b := &responseBuilder{id: newID("resp_"), created: now(), req: &r, tools: rt, model: s.opt.ServedName}
	if !r.Stream {
		return s.run(c.Request().Context(), j, hooks{
			output: func(o output) error { return b.add(o.delta) },
			finished: func(res result, err error) error {
				if err != nil {
					return err
				}
				resp, _ := b.finish(&res)
				return c.JSON(http.StatusOK, resp)
			},
		})
	}
	b.sse = newSSE(c)
	return s.run(c.Request().Context(), j, hooks{
		accepted: b.start,
		output:   func(o output) error { return b.add(o.delta) },
		finished: func(res result, err error) error {
			if err != nil {
				if !b.sse.started {
					return err
				}
				b.fail(err)
				return nil
			}
			if resp, err := b.finish(&res); err == nil {
				b.event("response."+resp["status"].(string), map[string]any{"response": resp})
			}
			return nil
		},
	})
}
