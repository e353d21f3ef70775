package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/sashabaranov/go-openai"
)

// boundedSchema holds every bound the grammar enforces: integer and number
// ranges (inclusive and exclusive), string lengths and a pattern, array
// sizes, an enum of mixed types, a const, and no other members.
const boundedSchema = `{"type":"object","additionalProperties":false,
 "required":["n","x","s","a","e","k"],
 "properties":{
  "n":{"type":"integer","minimum":1,"maximum":7},
  "x":{"type":"number","exclusiveMinimum":-2.5,"maximum":3},
  "s":{"type":"string","minLength":2,"maxLength":5,"pattern":"^[a-c]+$"},
  "a":{"type":"array","items":{"type":"integer","exclusiveMaximum":100},"minItems":1,"maxItems":3},
  "e":{"enum":["red",3,null,{"k":[1]}]},
  "k":{"const":"on"}}}`

// TestSchemaBoundsOverHTTP: a forced call's arguments validate against a
// bounded schema (checked by an independent validator) for 20 seeds,
// streamed and not, at temperature 1 where the model would wander anywhere.
func TestSchemaBoundsOverHTTP(t *testing.T) {
	f := start(t, nil, nil)
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(boundedSchema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("bounded.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("bounded.json")
	if err != nil {
		t.Fatal(err)
	}
	tool := openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{Name: "pick", Parameters: json.RawMessage(boundedSchema)}}
	check := func(seed int, mode, args string) {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
		if err == nil {
			err = sch.Validate(v)
		}
		if err != nil {
			t.Errorf("seed %d %s: arguments %s: %v", seed, mode, args, err)
		}
	}
	for seed := 1; seed <= 20; seed++ {
		req := openai.ChatCompletionRequest{
			Messages:   []openai.ChatCompletionMessage{{Role: "user", Content: "Pick some values"}},
			Tools:      []openai.Tool{tool},
			ToolChoice: "required", MaxTokens: 400, Seed: &seed,
		}
		resp, err := f.client.CreateChatCompletion(context.Background(), req)
		if err != nil || len(resp.Choices) != 1 || len(resp.Choices[0].Message.ToolCalls) != 1 || resp.Choices[0].FinishReason != "tool_calls" {
			t.Fatalf("seed %d: %v %+v", seed, err, resp)
		}
		check(seed, "plain", resp.Choices[0].Message.ToolCalls[0].Function.Arguments)

		req.Stream = true
		st, err := f.client.CreateChatCompletionStream(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		var args strings.Builder
		for {
			ch, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range ch.Choices {
				for _, tc := range c.Delta.ToolCalls {
					args.WriteString(tc.Function.Arguments)
				}
			}
		}
		st.Close()
		if args.String() != resp.Choices[0].Message.ToolCalls[0].Function.Arguments {
			t.Errorf("seed %d: streamed arguments %s, plain %s", seed, args.String(), resp.Choices[0].Message.ToolCalls[0].Function.Arguments)
		}
		check(seed, "stream", args.String())
	}
}

// TestUnsupportedKeywordIs400: a schema keyword the grammar cannot enforce
// is refused with its path, in tools and in response_format, never ignored.
func TestUnsupportedKeywordIs400(t *testing.T) {
	f := start(t, nil, nil)
	for _, c := range []struct{ body, want string }{
		{`{"messages":[{"role":"user","content":"x"}],"tool_choice":"required","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"xs":{"type":"array","uniqueItems":true}}}}}]}`, "uniqueItems"},
		{`{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"r","schema":{"type":"object","properties":{"m":{"type":"object","patternProperties":{"^a":{"type":"string"}}}}}}}}`, "patternProperties"},
	} {
		resp, body := post(t, f.srv.URL+"/v1/chat/completions", "", c.body)
		if resp.StatusCode != 400 || !strings.Contains(body, c.want) || !strings.Contains(body, "properties") {
			t.Errorf("%d %s; want 400 naming %s and its path", resp.StatusCode, body, c.want)
		}
		t.Logf("%s", body)
	}
}

// TestTypeErrorsSpeakJSON: a field of the wrong JSON type is a 400 that
// names the field and the JSON types, not Go's.
func TestTypeErrorsSpeakJSON(t *testing.T) {
	f := start(t, nil, nil)
	for _, c := range []struct{ body, want string }{
		{`[]`, `the body must be a JSON object, not a JSON array`},
		{`{"messages":"hi"}`, `field \"messages\" must be a JSON array, not a JSON string`},
		{`{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}`, `field \"temperature\" must be a JSON number, not a JSON string`},
		{`{"messages":[{"role":"user","content":"x"}],"max_tokens":1.5}`, `field \"max_tokens\" must be a JSON integer, not a JSON number`},
	} {
		resp, body := post(t, f.srv.URL+"/v1/chat/completions", "", c.body)
		if resp.StatusCode != 400 || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s; want %s", c.body, resp.StatusCode, body, c.want)
		}
	}
}

// TestCutCallHasArguments: a forced call cut by max_tokens after its name
// keeps "arguments" (empty or the prefix that arrived), as OpenAI's
// clients expect the field to be there.
func TestCutCallHasArguments(t *testing.T) {
	f := start(t, nil, nil)
	seen := 0
	for n := 1; n <= 40; n++ {
		body := fmt.Sprintf(`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"pick","parameters":{"type":"object","properties":{"s":{"type":"string"}},"required":["s"]}}}],"tool_choice":"required","max_tokens":%d,"temperature":0}`, n)
		resp, out := post(t, f.srv.URL+"/v1/chat/completions", "", body)
		if resp.StatusCode != 200 {
			t.Fatalf("max_tokens %d: %d %s", n, resp.StatusCode, out)
		}
		if strings.Contains(out, `"name":"pick"`) {
			seen++
			if !strings.Contains(out, `"name":"pick","arguments":"`) {
				t.Errorf("max_tokens %d: a call without arguments: %s", n, out)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no max_tokens in 1..40 reached the call's name")
	}
}
