package server

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"jspark/backend/chat"
	"jspark/backend/engine"
	"jspark/backend/grammar"
	"jspark/backend/usage"
)

// ChatRequest is the body of POST /v1/chat/completions.
type ChatRequest struct {
	Model               string          `json:"model"`
	Messages            []chat.Message  `json:"messages"`
	Stream              bool            `json:"stream"`
	StreamOptions       *StreamOptions  `json:"stream_options"`
	Tools               []chat.Tool     `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
	ResponseFormat      *ResponseFormat `json:"response_format"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Sampling
	Stop        json.RawMessage `json:"stop"`
	Logprobs    bool            `json:"logprobs"`
	TopLogprobs *int            `json:"top_logprobs"`
	N           *int            `json:"n"`
	User        string          `json:"user"`
	CacheSalt   string          `json:"cache_salt"`
	// ChatTemplateKwargs are extra variables for the model's chat template
	// (vLLM's and llama.cpp's field), e.g. {"enable_thinking": false}.
	ChatTemplateKwargs chat.Vars `json:"chat_template_kwargs"`
	// limitParam names the output limit in errors when the request came
	// in another shape (the Responses API's max_output_tokens).
	limitParam string
}

// Sampling are the sampling fields shared by both completion APIs.
type Sampling struct {
	Temperature       *float32 `json:"temperature"`
	TopP              *float32 `json:"top_p"`
	TopK              *int     `json:"top_k"`
	MinP              *float32 `json:"min_p"`
	Seed              *uint64  `json:"seed"`
	RepetitionPenalty *float32 `json:"repetition_penalty"`
	FrequencyPenalty  *float32 `json:"frequency_penalty"`
	PresencePenalty   *float32 `json:"presence_penalty"`
	// LogitBias maps token ids (as strings, OpenAI's shape) to a bias in
	// [-100, 100] added to their logits.
	LogitBias map[string]float32 `json:"logit_bias"`
	IgnoreEOS bool               `json:"ignore_eos"`
}

// StreamOptions is stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// ResponseFormat is response_format.
type ResponseFormat struct {
	Type       string            `json:"type"`
	JSONSchema *JSONSchemaFormat `json:"json_schema"`
}

// JSONSchemaFormat names the JSON schema an output must follow.
type JSONSchemaFormat struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict"`
}

// toolChoice reads tool_choice: "" (auto), "none", "required" or a name.
func toolChoice(raw json.RawMessage, tools []chat.Tool) (mode, name string, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "auto", "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto", "none", "required":
			if s == "required" && len(tools) == 0 {
				return "", "", badRequest("tool_choice", "tool_choice \"required\" needs tools")
			}
			return s, "", nil
		}
		return "", "", badRequest("tool_choice", "tool_choice %q is not auto, none or required", s)
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &named); err != nil || named.Function.Name == "" {
		return "", "", badRequest("tool_choice", "tool_choice must be a string or {\"type\":\"function\",\"function\":{\"name\":…}}")
	}
	for _, t := range tools {
		if t.Function.Name == named.Function.Name {
			return "named", named.Function.Name, nil
		}
	}
	return "", "", badRequest("tool_choice", "tool_choice names %q, which is not among the tools", named.Function.Name)
}

// prepare turns a chat request into an engine job.
func (s *Server) prepare(r *ChatRequest) (job, error) {
	maxTok, param := r.MaxCompletionTokens, cmp.Or(r.limitParam, "max_completion_tokens")
	if maxTok == nil {
		maxTok, param = r.MaxTokens, "max_tokens"
	}
	var logprobs *int // alternatives per token; nil: none
	if r.Logprobs {
		logprobs = cmp.Or(r.TopLogprobs, new(int))
	}
	j, err := s.check(generation{model: r.Model, n: r.N, maxTokens: maxTok, maxParam: param, sampling: r.Sampling, stop: r.Stop,
		logprobs: logprobs, logprobsParam: "top_logprobs"})
	if err != nil {
		return job{}, err
	}
	if len(r.Messages) == 0 {
		return job{}, badRequest("messages", "messages must not be empty")
	}
	if err := checkArguments(r.Messages); err != nil {
		return job{}, err
	}
	for i, t := range r.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return job{}, badRequest(fmt.Sprintf("tools[%d]", i), "tools[%d] must be {\"type\":\"function\",\"function\":{\"name\":…}}", i)
		}
	}
	mode, name, err := toolChoice(r.ToolChoice, r.Tools)
	if err != nil {
		return job{}, err
	}
	prompt, text, err := s.chatPrompt(r.Messages, r.Tools, true, r.ChatTemplateKwargs)
	if err != nil {
		return job{}, promptError(err)
	}
	j.parseTools, j.ids = len(r.Tools) > 0 && mode != "none", func(int) string { return newID("call_") }
	j.format, j.tools = s.format, r.Tools
	if r.ParallelToolCalls != nil && !*r.ParallelToolCalls {
		j.maxCalls = 1
	}
	j.req.Prompt, j.req.CacheSalt = prompt, r.CacheSalt
	if room := s.e.Options().MaxContext - len(prompt); maxTok == nil && room > 0 && s.opt.MaxTokensDefault > 0 {
		j.req.MaxTokens = min(s.opt.MaxTokensDefault, room)
	}
	var g *grammar.Grammar
	param = "response_format" // what a grammar error is about
	switch {
	case mode == "required" || mode == "named":
		param = "tools"
		var tools []grammar.Tool
		for _, t := range r.Tools {
			if mode == "required" || t.Function.Name == name {
				tools = append(tools, grammar.Tool{Name: t.Function.Name, Schema: t.Function.Parameters})
			}
		}
		// A forced call is one call unless the request asks for parallel
		// calls (llama.cpp's default for forced calls: a model that never
		// chooses to stop would chain calls up to max_tokens); with
		// parallel_tool_calls true, required makes one or more (where the
		// format writes more than one a turn), up to a bound that keeps the
		// output finite, and the model ends them. The calls are written in
		// the model's own syntax.
		calls := 1
		if mode == "required" && r.ParallelToolCalls != nil && *r.ParallelToolCalls {
			calls = grammar.DefaultMaxItems
		}
		g, err = grammar.ToolCalls(string(s.callFormat()), tools, calls)
		j.forced = true
	case r.ResponseFormat != nil && r.ResponseFormat.Type == "json_object":
		g = grammar.AnyJSON()
	case r.ResponseFormat != nil && r.ResponseFormat.Type == "json_schema":
		if r.ResponseFormat.JSONSchema == nil {
			return job{}, badRequest("response_format", "response_format json_schema needs json_schema.schema")
		}
		g, err = grammar.FromSchema(r.ResponseFormat.JSONSchema.Schema)
	case r.ResponseFormat != nil && r.ResponseFormat.Type != "text" && r.ResponseFormat.Type != "":
		return job{}, badRequest("response_format", "response_format type %q is not text, json_object or json_schema", r.ResponseFormat.Type)
	}
	if err != nil {
		return job{}, schemaError(param, err)
	}
	if g != nil {
		j.req.Constraint = g.NewConstraint(s.e.Model().Tok)
	}
	// A constrained output is the grammar's, never reasoning.
	if s.reasons() && g == nil {
		j.reasoning, j.openThink = true, chat.OpenThink(text)
	}
	return j, nil
}

// schemaError is a 400 for a schema the grammar compiler refused, naming
// the field it came from.
func schemaError(param string, err error) error {
	return badRequest(param, "%s: %v", param, err)
}

// ChatChoice, ChatResponse and ChatChunk follow OpenAI's shapes.
type ChatChoice struct {
	Index        int             `json:"index"`
	Message      *ChatMessage    `json:"message,omitempty"`
	Delta        *ChatMessage    `json:"delta,omitempty"`
	Logprobs     *ChoiceLogprobs `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

// ChatMessage is an assistant message or delta.
type ChatMessage struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content"`
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	ToolCalls        []chat.ToolCall `json:"tool_calls,omitempty"`
}

// ChoiceLogprobs holds per-token log-probabilities.
type ChoiceLogprobs struct {
	Content []LogprobEntry `json:"content"`
}

// Usage is the OpenAI usage object with cache details.
type Usage struct {
	PromptTokens        int           `json:"prompt_tokens"`
	CompletionTokens    int           `json:"completion_tokens"`
	TotalTokens         int           `json:"total_tokens"`
	PromptTokensDetails PromptDetails `json:"prompt_tokens_details"`
	Jspark              *usage.Jspark `json:"jspark,omitempty"`
}

// PromptDetails carries cached_tokens.
type PromptDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// sessionOf is the request's session key for the engine's retention: the
// X-Session-Id header (the runner's round/session), else the body's OpenAI
// user field, else none.
func sessionOf(c echo.Context, user string) string {
	return cmp.Or(c.Request().Header.Get("X-Session-Id"), user)
}

// usageOf is the engine's usage as the wire carries it (usage.jspark is
// the runner's contract: the engine's names stay the engine's).
func usageOf(u engine.Usage) *Usage {
	t := u.Timing
	j := &usage.Jspark{CommittedTokens: u.CommittedTokens, Preemptions: u.Preemptions, ReusedTokens: u.ReusedTokens, ComputedTokens: u.ComputedTokens,
		Timing: usage.Timing{QueuedSec: t.QueuedSec, PrefillSec: t.PrefillSec, DecodeSec: t.DecodeSec, PreemptedSec: t.PreemptedSec}, Session: u.Session}
	if d := u.Divergence; d != nil {
		j.Divergence = &usage.Divergence{Req: d.Req, Reason: d.Reason, Position: d.Position, Token: d.Token, Was: d.Was, Text: d.Text, WasText: d.WasText}
	}
	if c := u.Checkpoint; c != nil {
		j.Checkpoint = &usage.Checkpoint{Position: c.Position, Cached: c.Cached, Kind: c.Kind, Req: c.Req, At: c.At}
	}
	return &Usage{
		PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens,
		PromptTokensDetails: PromptDetails{CachedTokens: u.CachedTokens}, Jspark: j,
	}
}

// ChatResponse is a non-streamed chat completion.
type ChatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []ChatChoice `json:"choices"`
	Usage   *Usage       `json:"usage,omitempty"`
}

func (s *Server) chatCompletions(c echo.Context) error {
	var r ChatRequest
	if err := decode(c, &r); err != nil {
		return err
	}
	j, err := s.prepare(&r)
	if err != nil {
		return err
	}
	j.req.Session = sessionOf(c, r.User)
	id, created := newID("chatcmpl-"), now()
	if !r.Stream {
		var content, reasoning string
		var calls []chat.ToolCall
		var lps []LogprobEntry
		return s.run(c.Request().Context(), j, hooks{
			output: func(o output) error {
				content += o.delta.Content
				reasoning += o.delta.Reasoning
				calls = appendCalls(calls, o.delta.Calls)
				lps = append(lps, o.logprobs...)
				return nil
			},
			finished: func(res result, err error) error {
				if err != nil {
					return err
				}
				msg := &ChatMessage{Role: "assistant", ToolCalls: calls}
				if content != "" || len(calls) == 0 {
					msg.Content = &content
				}
				if reasoning != "" {
					msg.ReasoningContent = &reasoning
				}
				ch := ChatChoice{Message: msg, FinishReason: &res.finish}
				if r.Logprobs {
					ch.Logprobs = &ChoiceLogprobs{Content: lps}
				}
				return c.JSON(http.StatusOK, ChatResponse{ID: id, Object: "chat.completion", Created: created, Model: s.opt.ServedName,
					Choices: []ChatChoice{ch}, Usage: usageOf(res.usage)})
			},
		})
	}
	sse := newSSE(c)
	chunk := func(choices []ChatChoice, u *Usage) error {
		return sse.send(ChatResponse{ID: id, Object: "chat.completion.chunk", Created: created, Model: s.opt.ServedName, Choices: choices, Usage: u})
	}
	empty := ""
	return s.run(c.Request().Context(), j, hooks{
		accepted: func() error {
			return chunk([]ChatChoice{{Delta: &ChatMessage{Role: "assistant", Content: &empty}}}, nil)
		},
		output: func(o output) error {
			d := &ChatMessage{}
			if o.delta.Content != "" {
				d.Content = &o.delta.Content
			}
			if o.delta.Reasoning != "" {
				d.ReasoningContent = &o.delta.Reasoning
			}
			for _, cd := range o.delta.Calls {
				d.ToolCalls = append(d.ToolCalls, callDelta(cd))
			}
			ch := ChatChoice{Delta: d}
			if r.Logprobs {
				ch.Logprobs = &ChoiceLogprobs{Content: o.logprobs}
			}
			return chunk([]ChatChoice{ch}, nil)
		},
		finished: func(res result, err error) error {
			if err != nil {
				return sse.fail(err)
			}
			chunk([]ChatChoice{{Delta: &ChatMessage{}, FinishReason: &res.finish}}, nil)
			if r.StreamOptions != nil && r.StreamOptions.IncludeUsage {
				chunk([]ChatChoice{}, usageOf(res.usage))
			}
			sse.done()
			return nil
		},
	})
}

func callDelta(cd chat.CallDelta) chat.ToolCall {
	i := cd.Index
	return chat.ToolCall{Index: &i, ID: cd.ID, Type: cd.Type, Function: chat.FunctionCall{Name: cd.Name, Arguments: cd.Arguments}}
}

func appendCalls(calls []chat.ToolCall, ds []chat.CallDelta) []chat.ToolCall {
	for _, d := range ds {
		if d.Name != "" {
			calls = append(calls, chat.ToolCall{ID: d.ID, Type: "function", Function: chat.FunctionCall{Name: d.Name}})
		} else if d.Index < len(calls) {
			calls[d.Index].Function.Arguments += d.Arguments
		}
	}
	return calls
}
