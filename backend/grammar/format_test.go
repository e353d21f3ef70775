package grammar_test

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"jspark/backend/chat"
	"jspark/backend/grammar"
	"jspark/backend/tokenizer"
)

// formatTools exercise raw strings (bounded, with an enum, untyped), JSON
// values of every kind and required and optional members.
var formatTools = []chat.Tool{
	{Type: "function", Function: chat.Function{Name: "read_file", Parameters: json.RawMessage(
		`{"type":"object","properties":{"path":{"type":"string","minLength":1,"maxLength":12},"limit":{"type":"integer","minimum":1,"maximum":99},` +
			`"mode":{"enum":["text","hex"]},"opts":{"type":"object","properties":{"x":{"type":"boolean"}},"required":["x"]},"note":{}},"required":["path","limit"]}`)}},
	{Type: "function", Function: chat.Function{Name: "bash", Parameters: json.RawMessage(
		`{"type":"object","properties":{"command":{"type":"string","maxLength":40},"timeout":{"type":"number","minimum":0,"maximum":5},"tags":{"type":"array","items":{"type":"string"},"maxItems":2}},"required":["command"]}`)}},
	{Type: "function", Function: chat.Function{Name: "noop", Parameters: json.RawMessage(`{"type":"object"}`)}},
}

// For every format, 20 random walks of its forced-call grammar (up to 3
// calls; one on a 50K byte-level BPE vocabulary, whose tokens span tags
// and raw text) parse, with the format's own parser, into calls of the tools
// whose arguments the independent validator accepts, and nothing else.
func TestFormatGrammarsParseAndValidate(t *testing.T) {
	var tools []grammar.Tool
	schemas := map[string]func(string) error{}
	for _, ft := range formatTools {
		tools = append(tools, grammar.Tool{Name: ft.Function.Name, Schema: ft.Function.Parameters})
		sch := grammar.Validator(t, string(ft.Function.Parameters))
		schemas[ft.Function.Name] = func(args string) error { return grammar.Validate(sch, args) }
	}
	toks := map[string]func(testing.TB) *tokenizer.Tokenizer{"spm": grammar.Stories, "bpe": grammar.GPT2}
	for _, f := range chat.Formats {
		for tokName, tokOf := range toks {
			t.Run(f.String()+"/"+tokName, func(t *testing.T) {
				if tokName == "bpe" && f != chat.FormatQwen3Coder && f != chat.FormatGLM {
					t.Skip("the raw-text formats only: a 50K vocabulary's walk costs seconds")
				}
				tok := tokOf(t)
				g, err := grammar.ToolCalls(string(f), tools, 3)
				if err != nil {
					t.Fatal(err)
				}
				seeds := 20
				if tokName == "bpe" {
					seeds = 1
				}
				for seed := range seeds {
					out := grammar.RandomWalk(t, g, tok, rand.New(rand.NewPCG(uint64(seed), 7)))
					p := &chat.Parser{Format: f, Tools: formatTools, Forced: true}
					d := p.Feed(out)
					fin, _ := p.Finish()
					d.Add(fin)
					if d.Content != "" || d.Reasoning != "" || len(d.Calls) == 0 {
						t.Fatalf("seed %d: %q parsed to content %q reasoning %q, %d call deltas", seed, out, d.Content, d.Reasoning, len(d.Calls))
					}
					calls := map[int]*chat.ToolCall{}
					for _, cd := range d.Calls {
						if cd.Name != "" {
							calls[cd.Index] = &chat.ToolCall{Function: chat.FunctionCall{Name: cd.Name}}
						} else {
							calls[cd.Index].Function.Arguments += cd.Arguments
						}
					}
					for i, c := range calls {
						check, ok := schemas[c.Function.Name]
						if !ok {
							t.Fatalf("seed %d: call %d to %q, not a tool: %q", seed, i, c.Function.Name, out)
						}
						if err := check(c.Function.Arguments); err != nil {
							t.Fatalf("seed %d: call %d %s(%s) does not validate: %v\noutput %q", seed, i, c.Function.Name, c.Function.Arguments, err, out)
						}
					}
				}
			})
		}
	}
}
