package server

import (
	"testing"

	"jspark/backend/chat"
	"jspark/backend/tokenizer"
)

// A format's markers that the vocabulary holds as control tokens (which
// decode to nothing) are rendered for its parser; other control tokens,
// and those that end generation, are not.
func TestPreservedMarkers(t *testing.T) {
	js := `{"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"added_tokens":[
		{"id":1,"content":"<arg_key>","special":true},{"id":2,"content":"</arg_key>","special":true},
		{"id":3,"content":"<tool_call>","special":false},{"id":4,"content":"<|endoftext|>","special":true},
		{"id":5,"content":"[TOOL_CALLS]","special":true}],
		"pre_tokenizer":{"type":"ByteLevel","use_regex":true}}`
	f, err := tokenizer.FromHF("t", []byte(js), nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	for format, want := range map[chat.Format][]int{chat.FormatGLM: {1, 2}, chat.FormatMistral: {5}, chat.FormatHermes: nil} {
		got := preservedIDs(tok, format)
		if len(got) != len(want) {
			t.Errorf("%s: %v, want %v", format, got, want)
		}
		for _, id := range want {
			if !got[id] {
				t.Errorf("%s: %v, want %v", format, got, want)
			}
			if piece := string(tok.AppendPiece(nil, id, got[id])); piece != tok.Text(id) {
				t.Errorf("%s: token %d renders %q", format, id, piece)
			}
		}
	}
}
