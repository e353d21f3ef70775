package agent

import (
	"fmt"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
)

// RecordLimit is how many bytes of one tool argument, tool output or reply
// text a trajectory or results.json keeps. The model got the whole text; the
// record keeps its head and tail around a marker that gives the full length,
// so a 270 MiB write argument costs the record 16 KiB, not 566 MB.
const RecordLimit = 16 << 10

// clip is s as records keep it.
func clip(s string) string {
	if len(s) <= RecordLimit {
		return s
	}
	h := RecordLimit * 3 / 4
	for h > 0 && !utf8.RuneStart(s[h]) {
		h--
	}
	t := len(s) - RecordLimit/4
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	return fmt.Sprintf("%s\n[… jspark: %d of %d bytes left out of this record …]\n%s", s[:h], t-h, len(s), s[t:])
}

// clipMessage is msg with its texts clipped for the record.
func clipMessage(m openai.ChatCompletionMessage) openai.ChatCompletionMessage {
	m.Content = clip(m.Content)
	m.ReasoningContent = clip(m.ReasoningContent)
	if len(m.ToolCalls) > 0 {
		calls := make([]openai.ToolCall, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			c.Function.Arguments = clip(c.Function.Arguments)
			calls[i] = c
		}
		m.ToolCalls = calls
	}
	return m
}
