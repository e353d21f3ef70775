package server

import (
	"encoding/json"
	"strings"
	"testing"

	"jspark/backend/chat"
	"jspark/backend/usage"
)

// TestUsageCarriesTiming: chat, completions and Responses report where the
// request's time went in usage.jspark.timing.
func TestUsageCarriesTiming(t *testing.T) {
	f := start(t, nil, nil)
	for path, body := range map[string]string{
		"/v1/chat/completions": `{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":8,"temperature":0}`,
		"/v1/completions":      `{"prompt":"Once upon a time","max_tokens":8,"temperature":0}`,
		"/v1/responses":        `{"input":"Once upon a time","max_output_tokens":8,"temperature":0}`,
	} {
		_, got := post(t, f.srv.URL+path, "", body)
		var r struct {
			Usage struct {
				Jspark *usage.Jspark `json:"jspark"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(got), &r); err != nil || r.Usage.Jspark == nil {
			t.Fatalf("%s: no usage.jspark in %s (%v)", path, got, err)
		}
		j := r.Usage.Jspark
		if j.Timing.PrefillSec <= 0 || j.Timing.DecodeSec <= 0 || j.ComputedTokens+j.ReusedTokens == 0 {
			t.Fatalf("%s: usage.jspark %+v", path, j)
		}
	}
}

// TestUsageNamesDivergence: two chats whose system prompts differ at one
// word: the second's usage.jspark.divergence names the first changed token
// position of its prompt and both tokens' text.
func TestUsageNamesDivergence(t *testing.T) {
	f := start(t, nil, nil)
	system := func(word string) string {
		return "You are a careful assistant who answers in short sentences and never guesses. " +
			"The sky in this story is " + word + " and the sea is calm."
	}
	body := func(word string) string {
		b, _ := json.Marshal(map[string]any{"max_tokens": 2, "temperature": 0, "messages": []map[string]string{
			{"role": "system", "content": system(word)}, {"role": "user", "content": "Tell me about the sky."}}})
		return string(b)
	}
	div := func(word string) *usage.Divergence {
		_, got := post(t, f.srv.URL+"/v1/chat/completions", "", body(word))
		var r struct {
			Usage struct {
				Jspark *usage.Jspark `json:"jspark"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(got), &r); err != nil || r.Usage.Jspark == nil {
			t.Fatalf("no usage.jspark in %s (%v)", got, err)
		}
		return r.Usage.Jspark.Divergence
	}
	if d := div("green"); d != nil {
		t.Fatalf("the first request reports a divergence: %+v", d)
	}
	d := div("yellow")
	// Where the two rendered prompts first differ, by the server's own
	// rendering and tokenizer.
	s := New(f.e, DefaultOptions())
	render := func(word string) []int {
		ids, _, err := s.chatPrompt([]chat.Message{{Role: "system", Content: chat.Content(system(word))},
			{Role: "user", Content: chat.Content("Tell me about the sky.")}}, nil, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	a, b := render("green"), render("yellow")
	at := 0
	for at < len(a) && a[at] == b[at] {
		at++
	}
	tok := f.e.Model().Tok
	t.Logf("divergence %+v", d)
	if d == nil || d.Reason != "changed" || d.Position != at || d.Token != b[at] || d.Was != a[at] {
		t.Fatalf("divergence %+v, want changed at %d (%d, was %d)", d, at, b[at], a[at])
	}
	if d.Text != string(tok.AppendPiece(nil, b[at], true)) || d.WasText != string(tok.AppendPiece(nil, a[at], true)) ||
		!strings.Contains(" yellow", d.Text) || !strings.Contains(" green", d.WasText) {
		t.Fatalf("divergence texts %q (was %q): want pieces of \" yellow\" and \" green\"", d.Text, d.WasText)
	}
}
