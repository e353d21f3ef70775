package chat

import (
	"errors"
	"fmt"
	"strings"

	"jspark/backend/jinja"
)

// Special holds the tokenizer's texts that templates print themselves.
type Special struct {
	BOS, EOS string
}

// Load returns the template a model's GGUF chat template asks for: the
// template itself, rendered as Jinja, when there is one and it compiles.
// Otherwise it returns the built-in that Pick chooses, and, where the
// source did not compile, the compile error (the caller says so once).
func Load(source string, sp Special) (Template, error) {
	if strings.TrimSpace(source) == "" {
		return Pick(source), nil
	}
	prog, err := jinja.Compile(source)
	if err != nil {
		return Pick(source), fmt.Errorf("chat template does not compile (%v); using the built-in %s template", err, Pick(source).Name)
	}
	return Template{Name: "gguf", prog: prog, special: sp, hermes: strings.Contains(source, ToolCallOpen),
		thinks: strings.Contains(source, ThinkClose), harmony: strings.Contains(source, harmonyChannel),
		format: DetectFormat(source)}, nil
}

// CallDelims is the text around a forced tool call and between two of
// them: Hermes tags, a newline apart, for the built-ins and for templates
// that use them; a bare JSON object for the others (Llama 3.1's form, which
// the parser also reads), where sep is empty: that form holds one call.
func (t Template) CallDelims() (open, close, sep string) {
	if t.prog == nil || t.hermes {
		return ToolCallOpen + "\n", "\n" + ToolCallClose, "\n"
	}
	return "", "", ""
}

// harmonyChannel marks gpt-oss's harmony template, which reads an assistant
// turn's reasoning as "thinking".
const harmonyChannel = "<|channel|>"

// renderJinja passes the conversation as llama.cpp passes it to a Hugging
// Face template: messages as dicts (content always a string, tool-call
// arguments parsed from their JSON text as vLLM does), tools as the
// request's objects and left undefined when there are none, bos_token,
// eos_token and add_generation_prompt, none of which the request's own
// variables (chat_template_kwargs) may replace.
func (t Template) renderJinja(msgs []Message, tools []Tool, addGeneration bool, extra Vars) (string, error) {
	vars := map[string]jinja.Value{}
	for name, raw := range extra {
		switch name {
		case "messages", "tools", "add_generation_prompt", "bos_token", "eos_token":
			return "", fmt.Errorf("chat_template_kwargs may not set %s", name)
		}
		v, err := jinja.FromJSON(raw)
		if err != nil {
			return "", fmt.Errorf("chat_template_kwargs.%s: %w", name, err)
		}
		vars[name] = v
	}
	ms := jinja.NewList()
	for i, m := range msgs {
		v, err := messageValue(m, t.harmony)
		if err != nil {
			return "", fmt.Errorf("messages[%d].%w", i, err)
		}
		if t.harmony {
			ms.Items = append(ms.Items, harmonyTurns(v)...)
		} else {
			ms.Items = append(ms.Items, v)
		}
	}
	vars["messages"] = ms
	vars["add_generation_prompt"] = addGeneration
	vars["bos_token"] = t.special.BOS
	vars["eos_token"] = t.special.EOS
	if len(tools) > 0 {
		tl := jinja.NewList()
		for i, tool := range tools {
			v, err := toolValue(tool)
			if err != nil {
				return "", fmt.Errorf("tools[%d].%w", i, err)
			}
			tl.Items = append(tl.Items, v)
		}
		vars["tools"] = tl
	}
	out, err := t.prog.Render(vars)
	if err != nil {
		var ex *jinja.Exception
		if errors.As(err, &ex) {
			return "", fmt.Errorf("the model's chat template refused the conversation: %s", ex.Msg)
		}
		return "", fmt.Errorf("chat template: %w", err)
	}
	return out, nil
}

// messageValue is m as a template reads it: role, content (a string, ""
// for none: GLM's templates print a none as "None", Devstral's index it),
// name, tool_calls (id, type, function with arguments parsed), tool_call_id
// and reasoning_content, each present only when set. Arguments that are not
// JSON stay text (vLLM's choice); arguments nested past what a template
// may walk are an error naming the field (the JSON is checked before it
// is decoded: five million '[' once overflowed the stack here). For
// harmony, reasoning is also "thinking", and a turn with both reasoning
// and calls loses its content (the template refuses both), as llama.cpp
// passes them.
func messageValue(m Message, harmony bool) (*jinja.Dict, error) {
	d := jinja.NewDict()
	d.Set("role", m.Role)
	d.Set("content", string(m.Content))
	if m.Name != "" {
		d.Set("name", m.Name)
	}
	if len(m.ToolCalls) > 0 {
		calls := jinja.NewList()
		for j, c := range m.ToolCalls {
			cd := jinja.NewDict()
			if c.ID != "" {
				cd.Set("id", c.ID)
			}
			typ := c.Type
			if typ == "" {
				typ = "function"
			}
			cd.Set("type", typ)
			fn := jinja.NewDict()
			fn.Set("name", c.Function.Name)
			var args jinja.Value = c.Function.Arguments
			v, err := jinja.FromJSON([]byte(c.Function.Arguments))
			switch {
			case errors.Is(err, jinja.ErrNested):
				return nil, fmt.Errorf("tool_calls[%d].function.arguments: %w", j, err)
			case err == nil:
				args = v
			}
			fn.Set("arguments", args)
			cd.Set("function", fn)
			calls.Items = append(calls.Items, cd)
		}
		d.Set("tool_calls", calls)
	}
	if m.ToolCallID != "" {
		d.Set("tool_call_id", m.ToolCallID)
	}
	if m.ReasoningContent != "" {
		d.Set("reasoning_content", m.ReasoningContent)
		if harmony {
			d.Set("thinking", m.ReasoningContent)
			if len(m.ToolCalls) > 0 {
				d.Delete("content")
			}
		}
	}
	return d, nil
}

// harmonyTurns splits a turn with several tool calls into one turn a call,
// as vLLM hands them to harmony: gpt-oss's template renders only a turn's
// first call. The first keeps the turn's reasoning and content; the others
// carry role, an empty content and their call.
func harmonyTurns(d *jinja.Dict) []jinja.Value {
	v, _ := d.Get("tool_calls")
	calls, _ := v.(*jinja.List)
	if calls == nil || len(calls.Items) < 2 {
		return []jinja.Value{d}
	}
	out := make([]jinja.Value, len(calls.Items))
	for i, c := range calls.Items {
		turn := jinja.NewDict()
		if i == 0 {
			for _, k := range d.Keys() {
				x, _ := d.Get(k)
				turn.Set(k, x)
			}
		} else {
			role, _ := d.Get("role")
			turn.Set("role", role)
			turn.Set("content", "")
		}
		turn.Set("tool_calls", jinja.NewList(c))
		out[i] = turn
	}
	return out
}

// toolValue keeps the client's key order inside parameters, so the same
// request bytes always give the same prompt bytes.
func toolValue(t Tool) (*jinja.Dict, error) {
	fn := jinja.NewDict()
	fn.Set("name", t.Function.Name)
	if t.Function.Description != "" {
		fn.Set("description", t.Function.Description)
	}
	if len(t.Function.Parameters) > 0 {
		p, err := jinja.FromJSON(t.Function.Parameters)
		if err != nil {
			return nil, fmt.Errorf("function.parameters: %w", err)
		}
		fn.Set("parameters", p)
	}
	if t.Function.Strict {
		fn.Set("strict", true)
	}
	d := jinja.NewDict()
	d.Set("type", "function")
	d.Set("function", fn)
	return d, nil
}
