package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"jspark/backend/gguf"
)

// hfFile is what a Hugging Face tokenizer.json says that GGUF keeps.
type hfFile struct {
	Model struct {
		Type         string          `json:"type"`
		Vocab        map[string]int  `json:"vocab"`
		Merges       json.RawMessage `json:"merges"`
		ByteFallback bool            `json:"byte_fallback"`
		UnkToken     *string         `json:"unk_token"`
	} `json:"model"`
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	Decoder      json.RawMessage `json:"decoder"`
}

// hfStep is one normalizer or pre-tokenizer step, or a Sequence of them.
type hfStep struct {
	Type    string   `json:"type"`
	Steps   []hfStep `json:"pretokenizers"`
	Norms   []hfStep `json:"normalizers"`
	Pattern struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Content  string `json:"content"`
	Prepend  string `json:"prepend"`
	UseRegex *bool  `json:"use_regex"`
}

// flatten lists a step's leaves in order.
func (s hfStep) flatten() []hfStep {
	if s.Type != "Sequence" {
		return []hfStep{s}
	}
	var out []hfStep
	for _, x := range append(s.Steps, s.Norms...) {
		out = append(out, x.flatten()...)
	}
	return out
}

func steps(raw json.RawMessage) []hfStep {
	var s hfStep
	if len(raw) == 0 || string(raw) == "null" || json.Unmarshal(raw, &s) != nil {
		return nil
	}
	return s.flatten()
}

// hfConfig is what tokenizer_config.json adds: the special tokens' texts,
// whether BOS and EOS are added, and the chat template.
type hfConfig struct {
	BOS          hfToken         `json:"bos_token"`
	EOS          hfToken         `json:"eos_token"`
	PAD          hfToken         `json:"pad_token"`
	UNK          hfToken         `json:"unk_token"`
	AddBOS       *bool           `json:"add_bos_token"`
	AddEOS       *bool           `json:"add_eos_token"`
	ChatTemplate json.RawMessage `json:"chat_template"`
}

// hfToken is a token's text, written as a string or {"content": …}.
type hfToken string

func (t *hfToken) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*t = hfToken(s)
		return nil
	}
	var o struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(b, &o); err != nil && string(b) != "null" {
		return err
	}
	*t = hfToken(o.Content)
	return nil
}

// OpenHF reads a tokenizer.json and, when it is there, the
// tokenizer_config.json beside it, and converts them with FromHF.
func OpenHF(path string) (*gguf.File, error) {
	tok, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := os.ReadFile(filepath.Join(filepath.Dir(path), "tokenizer_config.json"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return FromHF(path, tok, cfg)
}

// FromHF converts a Hugging Face tokenizer.json (and its
// tokenizer_config.json, which may be nil) into the tokenizer metadata a
// GGUF file carries, as llama.cpp's converter writes it: tokens, token
// types, merges or scores, the pre-tokenizer's name, the special tokens'
// ids, and the chat template. The result is an in-memory GGUF file with no
// tensors, which FromGGUF reads and model.Synth copies.
//
// Byte-level BPE vocabularies become "gpt2" with the pre-tokenizer whose
// regexes the file states (an unknown list is an error naming it);
// vocabularies that replace spaces by ▁ with byte fallback (Gemma, Llama
// 2) become SentencePiece ("llama"), each token scored by the rank of the
// merge that makes it.
func FromHF(name string, tokJSON, configJSON []byte) (*gguf.File, error) {
	var hf hfFile
	if err := json.Unmarshal(tokJSON, &hf); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if hf.Model.Type != "BPE" {
		return nil, fmt.Errorf("%s: model type %q is not supported (BPE only)", name, hf.Model.Type)
	}
	var cfg hfConfig
	if len(bytes.TrimSpace(configJSON)) > 0 {
		if err := json.Unmarshal(configJSON, &cfg); err != nil {
			return nil, fmt.Errorf("%s: tokenizer_config.json: %w", name, err)
		}
	}
	n := 0
	for _, id := range hf.Model.Vocab {
		n = max(n, id+1)
	}
	for _, a := range hf.AddedTokens {
		n = max(n, a.ID+1)
	}
	if n == 0 || n > 1<<20 { // the largest real vocabularies hold 262K
		return nil, fmt.Errorf("%s: %d tokens", name, n)
	}
	tokens := make([]string, n)
	types := make([]int32, n)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("[PAD%d]", i) // ids no entry names, as llama.cpp's converter fills them
		types[i] = int32(TypeUnused)
	}
	for s, id := range hf.Model.Vocab {
		if id < 0 {
			return nil, fmt.Errorf("%s: token %q has id %d", name, s, id)
		}
		tokens[id], types[id] = s, int32(TypeNormal)
	}
	merges, err := hfMerges(hf.Model.Merges)
	if err != nil {
		return nil, fmt.Errorf("%s: merges: %w", name, err)
	}
	spm := hf.Model.ByteFallback && !byteLevel(hf)
	w := &gguf.Writer{}
	if spm {
		w.AddKV("tokenizer.ggml.model", "llama")
		scores := make([]float32, n)
		rank := make(map[string]int, len(merges))
		for r, m := range merges {
			a, b, _ := strings.Cut(m, " ")
			if _, dup := rank[a+b]; !dup {
				rank[a+b] = r
			}
		}
		for i, s := range tokens {
			// Higher scores merge first; a token no merge makes (a
			// character, a byte) scores below every merged one.
			scores[i] = -float32(len(merges))
			if r, ok := rank[s]; ok {
				scores[i] = -float32(r)
			}
			if len(s) == 6 && strings.HasPrefix(s, "<0x") && strings.HasSuffix(s, ">") {
				types[i] = int32(TypeByte)
			}
		}
		w.AddKV("tokenizer.ggml.scores", scores)
		w.AddKV("tokenizer.ggml.add_space_prefix", prependsSpace(hf))
	} else {
		pre, err := hfPre(hf)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		w.AddKV("tokenizer.ggml.model", "gpt2")
		w.AddKV("tokenizer.ggml.pre", pre)
		w.AddKV("tokenizer.ggml.merges", merges)
	}
	for _, a := range hf.AddedTokens {
		if a.ID < 0 {
			return nil, fmt.Errorf("%s: added token %q has id %d", name, a.Content, a.ID)
		}
		tokens[a.ID] = a.Content
		types[a.ID] = int32(TypeUserDefined)
		if a.Special {
			types[a.ID] = int32(TypeControl)
		}
	}
	if u := hf.Model.UnkToken; u != nil {
		if id, ok := hf.Model.Vocab[*u]; ok {
			types[id] = int32(TypeUnknown)
			w.AddKV("tokenizer.ggml.unknown_token_id", uint32(id))
		}
	}
	w.AddKV("tokenizer.ggml.tokens", tokens)
	w.AddKV("tokenizer.ggml.token_type", types)
	ids := map[string]int{}
	for i, s := range tokens {
		if _, dup := ids[s]; !dup || types[i] == int32(TypeControl) {
			ids[s] = i
		}
	}
	for _, sp := range []struct {
		key string
		tok hfToken
	}{{"bos", cfg.BOS}, {"eos", cfg.EOS}, {"padding", cfg.PAD}} {
		if id, ok := ids[string(sp.tok)]; ok && sp.tok != "" {
			w.AddKV("tokenizer.ggml."+sp.key+"_token_id", uint32(id))
		}
	}
	addBOS := spm // SentencePiece vocabularies add BOS unless told otherwise
	if cfg.AddBOS != nil {
		addBOS = *cfg.AddBOS
	}
	w.AddKV("tokenizer.ggml.add_bos_token", addBOS && cfg.BOS != "")
	if cfg.AddEOS != nil {
		w.AddKV("tokenizer.ggml.add_eos_token", *cfg.AddEOS)
	}
	if tpl := chatTemplate(cfg.ChatTemplate); tpl != "" {
		w.AddKV("tokenizer.chat_template", tpl)
	}
	b, err := w.Bytes()
	if err != nil {
		return nil, err
	}
	return gguf.Parse(name, b)
}

// hfMerges reads merges written as "a b" or as ["a", "b"].
func hfMerges(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var flat []string
	if json.Unmarshal(raw, &flat) == nil {
		return flat, nil
	}
	var pairs [][2]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, err
	}
	out := make([]string, len(pairs))
	for i, p := range pairs {
		out[i] = p[0] + " " + p[1]
	}
	return out, nil
}

// byteLevel reports whether the vocabulary is GPT-2's byte-level one.
func byteLevel(hf hfFile) bool {
	for _, s := range append(steps(hf.PreTokenizer), steps(hf.Decoder)...) {
		if s.Type == "ByteLevel" {
			return true
		}
	}
	return false
}

// prependsSpace reports whether the normalizer or pre-tokenizer puts a ▁
// before the text (Llama 2's "add dummy prefix"; Gemma's does not).
func prependsSpace(hf hfFile) bool {
	for _, s := range append(steps(hf.Normalizer), steps(hf.PreTokenizer)...) {
		if s.Type == "Prepend" && s.Prepend == "▁" || s.Type == "Metaspace" && s.Prepend != "never" {
			return true
		}
	}
	return false
}

// hfPre names the pre-tokenizer family whose regexes the file's Split
// steps state, in order (a ByteLevel step that splits itself states
// GPT-2's).
func hfPre(hf hfFile) (string, error) {
	var regexes []string
	for _, s := range steps(hf.PreTokenizer) {
		switch {
		case s.Type == "Split" && s.Pattern.Regex != nil:
			regexes = append(regexes, *s.Pattern.Regex)
		case s.Type == "ByteLevel" && (s.UseRegex == nil || *s.UseRegex):
			regexes = append(regexes, reGPT2)
		}
	}
	// A regex may spell a control character itself or as an escape.
	spell := strings.NewReplacer("\r", `\r`, "\n", `\n`, "\t", `\t`)
	for i, r := range regexes {
		regexes[i] = spell.Replace(r)
	}
	for _, f := range preFamilies {
		if slices.EqualFunc(f.regexes, regexes, func(a, b string) bool { return spell.Replace(a) == b }) {
			return f.names[0], nil
		}
	}
	return "", fmt.Errorf("no pre-tokenizer family has the regexes %q", regexes)
}

// chatTemplate reads chat_template: a string, or a list of named templates
// of which "default" (else the first) is taken.
func chatTemplate(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if json.Unmarshal(raw, &named) != nil || len(named) == 0 {
		return ""
	}
	for _, t := range named {
		if t.Name == "default" {
			return t.Template
		}
	}
	return named[0].Template
}
