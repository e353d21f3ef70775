package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	openai "github.com/sashabaranov/go-openai"

	"jspark/backend/chat"
)

// responsesClient is OpenAI's own Go SDK pointed at the server: a real
// client of the Responses API.
func responsesClient(f *fixture) *responses.ResponseService {
	c := oa.NewClient(option.WithBaseURL(f.srv.URL+"/v1/"), option.WithAPIKey("none"), option.WithMaxRetries(0))
	return &c.Responses
}

var lsTool = responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
	Name: "ls", Description: oa.String("List a directory"),
	Parameters: map[string]any{"type": "object", "properties": map[string]any{"dir": map[string]any{"type": "string", "maxLength": 12}}, "required": []string{"dir"}},
}}

// streamedResponse is what a Responses stream delivered: the events'
// types in order, each item's deltas joined, and the final response.
type streamedResponse struct {
	types  []string
	deltas map[string]string // item id → text or arguments from deltas
	final  responses.Response
}

func drainResponses(t *testing.T, svc *responses.ResponseService, p responses.ResponseNewParams) streamedResponse {
	t.Helper()
	stream := svc.NewStreaming(context.Background(), p)
	defer stream.Close()
	out := streamedResponse{deltas: map[string]string{}}
	for stream.Next() {
		ev := stream.Current()
		if want := int64(len(out.types)); ev.SequenceNumber != want {
			t.Fatalf("event %s has sequence_number %d, want %d", ev.Type, ev.SequenceNumber, want)
		}
		out.types = append(out.types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta", "response.reasoning_text.delta", "response.function_call_arguments.delta":
			out.deltas[ev.ItemID] += ev.Delta
		case "response.completed", "response.incomplete":
			out.final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestResponsesLikeChat: a Responses request is served as the equivalent
// chat request: the same prompt, the same greedy text, streamed or not.
func TestResponsesLikeChat(t *testing.T) {
	f := start(t, nil, nil)
	svc := responsesClient(f)
	p := responses.ResponseNewParams{
		Instructions: oa.String("You tell stories."), Input: responses.ResponseNewParamsInputUnion{OfString: oa.String("Once upon a time")},
		MaxOutputTokens: oa.Int(12), Temperature: oa.Float(0),
	}
	got, err := svc.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	// go-openai drops a zero temperature, so the chat twin goes raw.
	resp, body := post(t, f.srv.URL+"/v1/chat/completions", "", `{"max_tokens":12,"temperature":0,"messages":[{"role":"system","content":"You tell stories."},{"role":"user","content":"Once upon a time"}]}`)
	var want openai.ChatCompletionResponse
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &want) != nil {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if got.OutputText() != want.Choices[0].Message.Content || got.Usage.InputTokens != int64(want.Usage.PromptTokens) ||
		got.Usage.OutputTokens != 12 || got.Status != "incomplete" || got.IncompleteDetails.Reason != "max_output_tokens" ||
		len(got.Output) != 1 || got.Output[0].Type != "message" || got.Output[0].Status != "incomplete" {
		t.Fatalf("responses %+v\nchat %+v", got, want)
	}

	s := drainResponses(t, svc, p)
	wantTypes := "response.created response.in_progress response.output_item.added response.content_part.added " +
		strings.Repeat("response.output_text.delta ", len(s.types)-8) +
		"response.output_text.done response.content_part.done response.output_item.done response.incomplete"
	if strings.Join(s.types, " ") != wantTypes {
		t.Fatalf("events %v", s.types)
	}
	item := s.final.Output[0]
	if s.final.OutputText() != got.OutputText() || s.deltas[item.ID] != got.OutputText() || s.final.Usage.OutputTokens != 12 {
		t.Fatalf("streamed %q (deltas %q), not streamed %q", s.final.OutputText(), s.deltas[item.ID], got.OutputText())
	}
}

// TestResponsesToolTurns is a Codex-shaped exchange: a forced function
// call, then the next request with the call and its output as input items,
// which the prefix cache serves up to the first request's prompt.
func TestResponsesToolTurns(t *testing.T) {
	f := start(t, nil, nil)
	svc := responsesClient(f)
	input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("List the files.", responses.EasyInputMessageRoleUser)}
	p := responses.ResponseNewParams{
		Instructions: oa.String("You are a coding agent."), Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input},
		Tools:           []responses.ToolUnionParam{lsTool, {OfWebSearch: &responses.WebSearchToolParam{Type: "web_search"}}},
		ToolChoice:      responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: oa.Opt(responses.ToolChoiceOptionsRequired)},
		MaxOutputTokens: oa.Int(200), Temperature: oa.Float(0), Store: oa.Bool(false),
	}
	first, err := svc.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if first.Status != "completed" || len(first.Output) != 1 || first.Output[0].Type != "function_call" {
		t.Fatalf("first: %+v", first)
	}
	call := first.Output[0].AsFunctionCall()
	var args struct{ Dir string }
	if call.Name != "ls" || !strings.HasPrefix(call.CallID, "call_") || json.Unmarshal([]byte(call.Arguments), &args) != nil || len(args.Dir) > 12 {
		t.Fatalf("call %+v", call)
	}
	s := drainResponses(t, svc, p)
	sc := s.final.Output[0].AsFunctionCall()
	if s.deltas[sc.ID] != call.Arguments || sc.Arguments != call.Arguments || s.types[2] != "response.output_item.added" {
		t.Fatalf("streamed call %+v (deltas %q), not streamed %+v", sc, s.deltas[sc.ID], call)
	}

	out := responses.ResponseInputItemParamOfFunctionCallOutput("README.md\nmain.go")
	out.OfFunctionCallOutput.CallID = oa.String(call.CallID)
	p.Input.OfInputItemList = append(input, responses.ResponseInputItemParamOfFunctionCall(call.Arguments, call.CallID, call.Name), out)
	second, err := svc.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if block := first.Usage.InputTokens / 16 * 16; second.Usage.InputTokensDetails.CachedTokens < block {
		t.Fatalf("second turn cached %d, want ≥ %d", second.Usage.InputTokensDetails.CachedTokens, block)
	}
	// The same turn through chat renders the same prompt.
	chatReq := openai.ChatCompletionRequest{MaxTokens: 1, Messages: []openai.ChatCompletionMessage{
		{Role: "system", Content: "You are a coding agent."}, {Role: "user", Content: "List the files."},
		{Role: "assistant", ToolCalls: []openai.ToolCall{{ID: call.CallID, Type: "function", Function: openai.FunctionCall{Name: "ls", Arguments: call.Arguments}}}},
		{Role: "tool", ToolCallID: call.CallID, Content: "README.md\nmain.go"}},
		Tools: []openai.Tool{{Type: "function", Function: &openai.FunctionDefinition{Name: "ls", Description: "List a directory",
			Parameters: lsTool.OfFunction.Parameters}}}}
	viaChat, err := f.client.CreateChatCompletion(context.Background(), chatReq)
	if err != nil {
		t.Fatal(err)
	}
	if int64(viaChat.Usage.PromptTokens) != second.Usage.InputTokens {
		t.Fatalf("responses prompt %d tokens, chat %d", second.Usage.InputTokens, viaChat.Usage.PromptTokens)
	}
}

// TestResponsesReasoning: a thinking model's block is a reasoning item,
// streamed as reasoning_text deltas, and goes back as input.
func TestResponsesReasoning(t *testing.T) {
	f := start(t, nil, func(o *Options) { o.ChatTemplate = thinkingTemplate })
	svc := responsesClient(f)
	p := responses.ResponseNewParams{Input: responses.ResponseNewParamsInputUnion{OfString: oa.String("Tell me a story.")}, MaxOutputTokens: oa.Int(10), Temperature: oa.Float(0)}
	got, err := svc.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Output) != 1 || got.Output[0].Type != "reasoning" || len(got.Output[0].Content) != 1 || got.Output[0].Content[0].Text == "" {
		t.Fatalf("%+v", got.Output)
	}
	text := got.Output[0].Content[0].Text
	s := drainResponses(t, svc, p)
	if it := s.final.Output[0]; s.deltas[it.ID] != text || !strings.Contains(strings.Join(s.types, " "), "response.reasoning_text.done") {
		t.Fatalf("streamed reasoning %q, events %v", s.deltas[it.ID], s.types)
	}
	b, _ := json.Marshal(map[string]any{"input": []any{
		map[string]any{"role": "user", "content": "Tell me a story."},
		map[string]any{"type": "reasoning", "summary": []any{}, "content": []any{map[string]any{"type": "reasoning_text", "text": text}}},
		map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": "The end."}}},
		map[string]any{"role": "user", "content": "More."}}})
	var r ResponsesRequest
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	cr, _, err := r.chatRequest()
	if err != nil {
		t.Fatal(err)
	}
	if m := cr.Messages; len(m) != 3 || m[1].Role != "assistant" || m[1].ReasoningContent != text || m[1].Content != "The end." {
		t.Fatalf("messages %+v", m)
	}
}

func TestResponsesErrors(t *testing.T) {
	f := start(t, nil, nil)
	for _, c := range []struct {
		body, want string
	}{
		{`{"input":"x","previous_response_id":"resp_1"}`, `"param":"previous_response_id"`},
		{`{"input":[{"type":"item_reference","id":"x"}]}`, `input[0].type \"item_reference\" is not supported`},
		{`{"input":[{"role":"user","content":"x"},{"type":"function_call_output","output":"y"}]}`, `input[1]: a function_call_output needs call_id`},
		{`{"input":[{"role":"tool","content":"x"}]}`, `input[0].role \"tool\" is not user, system, developer or assistant`},
		{`{"input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`, `content part of type \"input_image\" is not supported`},
		{`{"input":42}`, `"param":"input"`},
		{`{"input":"x","tool_choice":{"type":"allowed_tools"}}`, `"param":"tool_choice"`},
		{`{"input":"x","temperature":3}`, `temperature 3 is outside [0, 2]`},
	} {
		resp, body := post(t, f.srv.URL+"/v1/responses", "", c.body)
		if resp.StatusCode != 400 || !strings.Contains(body, c.want) || !strings.HasPrefix(body, `{"error":{"message":`) {
			t.Errorf("%s: %d %s; want 400 with %s", c.body, resp.StatusCode, body, c.want)
		}
	}
}

// An assistant turn arrives as items (reasoning, text, calls); each turn
// becomes one assistant message, and the next reasoning or text after text
// or calls starts the next turn.
func TestResponsesInputTurns(t *testing.T) {
	in := `[{"role":"user","content":"go"},
		{"type":"reasoning","summary":[{"type":"summary_text","text":"plan"}]},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Looking."}]},
		{"type":"function_call","call_id":"c1","name":"ls","arguments":"{}"},
		{"type":"function_call","call_id":"c2","name":"cat","arguments":"{\"p\":1}"},
		{"type":"function_call_output","call_id":"c1","output":"a"},
		{"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"b"}]},
		{"type":"message","role":"assistant","content":"Done."},
		{"type":"reasoning","content":[{"type":"reasoning_text","text":"again"}]},
		{"type":"function_call","call_id":"c3","name":"ls","arguments":"{}"}]`
	got, err := inputMessages(json.RawMessage(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []chat.Message{
		{Role: "user", Content: "go"},
		{Role: "assistant", Content: "Looking.", ReasoningContent: "plan", ToolCalls: []chat.ToolCall{
			{ID: "c1", Type: "function", Function: chat.FunctionCall{Name: "ls", Arguments: "{}"}},
			{ID: "c2", Type: "function", Function: chat.FunctionCall{Name: "cat", Arguments: `{"p":1}`}}}},
		{Role: "tool", ToolCallID: "c1", Content: "a"},
		{Role: "tool", ToolCallID: "c2", Content: "b"},
		{Role: "assistant", Content: "Done."},
		{Role: "assistant", ReasoningContent: "again", ToolCalls: []chat.ToolCall{{ID: "c3", Type: "function", Function: chat.FunctionCall{Name: "ls", Arguments: "{}"}}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("messages (-want +got):\n%s", diff)
	}
}
