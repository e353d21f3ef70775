package server

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"jspark/backend/gguf"
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
	f := start(t, nil, func(o *Options) { o.ChatTemplate = jinjaTemplate })
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
	f := start(t, nil, func(o *Options) { o.ChatTemplate = jinjaTemplate })
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
	f := start(t, nil, func(o *Options) { o.ChatTemplate = jinjaTemplate })
	resp, body := post(t, f.srv.URL+"/v1/chat/completions", "", `{"messages":[{"role":"developer","content":"x"}]}`)
	if resp.StatusCode != 400 || !strings.Contains(body, "the model's chat template refused the conversation: developer messages are not supported") ||
		!strings.Contains(body, `"param":"messages"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}

	bad := start(t, nil, func(o *Options) { o.ChatTemplate = "{% if x %}never closed <|im_start|>" })
	srv := New(bad.e, serverOptions(func(o *Options) { o.ChatTemplate = "{% if x %}never closed <|im_start|>" }))
	if err := srv.TemplateError(); err == nil || !strings.Contains(err.Error(), "line 1: block is not closed") || srv.Template().Name != "chatml" {
		t.Fatalf("template %s, error %v", srv.Template().Name, err)
	}
	r, err := bad.client.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}, MaxTokens: 4})
	if err != nil || r.Usage.CompletionTokens == 0 {
		t.Fatalf("fallback template: %v %+v", err, r)
	}
}

// A thinking template (DeepSeek-R1's way: the generation prompt opens the
// block; enable_thinking false closes it, as Qwen3's does) that keeps
// reasoning in history.
const thinkingTemplate = `{% for m in messages %}[{{ m.role }}]
{%- if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}{{ m.content }}
{% endfor %}
{%- if add_generation_prompt %}[assistant]<think>
{%- if enable_thinking is defined and not enable_thinking %}</think>{% endif %}{% endif %}`

// TestReasoningContent: with a thinking template the output's reasoning
// block comes back as reasoning_content, streamed and not; the same bytes
// are content when the server's reasoning format is none.
func TestReasoningContent(t *testing.T) {
	ctx := context.Background()
	think := start(t, nil, func(o *Options) { o.ChatTemplate = thinkingTemplate })
	plain := start(t, nil, func(o *Options) { o.ChatTemplate, o.ReasoningFormat = thinkingTemplate, "none" })
	msgs := []openai.ChatCompletionMessage{{Role: "user", Content: "Tell me a story."}}
	// go-openai cannot send temperature 0; both servers sample with the same
	// default seed, so they draw the same tokens.
	req := openai.ChatCompletionRequest{Messages: msgs, MaxTokens: 24}
	raw, err := plain.client.CreateChatCompletion(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	text := raw.Choices[0].Message.Content
	if raw.Choices[0].Message.ReasoningContent != "" || strings.TrimSpace(text) == "" {
		t.Fatalf("reasoning format none: %+v", raw.Choices[0].Message)
	}
	// The prompt opened the block and the model never closes it: all of
	// the output is reasoning, without its edge whitespace.
	got, err := think.client.CreateChatCompletion(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	msg := got.Choices[0].Message
	if msg.ReasoningContent != strings.TrimSpace(text) || msg.Content != "" || got.Usage.CompletionTokens != 24 {
		t.Fatalf("reasoning %q content %q; want reasoning %q", msg.ReasoningContent, msg.Content, strings.TrimSpace(text))
	}
	req.Stream = true
	stream, err := think.client.CreateChatCompletionStream(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if s := drain(t, stream); s.reasoning != msg.ReasoningContent || s.text != "" || s.finish != "length" {
		t.Fatalf("streamed reasoning %q content %q finish %q", s.reasoning, s.text, s.finish)
	}

	// enable_thinking false closes the block in the prompt: the output is
	// content, byte for byte what the plain server returns.
	req.Stream, req.ChatTemplateKwargs = false, map[string]any{"enable_thinking": false}
	off, err := think.client.CreateChatCompletion(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	want, err := plain.client.CreateChatCompletion(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if m := off.Choices[0].Message; m.ReasoningContent != "" || m.Content != want.Choices[0].Message.Content || m.Content == "" {
		t.Fatalf("thinking off: %+v, want content %q", m, want.Choices[0].Message.Content)
	}

	// The next turn sends the reasoning back; the template writes it, and
	// the first turn's prompt is served from the cache.
	req.ChatTemplateKwargs = nil
	req.Messages = append(append([]openai.ChatCompletionMessage(nil), msgs...), msg, openai.ChatCompletionMessage{Role: "user", Content: "More."})
	b, _ := json.Marshal(map[string]any{"messages": req.Messages})
	resp, body := post(t, think.srv.URL+"/tokenize", "", string(b))
	var tk struct{ Tokens []int }
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &tk) != nil {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	tok := think.e.Model().Tok
	if p := tok.Decode(tk.Tokens, false); !strings.Contains(p, "[assistant]<think>"+msg.ReasoningContent+"</think>\n[user]More.") {
		t.Fatalf("second prompt %q lacks the reasoning", p)
	}
	second, err := think.client.CreateChatCompletion(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if block := got.Usage.PromptTokens / 16 * 16; second.Usage.PromptTokensDetails.CachedTokens < block {
		t.Fatalf("second turn cached %d, want ≥ %d", second.Usage.PromptTokensDetails.CachedTokens, block)
	}

	// Variables the server sets itself are not the request's to replace.
	resp, body = post(t, think.srv.URL+"/v1/chat/completions", "", `{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"messages":[]}}`)
	if resp.StatusCode != 400 || !strings.Contains(body, "chat_template_kwargs may not set messages") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

// TestHugeGGUFTemplateIsNotKept: a model file whose chat template is 50 MB
// (a GGUF from the internet carries its own) serves with the built-in
// template and a warning, and neither the file nor the server keeps the
// 50 MB once it is refused.
func TestHugeGGUFTemplateIsNotKept(t *testing.T) {
	f := start(t, nil, nil)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	file := func() *gguf.File {
		var w gguf.Writer
		w.AddKV("general.architecture", "llama")
		w.AddKV("tokenizer.chat_template", "<|im_start|>{% for m in messages %}{{ m.content }}{% endfor %}"+strings.Repeat(" ", 50<<20))
		data, err := w.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		file, err := gguf.Parse("huge-template.gguf", data)
		if err != nil {
			t.Fatal(err)
		}
		return file
	}()
	srv := New(f.e, serverOptions(func(o *Options) { o.ChatTemplate = ChatTemplateOf(file) }))
	if err := srv.TemplateError(); err == nil || !strings.Contains(err.Error(), "over the 1024 KiB a template may have") || srv.Template().Name != "chatml" {
		t.Fatalf("template %s, error %v", srv.Template().Name, err)
	}
	if after := heap(); after > before+16<<20 {
		t.Fatalf("the refused 50 MB template is kept: heap %d MiB before the file, %d after", before>>20, after>>20)
	}
	runtime.KeepAlive(file)
	runtime.KeepAlive(srv)
}
