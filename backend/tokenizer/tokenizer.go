// Package tokenizer turns text into token ids and back, for the two
// vocabulary families GGUF files carry: SentencePiece-style ("llama": scored
// pieces, byte fallback, a leading space) and byte-level BPE ("gpt2": ranked
// merges over the words of a pre-tokenizer, a table of regexes per family in
// pretok.go that our own regex engine, regex.go and vm.go, runs).
//
// Both follow llama.cpp's algorithms so that ids match its tokenizer tests.
package tokenizer

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"jspark/backend/gguf"
)

// TokenType follows llama.cpp's token types in GGUF.
type TokenType int32

const (
	TypeUndefined   TokenType = 0
	TypeNormal      TokenType = 1
	TypeUnknown     TokenType = 2
	TypeControl     TokenType = 3
	TypeUserDefined TokenType = 4
	TypeUnused      TokenType = 5
	TypeByte        TokenType = 6
)

// Tokenizer encodes and decodes text for one vocabulary.
type Tokenizer struct {
	Model string // "llama" (SentencePiece) or "gpt2" (byte-level BPE)
	Pre   string // BPE pre-tokenizer name

	Tokens []string
	Scores []float32
	Types  []TokenType

	BOS, EOS, UNK, PAD int // -1 when absent
	EOT, EOM           int // end of turn, end of message (tool call); -1 when absent
	AddBOS, AddEOS     bool
	AddSpacePrefix     bool

	// EOG holds every id that ends generation: see endOfGeneration.
	EOG map[int]bool

	ids     map[string]int
	byteIDs [256]int
	merges  map[[2]string]int // BPE merge rank
	special []int             // matchable special tokens, longest text first
	pre     *preTokenizer

	lengthsOnce sync.Once
	lengths     *lengths // for MinTokens
}

// FromGGUF builds the tokenizer a GGUF file describes.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	model, ok := f.String("tokenizer.ggml.model")
	if !ok {
		return nil, fmt.Errorf("%s: no tokenizer.ggml.model", f.Path)
	}
	arr, ok := f.Array("tokenizer.ggml.tokens")
	tokens, isStr := arr.Values.([]string)
	if !ok || !isStr || len(tokens) == 0 {
		return nil, fmt.Errorf("%s: tokenizer.ggml.tokens missing or not strings", f.Path)
	}
	t := &Tokenizer{Model: model, Tokens: tokens, BOS: -1, EOS: -1, UNK: -1, PAD: -1, EOT: -1, EOM: -1}
	t.Pre, _ = f.String("tokenizer.ggml.pre")
	if a, ok := f.Array("tokenizer.ggml.scores"); ok {
		s, isF := a.Values.([]float32)
		if !isF || len(s) != len(tokens) {
			return nil, fmt.Errorf("%s: tokenizer.ggml.scores has %d values for %d tokens", f.Path, a.Len(), len(tokens))
		}
		t.Scores = s
	}
	t.Types = make([]TokenType, len(tokens))
	for i := range t.Types {
		t.Types[i] = TypeNormal
	}
	if a, ok := f.Array("tokenizer.ggml.token_type"); ok {
		s, isI := a.Values.([]int32)
		if !isI || len(s) != len(tokens) {
			return nil, fmt.Errorf("%s: tokenizer.ggml.token_type has %d values for %d tokens", f.Path, a.Len(), len(tokens))
		}
		for i, v := range s {
			t.Types[i] = TokenType(v)
		}
	}
	id := func(key string, dflt int) int {
		if v, ok := f.Uint(key); ok && v < uint64(len(tokens)) {
			return int(v)
		}
		return dflt
	}
	flag := func(key string, dflt bool) bool {
		if v, ok := f.Bool(key); ok {
			return v
		}
		return dflt
	}
	var merges []string
	switch model {
	case "llama":
		t.BOS, t.EOS, t.UNK = id("tokenizer.ggml.bos_token_id", 1), id("tokenizer.ggml.eos_token_id", 2), id("tokenizer.ggml.unknown_token_id", 0)
		t.AddBOS, t.AddSpacePrefix = flag("tokenizer.ggml.add_bos_token", true), flag("tokenizer.ggml.add_space_prefix", true)
		if t.Scores == nil {
			return nil, fmt.Errorf("%s: a SentencePiece vocabulary needs tokenizer.ggml.scores", f.Path)
		}
	case "gpt2":
		t.BOS, t.EOS = id("tokenizer.ggml.bos_token_id", -1), id("tokenizer.ggml.eos_token_id", -1)
		t.AddBOS = flag("tokenizer.ggml.add_bos_token", false)
		a, ok := f.Array("tokenizer.ggml.merges")
		m, isStr := a.Values.([]string)
		if !ok || !isStr {
			return nil, fmt.Errorf("%s: a BPE vocabulary needs tokenizer.ggml.merges", f.Path)
		}
		merges = m
	default:
		return nil, fmt.Errorf("%s: unsupported tokenizer model %q (want llama or gpt2)", f.Path, model)
	}
	if t.Pre == "glm4" || t.Pre == "chatglm-bpe" {
		t.BOS = -1 // GLM writes its [gMASK]<sop> in the template (llama.cpp's rule)
	}
	t.PAD = id("tokenizer.ggml.padding_token_id", -1)
	t.EOT, t.EOM = id("tokenizer.ggml.eot_token_id", -1), id("tokenizer.ggml.eom_token_id", -1)
	t.AddEOS = flag("tokenizer.ggml.add_eos_token", false)
	var fim []int
	for _, key := range []string{"tokenizer.ggml.fim_pad_token_id", "tokenizer.ggml.fim_rep_token_id", "tokenizer.ggml.fim_sep_token_id"} {
		fim = append(fim, id(key, -1))
	}
	if err := t.init(merges, fim); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	if fromLlama2c(f) && t.BOS >= 0 {
		// llama2.c's models end a text with BOS, never EOS: its run.c
		// stops there, and so must we, or a reply never ends.
		t.EOG[t.BOS] = true
	}
	return t, nil
}

// fromLlama2c reports whether f was converted from a llama2.c checkpoint
// by llama.cpp's llama-convert-llama2c-to-ggml, which names the model
// "llama" and writes the separator and padding ids as UINT32_MAX.
func fromLlama2c(f *gguf.File) bool {
	name, _ := f.String("general.name")
	sep, okSep := f.Uint("tokenizer.ggml.seperator_token_id")
	pad, okPad := f.Uint("tokenizer.ggml.padding_token_id")
	return name == "llama" && okSep && okPad && sep == 0xFFFFFFFF && pad == 0xFFFFFFFF
}

func (t *Tokenizer) init(merges []string, fim []int) error {
	t.ids = make(map[string]int, len(t.Tokens))
	for i, s := range t.Tokens {
		if _, dup := t.ids[s]; !dup {
			t.ids[s] = i
		}
	}
	for b := range t.byteIDs {
		t.byteIDs[b] = -1
		if t.Model == "llama" {
			if i, ok := t.ids[fmt.Sprintf("<0x%02X>", b)]; ok {
				t.byteIDs[b] = i
			}
		} else if i, ok := t.ids[string(byteToRune[b])]; ok {
			t.byteIDs[b] = i
		}
	}
	if t.Model == "gpt2" {
		t.merges = make(map[[2]string]int, len(merges))
		for rank, m := range merges {
			a, b, ok := strings.Cut(m, " ")
			if !ok {
				return fmt.Errorf("merge %d %q has no space", rank, m)
			}
			if _, dup := t.merges[[2]string{a, b}]; !dup {
				t.merges[[2]string{a, b}] = rank
			}
		}
		var err error
		if t.pre, err = newPreTokenizer(t.Pre); err != nil {
			return err
		}
	}
	t.endOfGeneration(fim)
	for i, typ := range t.Types {
		if (typ == TypeControl || typ == TypeUserDefined || typ == TypeUnknown) && t.Tokens[i] != "" {
			t.special = append(t.special, i)
		}
	}
	slices.SortStableFunc(t.special, func(a, b int) int { return len(t.Tokens[b]) - len(t.Tokens[a]) })
	return nil
}

// endOfGeneration fills EOG with llama.cpp's rules (src/llama-vocab.cpp):
// EOS; EOT and EOM, from their keys or else their usual spellings; the FIM
// pad, repo and file-separator tokens (keys or spellings), which end a
// code completion; and every token spelled as an end of turn. Tokens found
// by spelling become control tokens, as llama.cpp makes them, so that they
// never render as text.
func (t *Tokenizer) endOfGeneration(fim []int) {
	byText := func(texts ...string) int {
		for _, s := range texts {
			if i, ok := t.ids[s]; ok {
				t.Types[i] = TypeControl
				return i
			}
		}
		return -1
	}
	if t.EOT < 0 {
		t.EOT = byText("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "<｜end▁of▁sentence｜>")
	}
	if t.EOM < 0 {
		t.EOM = byText("<|eom_id|>")
	}
	spellings := [][]string{{"<|fim_pad|>", "<fim-pad>", "<PAD>"}, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>"}, {"<|file_sep|>"}}
	t.EOG = map[int]bool{}
	for i, id := range fim {
		if id < 0 {
			id = byText(spellings[i]...)
		}
		t.EOG[id] = true
	}
	for _, s := range []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "<|return|>", "<|call|>"} {
		t.EOG[byText(s)] = true
	}
	t.EOG[t.EOS], t.EOG[t.EOT], t.EOG[t.EOM] = true, true, true
	delete(t.EOG, -1)
	// Harmony (gpt-oss) ends a turn with <|return|> or <|call|>; its
	// <|end|> ends one message, and the next follows in the same turn. Its
	// header tokens render as text, so that the output shows its channels
	// (llama.cpp does both).
	ret, okRet := t.ids["<|return|>"]
	call, okCall := t.ids["<|call|>"]
	if end, ok := t.ids["<|end|>"]; ok && okRet && okCall && end != ret && end != call && end != t.EOS {
		delete(t.EOG, end)
		if t.EOT == end {
			t.EOT = ret
		}
		for _, s := range []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"} {
			if i, ok := t.ids[s]; ok {
				t.Types[i] = TypeUserDefined
			}
		}
	}
}

// VocabSize is the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.Tokens) }

// ID returns the id of an exact token text.
func (t *Tokenizer) ID(text string) (int, bool) {
	i, ok := t.ids[text]
	return i, ok
}

// IsControl reports whether id is a control token (rendered as nothing).
func (t *Tokenizer) IsControl(id int) bool {
	return id >= 0 && id < len(t.Types) && t.Types[id] == TypeControl
}

// Encode tokenizes text. addSpecial adds BOS/EOS as the vocabulary asks;
// parseSpecial lets control-token texts in the input (such as "<s>" or
// "<|im_start|>") become their ids. User-defined tokens always match.
func (t *Tokenizer) Encode(text string, addSpecial, parseSpecial bool) []int {
	var out []int
	if addSpecial && t.AddBOS && t.BOS >= 0 {
		out = append(out, t.BOS)
	}
	prevSpecial := true
	var m matcher
	for _, frag := range t.partition(text, parseSpecial) {
		if frag.id >= 0 {
			out = append(out, frag.id)
			prevSpecial = true
			continue
		}
		switch t.Model {
		case "llama":
			s := frag.text
			if t.AddSpacePrefix && prevSpecial {
				s = " " + s
			}
			out = t.encodeSPM(strings.ReplaceAll(s, " ", "\u2581"), out)
		default:
			out = t.encodeBPE(frag.text, &m, out)
		}
		prevSpecial = false
	}
	if addSpecial && t.AddEOS && t.EOS >= 0 {
		out = append(out, t.EOS)
	}
	return out
}

type fragment struct {
	text string
	id   int // ≥ 0 for a special token
}

// partition splits text around special-token texts, longest first.
func (t *Tokenizer) partition(text string, parseSpecial bool) []fragment {
	if text == "" {
		return nil
	}
	frags := []fragment{{text, -1}}
	for _, id := range t.special {
		typ := t.Types[id]
		if !parseSpecial && typ != TypeUserDefined {
			continue
		}
		tok := t.Tokens[id]
		var next []fragment
		for _, f := range frags {
			if f.id >= 0 || !strings.Contains(f.text, tok) {
				next = append(next, f)
				continue
			}
			rest := f.text
			for {
				i := strings.Index(rest, tok)
				if i < 0 {
					break
				}
				if i > 0 {
					next = append(next, fragment{rest[:i], -1})
				}
				next = append(next, fragment{"", id})
				rest = rest[i+len(tok):]
			}
			if rest != "" {
				next = append(next, fragment{rest, -1})
			}
		}
		frags = next
	}
	return frags
}

// Decode joins the pieces of ids. Control tokens render as nothing unless
// keepSpecial is set.
func (t *Tokenizer) Decode(ids []int, keepSpecial bool) string {
	var b []byte
	for _, id := range ids {
		b = t.AppendPiece(b, id, keepSpecial)
	}
	return string(b)
}

// AppendPiece appends the bytes of one token. Streaming callers join pieces
// byte-wise and cut at UTF-8 boundaries themselves, since a byte-fallback
// token may carry part of a character.
func (t *Tokenizer) AppendPiece(b []byte, id int, keepSpecial bool) []byte {
	if id < 0 || id >= len(t.Tokens) {
		return b
	}
	s := t.Tokens[id]
	switch t.Types[id] {
	case TypeControl, TypeUnknown:
		if !keepSpecial {
			return b
		}
		return append(b, s...)
	case TypeUserDefined:
		return append(b, s...)
	case TypeByte:
		if t.Model == "llama" {
			var v byte
			if _, err := fmt.Sscanf(s, "<0x%02X>", &v); err == nil {
				return append(b, v)
			}
		}
	}
	if t.Model == "llama" {
		return append(b, strings.ReplaceAll(s, "\u2581", " ")...)
	}
	for _, r := range s {
		if v, ok := runeToByte[r]; ok {
			b = append(b, v)
		} else {
			b = append(b, string(r)...)
		}
	}
	return b
}

// Text is token id's text as the vocabulary spells it, or "" for an id
// that is absent (-1) or out of range.
func (t *Tokenizer) Text(id int) string {
	if id < 0 || id >= len(t.Tokens) {
		return ""
	}
	return t.Tokens[id]
}
