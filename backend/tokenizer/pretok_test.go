package tokenizer

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"jspark/backend/gguf"
)

// llamaCppInputs are the inputs of llama.cpp's tokenizer tests.
func llamaCppInputs(t *testing.T) []string {
	raw, err := os.ReadFile(vocab + "ggml-vocab-gpt-2.gguf.inp")
	if err != nil {
		t.Fatal(err)
	}
	inputs := strings.Split(string(raw), "\n__ggml_vocab_test__\n")
	return inputs[:len(inputs)-1]
}

// handChecked are families tested by TestPreTokenizerCases instead of
// against llama.cpp: Qwen 3.5 and Kimi-K2 are newer than its commit, and
// for Tekken llama.cpp runs a std::regex rewrite that drops combining
// marks. gpt-4o is checked against gpt-oss's own tokenizer (TestHFVectors).
var handChecked = []string{"qwen35", "tekken", "kimi-k2", "gpt-4o"}

// TestPreTokenizersMatchLlamaCpp: each family splits llama.cpp's tokenizer
// inputs into the words llama.cpp's unicode_regex_split makes (see
// testdata/README.md), and every family of the table is checked here, by
// hand below, or shares its regexes with a family checked here.
func TestPreTokenizersMatchLlamaCpp(t *testing.T) {
	raw, err := os.ReadFile("testdata/pretok-llamacpp.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden map[string][][]string
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	inputs := llamaCppInputs(t)
	for name, want := range golden {
		pt, err := newPreTokenizer(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) != len(inputs) {
			t.Fatalf("%s: %d splits for %d inputs", name, len(want), len(inputs))
		}
		var m matcher
		for i, in := range inputs {
			got := words(pt.split([]rune(in), &m))
			if len(want[i]) == 0 {
				want[i] = nil
			}
			if d := cmp.Diff(want[i], got); d != "" {
				t.Errorf("%s: input %d %q (-llama.cpp +ours):\n%s", name, i, in, d)
			}
		}
	}
	for _, f := range preFamilies {
		covered := slices.Contains(handChecked, f.names[0])
		for _, g := range preFamilies {
			if _, ok := golden[g.names[0]]; ok && slices.Equal(f.regexes, g.regexes) {
				covered = true
			}
		}
		if !covered {
			t.Errorf("family %v is tested nowhere", f.names)
		}
	}
}

// TestPreTokenizerCases: the families llama.cpp's splits do not check, on
// inputs that show what sets them apart (checked against JavaScript's
// RegExp with the u flag).
func TestPreTokenizerCases(t *testing.T) {
	cases := []struct {
		pre, in string
		want    []string
	}{
		// Tekken splits words at case changes and keeps marks in words.
		{"tekken", "កាន់តែពិសេស", []string{"កាន់តែពិសេស"}},
		{"tekken", "HTTPServer ExÀ I've a/b\n\nx", []string{"HTTPServer", " Ex", "À", " I", "'ve", " a", "/b", "\n\n", "x"}},
		{"tekken", "ÉCOLE élève ŞEHİR", []string{"ÉCOLE", " élève", " ŞEHİR"}},
		// Qwen 3.5 keeps a combining mark in its word; Qwen 2 does not.
		{"qwen35", "cafe\u0301s 123 'S", []string{"cafe\u0301s", " ", "1", "2", "3", " '", "S"}},
		{"qwen2", "cafe\u0301s 123 'S", []string{"cafe", "\u0301s", " ", "1", "2", "3", " '", "S"}},
		// Kimi-K2 keeps runs of Han apart, and out of its letter classes
		// (a class intersection, [\p{Lo}&&[^\p{Han}]]); kana stay letters.
		{"kimi-k2", "你好world 世界Hello", []string{"你好", "world", " ", "世界", "Hello"}},
		{"kimi-k2", "It's 12345 日本語のテキスト", []string{"It's", " ", "123", "45", " ", "日本語", "のテキスト"}},
		{"gpt-4o", "你好world It'S", []string{"你好world", " It'S"}},
	}
	for _, c := range cases {
		pt, err := newPreTokenizer(c.pre)
		if err != nil {
			t.Fatal(err)
		}
		var m matcher
		if d := cmp.Diff(c.want, words(pt.split([]rune(c.in), &m))); d != "" {
			t.Errorf("%s %q (-want +got):\n%s", c.pre, c.in, d)
		}
	}
	_, err := newPreTokenizer("no-such-family")
	if err == nil || !strings.Contains(err.Error(), `unsupported BPE pre-tokenizer "no-such-family" (supported: bloom, chatglm-bpe, codeshell,`) {
		t.Errorf("unknown family: %v", err)
	}
}

// TestPreTokenizerLinear: inputs that make plain backtracking quadratic
// (deepseek-llm's \s+$ retried at every space of a long run) cost a bounded
// number of steps per rune and instruction in every family; without the
// memo the first costs over 1000.
func TestPreTokenizerLinear(t *testing.T) {
	texts := []string{
		strings.Repeat(" ", 20000) + "1",
		strings.Repeat(" \t", 10000) + "x",
		strings.Repeat("\u3000", 20000) + "1",
		strings.Repeat("A", 20000) + "1",
		strings.Repeat("1 ", 10000),
		strings.Repeat("'", 20000),
		strings.Repeat("a\u0301", 10000),
	}
	for _, f := range preFamilies {
		pt, err := newPreTokenizer(f.names[0])
		if err != nil {
			t.Fatal(err)
		}
		insts := 0
		for _, p := range pt.regexes {
			insts += len(p.inst)
		}
		for _, s := range texts {
			var m matcher
			r := []rune(s)
			if got := strings.Join(words(pt.split(r, &m)), ""); got != s {
				t.Fatalf("%s: words do not join back to the text", f.names[0])
			}
			if per := float64(m.total) / float64(len(r)*insts); per > 8 {
				t.Errorf("%s on %q…: %.1f steps per rune and instruction", f.names[0], s[:4], per)
			}
		}
	}
}

// TestIgnoreMerges: Llama 3's pre-tokenizer takes a word that is itself a
// token as that token, even where no merge reaches it; dbrx, with the same
// regex, merges.
func TestIgnoreMerges(t *testing.T) {
	for pre, want := range map[string][]int{"llama-bpe": {4}, "dbrx": {3, 2}} {
		var w gguf.Writer
		w.AddKV("tokenizer.ggml.model", "gpt2")
		w.AddKV("tokenizer.ggml.pre", pre)
		w.AddKV("tokenizer.ggml.tokens", []string{"a", "b", "c", "ab", "abc"})
		w.AddKV("tokenizer.ggml.merges", []string{"a b"})
		raw, err := w.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Parse(pre+".gguf", raw)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := FromGGUF(f)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, tok.Encode("abc", false, false)); d != "" {
			t.Errorf("%s (-want +got):\n%s", pre, d)
		}
	}
}
