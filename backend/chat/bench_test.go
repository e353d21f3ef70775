package chat

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkRender renders a 100-turn agent conversation (about 1 MB: tool
// calls with arguments, tool results, reasoning in history) through the
// templates of the agent families; the server does this on every request.
func BenchmarkRender(b *testing.B) {
	text := strings.Repeat("lorem ipsum dolor sit amet, \"quoted\" \\ back\n", 100) // 4.5 KB
	msgs := []Message{{Role: "system", Content: "You are an agent."}}
	for i := range 100 {
		id := fmt.Sprintf("c%08d", i)
		msgs = append(msgs,
			Message{Role: "user", Content: Content(fmt.Sprint("step ", i))},
			Message{Role: "assistant", ReasoningContent: text[:500], ToolCalls: []ToolCall{{ID: id, Type: "function",
				Function: FunctionCall{Name: "bash", Arguments: fmt.Sprintf(`{"command": %q, "timeout": 5}`, text[:2000])}}}},
			Message{Role: "tool", ToolCallID: id, Content: Content(text)},
			Message{Role: "assistant", Content: Content(text[:1000])})
	}
	tools := []Tool{{Type: "function", Function: Function{Name: "bash", Description: "Run a command.",
		Parameters: []byte(`{"type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}}, "required": ["command"]}`)}}}
	for _, name := range []string{"Qwen3-Coder", "openai-gpt-oss-120b", "GLM-4.6", "google-gemma-4-31B-it", "deepseek-ai-DeepSeek-V3.1"} {
		src, err := os.ReadFile(filepath.Join("testdata/templates", name+".jinja"))
		if err != nil {
			b.Fatal(err)
		}
		tpl, err := Load(string(src), Special{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			var n int
			for b.Loop() {
				out, err := tpl.Render(msgs, tools, true, nil)
				if err != nil {
					b.Fatal(err)
				}
				n = len(out)
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "MB/s")
		})
	}
}
