package tokenizer

import (
	"os"
	"strings"
	"testing"
)

// benchText is a long prompt-like text: the stories references (JSON lines of
// English) and llama.cpp's tokenizer inputs (code, whitespace runs, many
// scripts, emoji), repeated to about 64 KB as agent prompts are.
func benchText(b *testing.B) string {
	var parts []string
	for _, p := range []string{"../../testdata/refs/stories260K-greedy.jsonl", vocab + "ggml-vocab-gpt-2.gguf.inp"} {
		s, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		parts = append(parts, string(s))
	}
	one := strings.Join(parts, "\n")
	return strings.Repeat(one, 64<<10/len(one)+1)[:64<<10]
}

func BenchmarkEncode(b *testing.B) {
	text := benchText(b)
	for _, name := range []string{"llama-spm", "gpt-2", "deepseek-llm"} {
		b.Run(name, func(b *testing.B) {
			tok := load(b, vocab+"ggml-vocab-"+name+".gguf")
			b.SetBytes(int64(len(text)))
			var n int
			for b.Loop() {
				n = len(tok.Encode(text, false, false))
			}
			b.ReportMetric(float64(n), "tokens")
		})
	}
}
