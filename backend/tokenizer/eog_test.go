package tokenizer

import (
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"jspark/backend/embedded"
	"jspark/backend/gguf"
)

// TestEndOfGenerationMatchesLlamaCpp: the EOT and EOG tokens llama.cpp
// (c392e509) reports when it loads each vocabulary ("print_info: EOG token").
func TestEndOfGenerationMatchesLlamaCpp(t *testing.T) {
	cases := []struct {
		vocab string
		eot   int
		eog   []int
	}{
		{"llama-spm", -1, []int{2}},
		{"phi-3", 32007, []int{32000, 32007}}, // <|endoftext|>, <|end|>
		{"gpt-2", 50256, []int{50256}},
		{"deepseek-coder", 32014, []int{32014}}, // <｜end▁of▁sentence｜>
		{"deepseek-llm", 100001, []int{100001}},
	}
	for _, c := range cases {
		tok := load(t, vocab+"ggml-vocab-"+c.vocab+".gguf")
		if got := slices.Sorted(maps.Keys(tok.EOG)); tok.EOT != c.eot || !slices.Equal(got, c.eog) {
			t.Errorf("%s: EOT %d, EOG %v; llama.cpp: EOT %d, EOG %v", c.vocab, tok.EOT, got, c.eot, c.eog)
		}
	}
}

// TestEndOfGenerationRules: EOT and EOM from their keys or spellings, the
// FIM tokens, and the end-of-turn spellings, which become control tokens.
func TestEndOfGenerationRules(t *testing.T) {
	texts := []string{"<unk>", "<s>", "</s>", "<|im_end|>", "<|eom_id|>", "<|fim_pad|>", "<|file_sep|>", "a", "<turn>", "<|repo_name|>", "<|eot_id|>"}
	build := func(keys map[string]uint32) *Tokenizer {
		t.Helper()
		var w gguf.Writer
		w.AddKV("tokenizer.ggml.model", "llama")
		w.AddKV("tokenizer.ggml.tokens", texts)
		w.AddKV("tokenizer.ggml.scores", make([]float32, len(texts)))
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			w.AddKV(k, keys[k])
		}
		raw, err := w.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Parse("eog.gguf", raw)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := FromGGUF(f)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}

	tok := build(map[string]uint32{"tokenizer.ggml.eot_token_id": 8})
	if tok.EOT != 8 || tok.EOM != 4 {
		t.Errorf("EOT %d EOM %d, want 8 (key) and 4 (<|eom_id|>)", tok.EOT, tok.EOM)
	}
	if d := cmp.Diff([]int{2, 3, 4, 5, 6, 8, 9, 10}, slices.Sorted(maps.Keys(tok.EOG))); d != "" {
		t.Errorf("EOG (-want +got):\n%s", d)
	}
	for _, id := range []int{3, 4, 5, 6, 9, 10} {
		if !tok.IsControl(id) {
			t.Errorf("%s is EOG by its spelling but not a control token", texts[id])
		}
	}
	if tok.IsControl(8) || tok.Decode([]int{7, 8}, false) != "a<turn>" {
		t.Errorf("a keyed EOT keeps its type: %q", tok.Decode([]int{7, 8}, false))
	}

	// Keys win over spellings; without a key the first spelling is EOT.
	tok = build(map[string]uint32{"tokenizer.ggml.eom_token_id": 7, "tokenizer.ggml.fim_pad_token_id": 1})
	if tok.EOT != 10 || tok.EOM != 7 || !tok.EOG[1] || !tok.EOG[7] {
		t.Errorf("EOT %d (want 10, <|eot_id|>), EOM %d (want 7), EOG %v", tok.EOT, tok.EOM, tok.EOG)
	}
}

// TestLlama2cModelsEndOnBOS: a model converted from llama2.c (the embedded
// stories260K) ends its texts with BOS, as llama2.c's run.c expects, so BOS
// joins its end-of-generation set; the same vocabulary without the
// converter's marks keeps BOS out.
func TestLlama2cModelsEndOnBOS(t *testing.T) {
	f, err := embedded.Open()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(tok.EOG)); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("embedded stories260K: EOG %v, want [1 2] (BOS and EOS)", got)
	}
	if tok := load(t, vocab+"ggml-vocab-llama-spm.gguf"); tok.EOG[tok.BOS] {
		t.Errorf("llama-spm (not from llama2.c): BOS %d is EOG", tok.BOS)
	}
}
