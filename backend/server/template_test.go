package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"jspark/backend/engine"
)

// A Llama-3.1-like template: writes BOS itself, then the tools, calls as
// bare JSON with "parameters", and refuses a role.
const jinjaTemplate = `{{ bos_token }}
{%- if tools %}[tools]{% for t in tools %}{{ t.function | tojson }}{% endfor %}
{% endif %}
{%- for m in messages %}
  {%- if m.role == 'developer' %}{{ raise_exception('developer messages are not supported') }}{% endif %}
[{{ m.role }}]
  {%- if m.tool_calls %}
    {%- for c in m.tool_calls %}{"name": "{{ c.function.name }}", "parameters": {{ c.function.arguments | tojson }}}{% endfor %}
  {%- else %}{{ m.content }}{% endif %}
{% endfor %}
{%- if add_generation_prompt %}[assistant]{% endif %}`

func TestModelTemplateRendersPrompt(t *testing.T) {
	f := start(t, engine.Options{}, Options{ChatTemplate: jinjaTemplate})
	body := `{"messages":[{"role":"user","content":"hi"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\",\"n\":1}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"a.txt"}],` +
		`"tools":[{"type":"function","function":{"name":"bash","description":"Run","parameters":{"type":"object","properties":{"command":{"type":"string"}}}}}]}`
	resp, out := post(t, f.srv.URL+"/tokenize", "", body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	var got struct{ Tokens []int }
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	// What Python's Jinja2 renders (trim_blocks, lstrip_blocks), less the
	// template's own "<s>": the tokenizer adds BOS itself.
	want := `[tools]{"name": "bash", "description": "Run", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}` +
		"[user]hi[assistant]" + `{"name": "bash", "parameters": {"command": "ls", "n": 1}}` + "[tool]a.txt[assistant]"
	tok := f.e.Model().Tok
	ids := tok.Encode(want, true, true)
	if !equalInts(got.Tokens, ids) {
		t.Fatalf("prompt tokens:\n got %q\nwant %q", tok.Decode(got.Tokens, true), tok.Decode(ids, true))
	}
	if got.Tokens[0] != tok.BOS || got.Tokens[1] == tok.BOS {
		t.Fatalf("want exactly one BOS, got %v", got.Tokens[:2])
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestModelTemplateForcedCallsAndCache(t *testing.T) {
	f := start(t, engine.Options{}, Options{ChatTemplate: jinjaTemplate})
	ctx := context.Background()
	msgs := []openai.ChatCompletionMessage{{Role: "system", Content: "You are a coding agent."}, {Role: "user", Content: "List the files."}}
	for seed := range 3 {
		s := seed
		req := openai.ChatCompletionRequest{Messages: msgs, Tools: []openai.Tool{bashTool}, ToolChoice: "required", Temperature: 0.9, Seed: &s, MaxTokens: 400}
		resp, err := f.client.CreateChatCompletion(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		msg := resp.Choices[0].Message
		// Without <tool_call> in the template the forced call is a bare
		// JSON object, and it still comes back as a call, not as content.
		if resp.Choices[0].FinishReason != openai.FinishReasonToolCalls || len(msg.ToolCalls) != 1 || msg.Content != "" {
			t.Fatalf("seed %d: %+v", seed, resp.Choices[0])
		}
		checkBashArgs(t, msg.ToolCalls[0].Function.Arguments)
		req.Stream = true
		stream, err := f.client.CreateChatCompletionStream(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		got := drain(t, stream)
		if got.finish != openai.FinishReasonToolCalls || len(got.calls) != 1 || got.calls[0].Function.Arguments != msg.ToolCalls[0].Function.Arguments {
			t.Fatalf("seed %d streamed: %v %+v", seed, got.finish, got.calls)
		}
		if seed > 0 {
			continue
		}
		turn2 := append(append([]openai.ChatCompletionMessage(nil), msgs...), msg,
			openai.ChatCompletionMessage{Role: "tool", ToolCallID: msg.ToolCalls[0].ID, Content: "README.md"})
		req.Stream, req.Messages = false, turn2
		second, err := f.client.CreateChatCompletion(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		// Turn 1's whole prompt is a prefix of turn 2's.
		if block := resp.Usage.PromptTokens / 16 * 16; second.Usage.PromptTokensDetails.CachedTokens < block {
			t.Fatalf("second turn cached %d tokens, want ≥ %d", second.Usage.PromptTokensDetails.CachedTokens, block)
		}
	}
}

func TestModelTemplateErrors(t *testing.T) {
	f := start(t, engine.Options{}, Options{ChatTemplate: jinjaTemplate})
	resp, body := post(t, f.srv.URL+"/v1/chat/completions", "", `{"messages":[{"role":"developer","content":"x"}]}`)
	if resp.StatusCode != 400 || !strings.Contains(body, "the model's chat template refused the conversation: developer messages are not supported") ||
		!strings.Contains(body, `"param":"messages"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}

	bad := start(t, engine.Options{}, Options{ChatTemplate: "{% if x %}never closed <|im_start|>"})
	srv := New(bad.e, Options{ChatTemplate: "{% if x %}never closed <|im_start|>"})
	if err := srv.TemplateError(); err == nil || !strings.Contains(err.Error(), "line 1: block is not closed") || srv.Template().Name != "chatml" {
		t.Fatalf("template %s, error %v", srv.Template().Name, err)
	}
	r, err := bad.client.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}, MaxTokens: 4})
	if err != nil || r.Usage.CompletionTokens == 0 {
		t.Fatalf("fallback template: %v %+v", err, r)
	}
}
