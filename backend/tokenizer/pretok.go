package tokenizer

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// A byte-level BPE vocabulary first cuts text into words with its
// pre-tokenizer: a list of regexes, each applied in turn to every piece the
// previous ones left. A regex splits a piece into its matches and the runs
// between them, all kept (Hugging Face's Split with "isolated" behaviour,
// and what llama.cpp's unicode_regex_split does). The regexes are the ones
// the models' tokenizer.json files state; a family is one entry below.
//
// Where llama.cpp rewrote a regex for std::regex (the (?i:…) contractions,
// Tekken's letter classes) the entry keeps the original, which our engine
// reads. The classes follow Unicode (Go's tables), as Hugging Face's do;
// llama.cpp maps non-ASCII runes to one byte per category before matching,
// so it differs on rare inputs: '~' is not \p{S} there, a non-ASCII space
// inside an explicit range (deepseek-llm's U+3000) is not matched, and
// Tekken cannot tell upper from lower case beyond ASCII.
type preTokenizer struct {
	name    string
	regexes []*prog
	// ignoreMerges: a word that is itself a token becomes that token
	// without merging (Hugging Face's ignore_merges, set for Llama 3).
	ignoreMerges bool
}

// Regexes more than one family uses.
const (
	reGPT2   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
	reLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reQwen2  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reCJK    = `[一-龥ࠀ-一가-퟿]+`
	// o200k's (gpt-oss, GPT-4o, Llama 4): case-aware words with their
	// contractions, numbers in threes.
	reO200k = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// Kimi-K2's: o200k's with Han runs apart and kept out of the letter
	// classes (its tiktoken pattern).
	reKimiK2 = `[\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reBloom  = ` ?[^(\s|.,!?…。，、।۔،)]+`
)

// preFamilies maps tokenizer.ggml.pre names to their regexes, with
// llama.cpp's names (src/llama-vocab.cpp).
var preFamilies = []struct {
	names        []string
	regexes      []string
	ignoreMerges bool
}{
	// What llama.cpp uses when a file names no pre-tokenizer.
	{[]string{"default", ""}, []string{`[\p{P}\$\+<=>\^~\|]+`, reGPT2, `\p{N}+`, `[0-9][0-9][0-9]`}, false},
	{[]string{"gpt-2", "phi-2", "mpt", "olmo", "jais", "roberta-bpe", "gigachat",
		"jina-es", "jina-de", "jina-v1-en", "jina-v2-es", "jina-v2-de", "jina-v2-code"}, []string{reGPT2}, false},
	{[]string{"llama3", "llama-v3", "llama-bpe", "falcon3"}, []string{reLlama3}, true},
	{[]string{"dbrx", "smaug-bpe", "glm4", "chatglm-bpe"}, []string{reLlama3}, false},
	// tiktoken looks a whole word up before merging, as ignore_merges does.
	{[]string{"gpt-4o", "llama4", "kanana2", "minimax-m2"}, []string{reO200k}, true},
	{[]string{"kimi-k2"}, []string{reKimiK2}, true},
	{[]string{"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"}, []string{reQwen2}, false},
	// Qwen 3.5 keeps combining marks inside words.
	{[]string{"qwen35"}, []string{`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`}, false},
	{[]string{"deepseek-llm"}, []string{`[\r\n]`, deepseekLetters, `\s?[!-/:-~！-／：-～‘-‟　-。]+`, `\s+$`, reCJK, `\p{N}+`}, false},
	{[]string{"deepseek-coder"}, []string{`[\r\n]`, `\s?\p{L}+`, `\s?\p{P}+`, reCJK, `\p{N}`}, false},
	{[]string{"deepseek-v3"}, []string{`\p{N}{1,3}`, `[一-龥぀-ゟ゠-ヿ]+`,
		`[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_` + "`" + `{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`}, false},
	{[]string{"falcon"}, []string{`[\p{P}\$\+<=>\^~\|` + "`" + `]+`, reGPT2, `[0-9][0-9][0-9]`}, false},
	{[]string{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"}, []string{`\p{N}`, reGPT2}, false},
	{[]string{"tekken"}, []string{`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`}, true},
	{[]string{"bloom", "poro-chat", "gpt3-finnish"}, []string{reBloom}, false},
	{[]string{"viking"}, []string{reBloom, `\p{N}`}, false},
}

// deepseekLetters is DeepSeek LLM's letter class, spelled out by range.
const deepseekLetters = `\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+`

// newPreTokenizer compiles the family named by tokenizer.ggml.pre.
func newPreTokenizer(name string) (*preTokenizer, error) {
	for _, f := range preFamilies {
		if !slices.Contains(f.names, name) {
			continue
		}
		pt := &preTokenizer{name: name, ignoreMerges: f.ignoreMerges}
		for _, src := range f.regexes {
			p, err := compileRegex(src)
			if err != nil {
				return nil, fmt.Errorf("pre-tokenizer %q: %w", name, err)
			}
			pt.regexes = append(pt.regexes, p)
		}
		return pt, nil
	}
	return nil, fmt.Errorf("unsupported BPE pre-tokenizer %q (supported: %s)", name, strings.Join(preNames(), ", "))
}

func preNames() []string {
	var names []string
	for _, f := range preFamilies {
		for _, n := range f.names {
			if n != "" {
				names = append(names, n)
			}
		}
	}
	sort.Strings(names)
	return names
}

// split cuts text into words.
func (pt *preTokenizer) split(text []rune, m *matcher) [][]rune {
	words := [][]rune{text}
	var next [][]rune
	for _, p := range pt.regexes {
		next = next[:0]
		for _, w := range words {
			next = m.split(p, w, next)
		}
		words, next = next, words
	}
	return words
}
