package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	openai "github.com/sashabaranov/go-openai"
)

// TestForcedCallCutByMaxTokensNeverLeaksMarkup: a forced call cut at every
// max_tokens from 1 to 60 puts no template markup in content, in chat,
// chat stream and Responses (streamed and not): cut before its name is
// complete there is no call; after it, the call carries a prefix of the
// uncut call's arguments; either way the finish says length.
func TestForcedCallCutByMaxTokensNeverLeaksMarkup(t *testing.T) {
	f := start(t, nil, nil)
	ctx := context.Background()
	req := openai.ChatCompletionRequest{
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "List the files."}},
		Tools:    []openai.Tool{bashTool}, ToolChoice: "required", MaxTokens: 400,
	}
	whole, err := f.client.CreateChatCompletion(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(whole.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("uncut: %+v", whole.Choices[0])
	}
	full := whole.Choices[0].Message.ToolCalls[0].Function
	svc := responsesClient(f)
	var nameless, partial int
	for n := 1; n <= 60; n++ {
		req.MaxTokens = n
		req.Stream = false
		resp, err := f.client.CreateChatCompletion(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		ch := resp.Choices[0]
		cut := n < whole.Usage.CompletionTokens
		wantFinish := openai.FinishReasonToolCalls
		if cut {
			wantFinish = openai.FinishReasonLength
		}
		calls := ch.Message.ToolCalls
		if ch.Message.Content != "" || ch.FinishReason != wantFinish || len(calls) > 1 {
			t.Fatalf("max_tokens %d: content %q, finish %s, calls %+v", n, ch.Message.Content, ch.FinishReason, calls)
		}
		if len(calls) == 1 {
			c := calls[0].Function
			if c.Name != full.Name || !strings.HasPrefix(full.Arguments, c.Arguments) || (!cut && c.Arguments != full.Arguments) {
				t.Fatalf("max_tokens %d: call %+v is not a prefix of %+v", n, c, full)
			}
			partial++
		} else {
			nameless++
		}

		req.Stream = true
		stream, err := f.client.CreateChatCompletionStream(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		got := drain(t, stream)
		if got.text != "" || got.finish != ch.FinishReason || len(got.calls) != len(calls) ||
			(len(calls) == 1 && (got.calls[0].Function.Name != calls[0].Function.Name || got.calls[0].Function.Arguments != calls[0].Function.Arguments)) {
			t.Fatalf("max_tokens %d streamed %+v; not streamed %+v", n, got, ch)
		}

		p := responses.ResponseNewParams{
			Input:           responses.ResponseNewParamsInputUnion{OfString: oa.String("List the files.")},
			Tools:           []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "bash", Description: oa.String(bashTool.Function.Description), Parameters: bashParams}}},
			ToolChoice:      responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: oa.Opt(responses.ToolChoiceOptionsRequired)},
			MaxOutputTokens: oa.Int(int64(n)),
		}
		r, err := svc.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		sr := drainResponses(t, svc, p)
		for _, out := range []*responses.Response{r, &sr.final} {
			if len(out.Output) != len(calls) || (cut && out.Status != "incomplete") {
				t.Fatalf("max_tokens %d: Responses status %s, output %+v; chat calls %+v", n, out.Status, out.Output, calls)
			}
			for _, it := range out.Output {
				if it.Type != "function_call" || it.Name != calls[0].Function.Name || it.Arguments.OfString != calls[0].Function.Arguments {
					t.Fatalf("max_tokens %d: Responses item %+v; chat %+v", n, it, calls[0])
				}
			}
		}
		for _, typ := range sr.types {
			if strings.HasPrefix(typ, "response.output_text") || strings.HasPrefix(typ, "response.content_part") {
				t.Fatalf("max_tokens %d: Responses stream has %s", n, typ)
			}
		}
	}
	if nameless == 0 || partial == 0 {
		t.Fatalf("cuts before the name %d, after it %d: the range misses a case", nameless, partial)
	}
}

// bashParams is bashTool's schema in the Responses SDK's shape.
var bashParams = func() map[string]any {
	b, _ := json.Marshal(bashTool.Function.Parameters)
	var m map[string]any
	json.Unmarshal(b, &m)
	return m
}()
