package chat

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"jspark/backend/jinja"
)

type conversation struct {
	Name                string    `json:"name"`
	AddGenerationPrompt bool      `json:"add_generation_prompt"`
	Tools               []Tool    `json:"tools"`
	Messages            []Message `json:"messages"`
	Kwargs              Vars      `json:"kwargs"`
}

type renderedGolden struct {
	Template     string  `json:"template"`
	Conversation string  `json:"conversation"`
	Output       *string `json:"output"`
	Error        string  `json:"error"`
}

// TestTemplatesMatchJinja2 renders real model templates (testdata/templates)
// for OpenAI-shaped conversations and compares the bytes with what Python's
// Jinja2 renders in Hugging Face's configuration (testdata/gen_templates.py).
func TestTemplatesMatchJinja2(t *testing.T) {
	defer pinClock(time.Date(2026, 1, 15, 9, 30, 0, 0, time.UTC))()
	raw, err := os.ReadFile("testdata/conversations.json")
	if err != nil {
		t.Fatal(err)
	}
	var convs []conversation
	if err := json.Unmarshal(raw, &convs); err != nil {
		t.Fatal(err)
	}
	byName := map[string]conversation{}
	for _, c := range convs {
		byName[c.Name] = c
	}
	f, err := os.Open("testdata/templates.golden.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	n := 0
	for sc.Scan() {
		var g renderedGolden
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatal(err)
		}
		n++
		t.Run(strings.TrimSuffix(g.Template, ".jinja")+"/"+g.Conversation, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join("testdata/templates", g.Template))
			if err != nil {
				t.Fatal(err)
			}
			tpl, err := Load(string(src), Special{BOS: "<s>", EOS: "</s>"})
			if err != nil || tpl.Name != "gguf" {
				t.Fatalf("Load: %v (template %s)", err, tpl.Name)
			}
			c := byName[g.Conversation]
			got, err := tpl.Render(c.Messages, c.Tools, c.AddGenerationPrompt, c.Kwargs)
			if g.Output == nil {
				if err == nil {
					t.Fatalf("rendered; Jinja2 failed with %s", g.Error)
				}
				return
			}
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if diff := cmp.Diff(*g.Output, got); diff != "" {
				t.Errorf("prompt differs from Jinja2 (-want +got):\n%s", diff)
			}
		})
	}
	if n < len(convs)*6 {
		t.Fatalf("%d golden renderings; regenerate with python3 testdata/gen_templates.py", n)
	}
}

func pinClock(at time.Time) func() {
	saved := jinja.Now
	jinja.Now = func() time.Time { return at }
	return func() { jinja.Now = saved }
}

// TestFiveMillionDeepJSONIsAnErrorNamingTheField: JSON a template would
// walk (tool-call arguments, tool schemas, chat_template_kwargs) that nests
// past its bound is an error naming the field, where five million '['
// in arguments ended the process with a stack overflow (issue 29).
func TestFiveMillionDeepJSONIsAnErrorNamingTheField(t *testing.T) {
	src, err := os.ReadFile("testdata/templates/qwen3.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := Load(string(src), Special{})
	if err != nil {
		t.Fatal(err)
	}
	deep := strings.Repeat("[", 5_000_000)
	user := Message{Role: "user", Content: "hi"}
	call := Message{Role: "assistant", ToolCalls: []ToolCall{
		{ID: "a", Function: FunctionCall{Name: "f", Arguments: "{}"}},
		{ID: "b", Function: FunctionCall{Name: "f", Arguments: deep}}}}
	tool := Tool{Type: "function", Function: Function{Name: "f", Parameters: []byte(deep)}}
	cases := []struct {
		name  string
		msgs  []Message
		tools []Tool
		vars  Vars
		want  string
	}{
		{"arguments", []Message{user, call}, nil, nil, "messages[1].tool_calls[1].function.arguments: "},
		{"parameters", []Message{user}, []Tool{{Type: "function", Function: Function{Name: "g"}}, tool}, nil, "tools[1].function.parameters: "},
		{"kwargs", []Message{user}, nil, Vars{"x": []byte(deep)}, "chat_template_kwargs.x: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := tpl.Render(c.msgs, c.tools, true, c.vars)
			if !errors.Is(err, jinja.ErrNested) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q and nesting", err, c.want)
			}
		})
	}
	// Arguments that are not JSON at all still render, as text.
	call.ToolCalls[1].Function.Arguments = "not json"
	if _, err := tpl.Render([]Message{user, call}, nil, true, nil); err != nil {
		t.Fatal(err)
	}
}

// TestFiftyMegabyteTemplateFallsBackToTheBuiltIn: a template too big to be
// one is not compiled (a 50 MB one cost 2.4 GiB): the model gets the
// built-in its markers pick, and the caller a warning.
func TestFiftyMegabyteTemplateFallsBackToTheBuiltIn(t *testing.T) {
	src := "<|im_start|>" + strings.Repeat("{{ x }}", 50<<20/7)
	tpl, err := Load(src, Special{})
	if err == nil || !strings.Contains(err.Error(), "over the 1024 KiB a template may have); using the built-in chatml template") {
		t.Fatalf("error %v", err)
	}
	if tpl.Name != "chatml" {
		t.Fatalf("template %s", tpl.Name)
	}
}

// TestLongConversationFitsTheBudget: the budget grows with what a template
// is given, so a 15 MB agent conversation renders through the templates
// that spend the most on it (gemma-4 builds about 6.5 times its input,
// gpt-oss runs the most steps), where a fixed budget sized against hostile
// templates would refuse it.
func TestLongConversationFitsTheBudget(t *testing.T) {
	big := strings.Repeat("lorem ipsum dolor sit amet, \"quoted\" \\ back\n", 2300) // 103 KB
	msgs := []Message{{Role: "system", Content: "You are an agent."}}
	for i := range 120 {
		id := fmt.Sprintf("c%08d", i)
		msgs = append(msgs,
			Message{Role: "user", Content: Content(fmt.Sprint("step ", i))},
			Message{Role: "assistant", ReasoningContent: big[:1000], ToolCalls: []ToolCall{{ID: id, Type: "function",
				Function: FunctionCall{Name: "bash", Arguments: fmt.Sprintf(`{"command": %q}`, big[:20000])}}}},
			Message{Role: "tool", ToolCallID: id, Content: Content(big)},
			Message{Role: "assistant", Content: Content(big[:5000])})
	}
	msgs = append(msgs, Message{Role: "user", Content: "next"})
	tools := []Tool{{Type: "function", Function: Function{Name: "bash", Description: "Run a command.",
		Parameters: []byte(`{"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}`)}}}
	for _, name := range []string{"google-gemma-4-31B-it.jinja", "openai-gpt-oss-120b.jinja"} {
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join("testdata/templates", name))
			if err != nil {
				t.Fatal(err)
			}
			tpl, err := Load(string(src), Special{})
			if err != nil {
				t.Fatal(err)
			}
			out, err := tpl.Render(msgs, tools, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) < 10_000_000 {
				t.Fatalf("rendered %d bytes", len(out))
			}
		})
	}
}
