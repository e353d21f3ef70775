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
		thinks: strings.Contains(source, ThinkClose), format: DetectFormat(source)}, nil
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

// renderJinja passes the conversation as vLLM and llama.cpp pass it to a
// Hugging Face template: messages as dicts (tool-call arguments parsed from
// their JSON text, content none for an assistant turn that only calls
// tools), tools as the request's objects and left undefined when there are
// none, bos_token, eos_token and add_generation_prompt, none of which the
// request's own variables (chat_template_kwargs) may replace.
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
	for _, m := range msgs {
		d := messageValue(m)
		if t.format == FormatHarmony {
			d = harmonyHistory(d, m)
		}
		ms.Items = append(ms.Items, d)
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
				return "", fmt.Errorf("tools[%d]: %w", i, err)
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

func messageValue(m Message) *jinja.Dict {
	d := jinja.NewDict()
	d.Set("role", m.Role)
	if m.Role == "assistant" && m.Content == "" && len(m.ToolCalls) > 0 {
		d.Set("content", nil)
	} else {
		d.Set("content", string(m.Content))
	}
	if m.Name != "" {
		d.Set("name", m.Name)
	}
	if len(m.ToolCalls) > 0 {
		calls := jinja.NewList()
		for _, c := range m.ToolCalls {
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
			if v, err := jinja.FromJSON([]byte(c.Function.Arguments)); err == nil {
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
	}
	return d
}

// harmonyHistory adjusts a message as gpt-oss's template expects it (as
// llama.cpp does): the reasoning in "thinking", and an assistant turn that
// calls tools without "content", which the template would test for
// channel markup.
func harmonyHistory(d *jinja.Dict, m Message) *jinja.Dict {
	out := jinja.NewDict()
	for _, k := range d.Keys() {
		if k == "content" && len(m.ToolCalls) > 0 && m.Content == "" {
			continue
		}
		v, _ := d.Get(k)
		out.Set(k, v)
	}
	if m.ReasoningContent != "" {
		out.Set("thinking", m.ReasoningContent)
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
			return nil, fmt.Errorf("parameters: %w", err)
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
