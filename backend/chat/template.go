package chat

import (
	"fmt"
	"strings"

	"jspark/backend/jinja"
)

// Template renders a conversation into prompt text: the model's own Jinja
// template (Load), or a built-in. The built-ins render tools with
// CanonicalJSON; a Jinja template sees the tools in the client's key order.
// Either way the same request gives the same bytes, so the prefix cache
// holds across turns and sessions.
type Template struct {
	Name string // gguf (the model's own template), chatml, llama3 or plain
	// BOS is prepended text (for built-ins that write it themselves).
	BOS string

	prog    *jinja.Template
	special Special
	hermes  bool // the template writes calls in <tool_call> tags
	thinks  bool // the template writes reasoning in <think> blocks
	harmony bool // gpt-oss's template: reasoning goes back as "thinking"
	format  Format
}

// Format is the tool-call syntax the template writes calls in, which its
// model answers in (FormatAuto for the built-ins and unknown templates).
func (t Template) Format() Format { return t.format }

// Thinks reports whether the model's template writes reasoning blocks, so
// that its model's output has one to split off (Qwen3, QwQ, DeepSeek-R1).
func (t Template) Thinks() bool { return t.thinks }

// Pick chooses a template for a model's GGUF chat template text: ChatML
// (Qwen and others) and Llama 3 are recognized by their markers; anything
// else, including no template, gets the plain one.
func Pick(ggufTemplate string) Template {
	switch {
	case strings.Contains(ggufTemplate, "<|im_start|>"):
		return Template{Name: "chatml"}
	case strings.Contains(ggufTemplate, "<|start_header_id|>"):
		return Template{Name: "llama3", BOS: "<|begin_of_text|>"}
	}
	return Template{Name: "plain"}
}

// ToolCallOpen and ToolCallClose delimit a call in model output (Hermes
// style, which Qwen's templates use).
const (
	ToolCallOpen  = "<tool_call>"
	ToolCallClose = "</tool_call>"
)

func toolsBlock(tools []Tool) (string, error) {
	var b strings.Builder
	for _, t := range tools {
		params, err := CanonicalJSON(t.Function.Parameters)
		if err != nil {
			return "", fmt.Errorf("tool %s: parameters: %w", t.Function.Name, err)
		}
		desc, _ := CanonicalJSON([]byte(quote(t.Function.Description)))
		name, _ := CanonicalJSON([]byte(quote(t.Function.Name)))
		fmt.Fprintf(&b, `{"type":"function","function":{"name":%s,"description":%s,"parameters":%s}}`+"\n", name, desc, params)
	}
	return b.String(), nil
}

func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

const toolsIntro = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
	"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"

const toolsOutro = "</tools>\n\nFor each function call, return a json object with function name and arguments within " +
	"<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>"

// RenderCall writes one assistant tool call the way the model emits it.
func RenderCall(c ToolCall) string {
	args, err := CanonicalJSON([]byte(c.Function.Arguments))
	if err != nil {
		args = quote(c.Function.Arguments)
	}
	return ToolCallOpen + "\n" + `{"name":` + quote(c.Function.Name) + `,"arguments":` + args + "}\n" + ToolCallClose
}

func assistantText(m Message) string {
	parts := []string{}
	if m.Content != "" {
		parts = append(parts, string(m.Content))
	}
	for _, c := range m.ToolCalls {
		parts = append(parts, RenderCall(c))
	}
	return strings.Join(parts, "\n")
}

// Render writes the conversation; addGeneration appends the assistant
// header so the model answers next. vars reach the model's own template
// only; the built-ins have no options.
func (t Template) Render(msgs []Message, tools []Tool, addGeneration bool, vars Vars) (string, error) {
	for i, m := range msgs {
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool":
		default:
			return "", fmt.Errorf("messages[%d].role %q is not one of system, developer, user, assistant, tool", i, m.Role)
		}
	}
	if t.prog != nil {
		return t.renderJinja(msgs, tools, addGeneration, vars)
	}
	tb := ""
	if len(tools) > 0 {
		var err error
		if tb, err = toolsBlock(tools); err != nil {
			return "", err
		}
	}
	system := ""
	rest := msgs
	if len(msgs) > 0 && (msgs[0].Role == "system" || msgs[0].Role == "developer") {
		system, rest = string(msgs[0].Content), msgs[1:]
	}
	if tb != "" {
		if system != "" {
			system += "\n\n"
		}
		system += toolsIntro + tb + toolsOutro
	}
	var b strings.Builder
	b.WriteString(t.BOS)
	switch t.Name {
	case "chatml":
		if system != "" {
			b.WriteString("<|im_start|>system\n" + system + "<|im_end|>\n")
		}
		for i := 0; i < len(rest); i++ {
			m := rest[i]
			switch m.Role {
			case "assistant":
				b.WriteString("<|im_start|>assistant\n" + assistantText(m) + "<|im_end|>\n")
			case "tool":
				b.WriteString("<|im_start|>user")
				for ; i < len(rest) && rest[i].Role == "tool"; i++ {
					b.WriteString("\n<tool_response>\n" + string(rest[i].Content) + "\n</tool_response>")
				}
				i--
				b.WriteString("<|im_end|>\n")
			default:
				b.WriteString("<|im_start|>" + m.Role + "\n" + string(m.Content) + "<|im_end|>\n")
			}
		}
		if addGeneration {
			b.WriteString("<|im_start|>assistant\n")
		}
	case "llama3":
		head := func(role string) { b.WriteString("<|start_header_id|>" + role + "<|end_header_id|>\n\n") }
		if system != "" {
			head("system")
			b.WriteString(system + "<|eot_id|>")
		}
		for _, m := range rest {
			switch m.Role {
			case "assistant":
				head("assistant")
				b.WriteString(assistantText(m) + "<|eot_id|>")
			case "tool":
				head("ipython")
				b.WriteString(string(m.Content) + "<|eot_id|>")
			default:
				head(m.Role)
				b.WriteString(string(m.Content) + "<|eot_id|>")
			}
		}
		if addGeneration {
			head("assistant")
		}
	default: // plain: readable turns for models without a template
		if system != "" {
			b.WriteString(system + "\n\n")
		}
		for _, m := range rest {
			switch m.Role {
			case "assistant":
				b.WriteString("Assistant: " + assistantText(m) + "\n")
			case "tool":
				b.WriteString("Tool result (" + m.ToolCallID + "): " + string(m.Content) + "\n")
			default:
				b.WriteString("User: " + string(m.Content) + "\n")
			}
		}
		if addGeneration {
			b.WriteString("Assistant:")
		}
	}
	return b.String(), nil
}
