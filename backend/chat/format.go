package chat

import (
	"fmt"
	"strings"
)

// Format is a model family's tool-call syntax: how its output writes a
// call, which its Parser reads and its grammar (backend/grammar) writes.
type Format string

// The formats. Each has a parser state machine in format_NAME.go.
const (
	// FormatAuto reads Hermes tags, or a bare JSON call (an object, or a
	// list of them) that is the whole reply: what the built-in templates
	// and templates of no known syntax get.
	FormatAuto Format = ""
	// FormatHermes: <tool_call>{"name": …, "arguments": {…}}</tool_call>
	// (Qwen 2.5/3, Hermes, and most ChatML templates).
	FormatHermes Format = "hermes"
	// FormatLlama: the reply is one bare {"name": …, "parameters": {…}}
	// (Llama 3.1-3.3).
	FormatLlama Format = "llama3"
	// FormatMistral: [TOOL_CALLS]NAME[ARGS]{…} (Devstral, Mistral Small
	// 3.2, with an optional [CALL_ID]) or the older [TOOL_CALLS][{…}, …].
	FormatMistral Format = "mistral"
	// FormatQwen3Coder: <tool_call><function=NAME><parameter=P>value
	// </parameter>…</function></tool_call> (Qwen3-Coder, Qwen 3.5/3.6).
	FormatQwen3Coder Format = "qwen3coder"
	// FormatHarmony: gpt-oss's channels; analysis is reasoning, a
	// commentary message to=functions.NAME is a call, final is content.
	FormatHarmony Format = "harmony"
	// FormatGLM: <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>
	// …</tool_call> (GLM-4.5, 4.6, 4.7).
	FormatGLM Format = "glm"
	// FormatKimi: <|tool_calls_section_begin|><|tool_call_begin|>
	// functions.NAME:I<|tool_call_argument_begin|>{…}<|tool_call_end|>…
	// (Kimi-K2).
	FormatKimi Format = "kimi"
	// FormatDeepSeek: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME
	// <｜tool▁sep｜>{…}<｜tool▁call▁end｜>… (DeepSeek V3.1 and later).
	FormatDeepSeek Format = "deepseek"
)

// Formats lists every format by name, FormatAuto as "auto".
var Formats = []Format{FormatAuto, FormatHermes, FormatLlama, FormatMistral, FormatQwen3Coder, FormatHarmony, FormatGLM, FormatKimi, FormatDeepSeek}

func (f Format) String() string {
	if f == FormatAuto {
		return "auto"
	}
	return string(f)
}

// ParseFormat reads a format's name (--tool-format).
func ParseFormat(name string) (Format, error) {
	for _, f := range Formats {
		if name == f.String() {
			return f, nil
		}
	}
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = f.String()
	}
	return "", fmt.Errorf("unknown tool-call format %q (one of %s)", name, strings.Join(names, ", "))
}

// DetectFormat tells a chat template's tool-call format from the markup it
// writes calls with.
func DetectFormat(template string) Format {
	has := func(s ...string) bool {
		for _, x := range s {
			if !strings.Contains(template, x) {
				return false
			}
		}
		return true
	}
	switch {
	case has("<|channel|>", "<|message|>"):
		return FormatHarmony
	case has("<function=", "<parameter="):
		return FormatQwen3Coder
	case has("<arg_key>", "<arg_value>"):
		return FormatGLM
	case has("<|tool_calls_section_begin|>"):
		return FormatKimi
	case has("<｜tool▁calls▁begin｜>", "<｜tool▁sep｜>") && !has("```json"):
		// V3.1's NAME<｜tool▁sep｜>{…}; R1 and V3 wrote function<｜tool▁sep｜>NAME
		// and a fenced block, which is not read.
		return FormatDeepSeek
	case has("[TOOL_CALLS]"):
		return FormatMistral
	case has(ToolCallOpen):
		return FormatHermes
	}
	return FormatAuto
}

// Preserved are the format's markers that a vocabulary may hold as control
// tokens, which decode to nothing: the output must keep their text for the
// parser to see the calls (llama.cpp's preserved tokens).
func (f Format) Preserved() []string {
	switch f {
	case FormatAuto, FormatHermes:
		return []string{ToolCallOpen, ToolCallClose}
	case FormatMistral:
		return []string{mistralCalls, mistralArgs, mistralCallID}
	case FormatQwen3Coder:
		return []string{ToolCallOpen, ToolCallClose}
	case FormatHarmony:
		return []string{harmonyStart, harmonyChannel, harmonyMessage, harmonyConstrain, harmonyEnd}
	case FormatGLM:
		return []string{ToolCallOpen, ToolCallClose, glmKeyOpen, glmKeyClose, glmValueOpen, glmValueClose}
	case FormatKimi:
		return kimiSpec.markers()
	case FormatDeepSeek:
		return deepseekSpec.markers()
	}
	return nil
}

// markers are all the markup of the format, control tokens or text.
func (f Format) markers() []string {
	m := f.Preserved()
	switch f {
	case FormatAuto, FormatLlama:
		m = append(m, `{"name"`)
	case FormatQwen3Coder:
		m = append(m, qwenFunction, qwenFunctionEnd, qwenParam, qwenParamEnd)
	case FormatHarmony:
		m = append(m, harmonyCall, harmonyReturn)
	}
	return m
}

func (f Format) machine() machine {
	switch f {
	case FormatHermes:
		return &hermes{}
	case FormatLlama:
		return &bare{}
	case FormatMistral:
		return &mistral{}
	case FormatQwen3Coder:
		return &qwenXML{}
	case FormatHarmony:
		return &harmony{}
	case FormatGLM:
		return &glm{}
	case FormatKimi:
		return &section{spec: kimiSpec}
	case FormatDeepSeek:
		return &section{spec: deepseekSpec}
	}
	return &auto{}
}
