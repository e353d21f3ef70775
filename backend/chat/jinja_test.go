package chat

import (
	"bufio"
	"encoding/json"
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
