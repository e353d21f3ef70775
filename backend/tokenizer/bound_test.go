package tokenizer

import (
	"strings"
	"testing"

	"jspark/backend/gguf"
)

// vocabOf builds a SentencePiece tokenizer of texts (scores 0).
func vocabOf(t *testing.T, texts []string, types []int32) *Tokenizer {
	t.Helper()
	var w gguf.Writer
	w.AddKV("tokenizer.ggml.model", "llama")
	w.AddKV("tokenizer.ggml.tokens", texts)
	w.AddKV("tokenizer.ggml.scores", make([]float32, len(texts)))
	if types != nil {
		w.AddKV("tokenizer.ggml.token_type", types)
	}
	raw, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse("vocab.gguf", raw)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// One huge token (a 32 MiB vocabulary entry) must not void the prompt's
// length bound: a 30 MB prompt that does not hold it is still bounded by
// the vocabulary's ordinary tokens, without being tokenized.
func TestOneHugeTokenDoesNotVoidTheBound(t *testing.T) {
	huge := strings.Repeat("x", 32<<20)
	tok := vocabOf(t, []string{"<unk>", "<s>", "</s>", "ab", "abcd", huge}, nil)
	prompt := strings.Repeat("abcd ", 6<<20)                           // 30 MB
	if got, want := tok.MinTokens(prompt), len(prompt)/5; got < want { // "abcd" is the longest piece that can occur
		t.Fatalf("MinTokens = %d for %d bytes, want at least %d", got, len(prompt), want)
	}
	// Where the text holds the huge token, it may span all of it.
	if got := tok.MinTokens("y" + huge); got != 1 {
		t.Fatalf("MinTokens of a text holding the huge token = %d, want 1", got)
	}
	// More long tokens than are looked for: the longest bounds them all.
	texts := []string{"<unk>", "<s>", "</s>"}
	for i := range maxLongScan + 1 {
		texts = append(texts, strings.Repeat(string(rune('a'+i%26)), longPiece+1+i))
	}
	if got := vocabOf(t, texts, nil).MinTokens(strings.Repeat("z", 1000)); got != 1000/(longPiece+1+maxLongScan) {
		t.Fatalf("many long tokens: MinTokens = %d", got)
	}
}

// Harmony's vocabulary: <|return|> and <|call|> end a turn, <|end|> does
// not (a turn goes on after an analysis message), and the header tokens
// render as text (llama.cpp's handling of gpt-oss).
func TestHarmonyTokens(t *testing.T) {
	texts := []string{"<unk>", "<s>", "<|return|>", "<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|call|>", "a"}
	types := []int32{2, 3, 3, 3, 3, 3, 3, 3, 3, 1}
	tok := vocabOf(t, texts, types)
	for id, want := range map[int]bool{2: true, 8: true, 4: false} {
		if tok.EOG[id] != want {
			t.Errorf("%s: EOG %v, want %v", texts[id], tok.EOG[id], want)
		}
	}
	if got := tok.Decode([]int{3, 6, 5, 4, 9, 8}, false); got != "<|start|><|channel|><|message|>a" {
		t.Errorf("rendered %q", got)
	}
}
