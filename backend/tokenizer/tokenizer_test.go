package tokenizer

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"jspark/backend/gguf"
)

// vocab holds llama.cpp's tokenizer test vectors (see testdata/README.md).
const vocab = "../../testdata/vocab/"

func load(t testing.TB, path string) *Tokenizer {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// vectors reads llama.cpp's tokenizer test files: inputs separated by
// "\n__ggml_vocab_test__\n", expected ids one line per input.
func vectors(t *testing.T, base string) ([]string, [][]int) {
	inp, err := os.ReadFile(base + ".inp")
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(base + ".out")
	if err != nil {
		t.Fatal(err)
	}
	inputs := strings.Split(string(inp), "\n__ggml_vocab_test__\n")
	inputs = inputs[:len(inputs)-1] // the file ends with a separator
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(inputs) {
		t.Fatalf("%d inputs, %d outputs", len(inputs), len(lines))
	}
	want := make([][]int, len(lines))
	for i, l := range lines {
		for _, f := range strings.Fields(l) {
			n, _ := strconv.Atoi(f)
			want[i] = append(want[i], n)
		}
	}
	return inputs, want
}

func TestLlamaCppVectors(t *testing.T) {
	for _, name := range []string{"llama-spm", "phi-3", "gpt-2", "deepseek-coder", "deepseek-llm"} {
		name := "ggml-vocab-" + name + ".gguf"
		t.Run(name, func(t *testing.T) {
			tok := load(t, vocab+name)
			inputs, want := vectors(t, vocab+name)
			for i, in := range inputs {
				got := tok.Encode(in, false, false)
				if len(got) == 0 {
					got = nil
				}
				if d := cmp.Diff(want[i], got); d != "" {
					t.Errorf("input %d %q (-want +got):\n%s", i, in, d)
				}
				if back := tok.Decode(got, false); utf8.ValidString(in) && strings.TrimPrefix(back, " ") != in && back != in {
					t.Errorf("input %d %q decodes to %q", i, in, back)
				}
			}
		})
	}
}

func TestStoriesPrompts(t *testing.T) {
	tok := load(t, "../embedded/stories260K.gguf")
	cases := map[string][]int{
		"Once upon a time":         {1, 403, 407, 261, 378},
		"One day, a boy named Tom": {1, 385, 328, 432, 261, 268, 414, 422, 395, 274, 287},
		"Sara and Ben":             {1, 301, 295, 412, 269, 368, 302},
	}
	for in, want := range cases {
		if d := cmp.Diff(want, tok.Encode(in, true, true)); d != "" {
			t.Errorf("%q (-want +got):\n%s", in, d)
		}
	}
	if got := tok.Encode("<s>hi", false, true); got[0] != 1 {
		t.Errorf("parseSpecial: %v", got)
	}
	if got := tok.Encode("<s>hi", false, false); got[0] == 1 {
		t.Errorf("without parseSpecial <s> became BOS: %v", got)
	}
}

// FuzzRoundTrip: decoding an encoding gives the text back (SentencePiece
// adds its leading space), and every pre-tokenizer family cuts text into
// non-empty words that join back to it.
func FuzzRoundTrip(f *testing.F) {
	spm := load(f, vocab+"ggml-vocab-llama-spm.gguf")
	var bpe []*Tokenizer
	for _, name := range []string{"gpt-2", "deepseek-coder", "deepseek-llm"} {
		bpe = append(bpe, load(f, vocab+"ggml-vocab-"+name+".gguf"))
	}
	var pres []*preTokenizer
	for _, fam := range preFamilies {
		pt, err := newPreTokenizer(fam.names[0])
		if err != nil {
			f.Fatal(err)
		}
		pres = append(pres, pt)
	}
	for _, s := range []string{"Hello world", " \n\t x", "Führer 3333 's", "🚀 (normal)", "ied 4 ½ months", "", "a  \u3000 1\n", "cafe\u0301 ÉCOLE'S 中文"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		for _, tok := range bpe {
			if got := tok.Decode(tok.Encode(s, false, false), false); got != s {
				t.Fatalf("%s: %q → %q", tok.Pre, s, got)
			}
		}
		got := spm.Decode(spm.Encode(s, false, false), false)
		if s != "" && got != " "+s {
			t.Fatalf("spm: %q → %q", s, got)
		}
		var m matcher
		for _, pt := range pres {
			ws := pt.split([]rune(s), &m)
			if slices.ContainsFunc(ws, func(w []rune) bool { return len(w) == 0 }) || strings.Join(words(ws), "") != s {
				t.Fatalf("%s: %q cut into %q", pt.name, s, words(ws))
			}
		}
	})
}
