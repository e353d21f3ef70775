// Twenty seeds of every format over HTTP: the plain run covers them, which
// the race detector would slow to minutes (the parser and grammar are not
// concurrent code).

//go:build !race

package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/santhosh-tekuri/jsonschema/v6"
	openai "github.com/sashabaranov/go-openai"

	"jspark/backend/chat"
)

// formatTools have raw-string, bounded-number, enum and object members:
// what sets the formats' grammars and parsers apart.
var formatTools = map[string]string{
	"bash":      `{"type":"object","properties":{"command":{"type":"string","maxLength":40},"timeout":{"type":"integer","minimum":1,"maximum":600}},"required":["command","timeout"]}`,
	"read_file": `{"type":"object","properties":{"path":{"type":"string","minLength":1,"maxLength":24},"mode":{"enum":["text","hex"]},"opts":{"type":"object","properties":{"n":{"type":"number"}},"required":["n"]}},"required":["path"]}`,
}

func formatValidators(t *testing.T) map[string]*jsonschema.Schema {
	out := map[string]*jsonschema.Schema{}
	for name, schema := range formatTools {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource(name+".json", doc); err != nil {
			t.Fatal(err)
		}
		if out[name], err = c.Compile(name + ".json"); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func checkCall(t *testing.T, v map[string]*jsonschema.Schema, name, args string) {
	t.Helper()
	sch, ok := v[name]
	if !ok {
		t.Fatalf("a call to %q, not a tool", name)
	}
	x, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
	if err != nil {
		t.Fatalf("%s arguments %q: %v", name, args, err)
	}
	if err := sch.Validate(x); err != nil {
		t.Fatalf("%s arguments %q do not validate: %v", name, args, err)
	}
}

// For every tool-call format, forced on the embedded model (whose byte
// vocabulary has none of the families' special tokens: their markup is
// ordinary text), tool_choice required over HTTP yields calls the client
// gets as tool calls, schema-valid, never text: 20 seeds, each over chat
// and Responses, streamed and not (the same call).
func TestFormatsRequiredOverHTTP(t *testing.T) {
	v := formatValidators(t)
	var tools []openai.Tool
	var rtools []responses.ToolUnionParam
	for _, name := range []string{"bash", "read_file"} {
		var params map[string]any
		json.Unmarshal([]byte(formatTools[name]), &params)
		tools = append(tools, openai.Tool{Type: "function", Function: &openai.FunctionDefinition{Name: name, Parameters: json.RawMessage(formatTools[name])}})
		rtools = append(rtools, responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: name, Parameters: params}})
	}
	seeds := 20
	if testing.Short() {
		seeds = 4
	}
	for _, format := range chat.Formats {
		t.Run(format.String(), func(t *testing.T) {
			t.Parallel()
			f := start(t, nil, func(o *Options) { o.ToolFormat = format.String() })
			ctx := context.Background()
			for seed := range seeds {
				s := seed
				req := openai.ChatCompletionRequest{
					Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "Look at the files."}},
					Tools:    tools, ToolChoice: "required", Temperature: 1, Seed: &s, MaxTokens: 300,
				}
				resp, err := f.client.CreateChatCompletion(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				c := resp.Choices[0]
				if c.FinishReason != openai.FinishReasonToolCalls || len(c.Message.ToolCalls) != 1 || c.Message.Content != "" || c.Message.ReasoningContent != "" {
					t.Fatalf("seed %d: %+v", seed, c)
				}
				call := c.Message.ToolCalls[0]
				checkCall(t, v, call.Function.Name, call.Function.Arguments)

				req.Stream = true
				stream, err := f.client.CreateChatCompletionStream(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				got := drain(t, stream)
				if got.finish != openai.FinishReasonToolCalls || len(got.calls) != 1 || got.text != "" ||
					got.calls[0].Function.Name != call.Function.Name || got.calls[0].Function.Arguments != call.Function.Arguments {
					t.Fatalf("seed %d streamed: %+v, not streamed %+v", seed, got, call)
				}
				svc := responsesClient(f)
				p := responses.ResponseNewParams{
					Input: responses.ResponseNewParamsInputUnion{OfString: oa.String("Look at the files.")},
					Tools: rtools, ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: oa.Opt(responses.ToolChoiceOptionsRequired)},
					Temperature: oa.Float(1), MaxOutputTokens: oa.Int(300),
				}
				r, err := svc.New(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				if len(r.Output) != 1 || r.Output[0].Type != "function_call" {
					t.Fatalf("seed %d responses: %s", seed, outputTypes(r))
				}
				rc := r.Output[0].AsFunctionCall()
				checkCall(t, v, rc.Name, rc.Arguments)
				sr := drainResponses(t, svc, p)
				if len(sr.final.Output) != 1 || sr.final.Output[0].Type != "function_call" {
					t.Fatalf("seed %d responses streamed: %s", seed, outputTypes(&sr.final))
				}
				item := sr.final.Output[0].AsFunctionCall()
				checkCall(t, v, item.Name, item.Arguments)
				if sr.deltas[item.ID] != item.Arguments {
					t.Fatalf("seed %d: argument deltas %q, item %q", seed, sr.deltas[item.ID], item.Arguments)
				}
			}
		})
	}
}

func outputTypes(r *responses.Response) string {
	var s []string
	for _, o := range r.Output {
		s = append(s, fmt.Sprintf("%s(%s %s %v)", o.Type, o.Name, o.AsFunctionCall().Arguments, o.Content))
	}
	return strings.Join(s, " ")
}
