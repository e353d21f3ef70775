package model

import (
	"fmt"
	"math"
	"math/rand/v2"

	"jspark/backend/gguf"
	"jspark/kernels/quant"
)

// SynthOptions shape a random-weight model. The same options give the same
// bytes.
type SynthOptions struct {
	Arch    string // llama, qwen2 or qwen3
	Layers  int
	Dim     int
	Heads   int
	KVHeads int
	HeadDim int // 0: Dim/Heads
	FF      int
	Context int
	Type    quant.Type // of the weight matrices; norms stay F32
	Mix     Mix        // if set, decides each matrix's type instead of Type (mix.go)
	Seed    uint64
	// Vocab copies tokenizer.* metadata from this file; nil means a
	// byte-level SentencePiece vocabulary of 259 tokens.
	Vocab *gguf.File
}

// Synth builds a GGUF model with random weights.
func Synth(o SynthOptions) (*gguf.Writer, error) {
	if _, ok := archs[o.Arch]; !ok {
		return nil, fmt.Errorf("synth: unknown arch %q", o.Arch)
	}
	if o.Layers <= 0 || o.Dim <= 0 || o.Heads <= 0 || o.FF <= 0 {
		return nil, fmt.Errorf("synth: layers, dim, heads and ff must be positive")
	}
	if o.KVHeads == 0 {
		o.KVHeads = o.Heads
	}
	if o.Heads%o.KVHeads != 0 {
		return nil, fmt.Errorf("synth: %d heads is not a multiple of %d kv heads", o.Heads, o.KVHeads)
	}
	if o.HeadDim == 0 {
		if o.Dim%o.Heads != 0 {
			return nil, fmt.Errorf("synth: dim %d is not a multiple of %d heads", o.Dim, o.Heads)
		}
		o.HeadDim = o.Dim / o.Heads
	}
	if o.Context == 0 {
		o.Context = 4096
	}
	w := &gguf.Writer{}
	a := o.Arch
	w.AddKV("general.architecture", a)
	w.AddKV("general.name", fmt.Sprintf("synth-%s-%dL-%dd", a, o.Layers, o.Dim))
	w.AddKV("general.alignment", uint32(32))
	w.AddKV(a+".block_count", uint32(o.Layers))
	w.AddKV(a+".context_length", uint32(o.Context))
	w.AddKV(a+".embedding_length", uint32(o.Dim))
	w.AddKV(a+".feed_forward_length", uint32(o.FF))
	w.AddKV(a+".attention.head_count", uint32(o.Heads))
	w.AddKV(a+".attention.head_count_kv", uint32(o.KVHeads))
	w.AddKV(a+".attention.key_length", uint32(o.HeadDim))
	w.AddKV(a+".attention.value_length", uint32(o.HeadDim))
	w.AddKV(a+".rope.dimension_count", uint32(o.HeadDim))
	w.AddKV(a+".rope.freq_base", float32(10000))
	w.AddKV(a+".attention.layer_norm_rms_epsilon", float32(1e-6))
	vocab := 0
	if o.Vocab != nil {
		for _, kv := range o.Vocab.KVs {
			if len(kv.Key) > 10 && kv.Key[:10] == "tokenizer." {
				w.AddKV(kv.Key, kv.Value)
			}
		}
		arr, _ := o.Vocab.Array("tokenizer.ggml.tokens")
		vocab = arr.Len()
		if vocab == 0 {
			return nil, fmt.Errorf("synth: %s has no tokenizer.ggml.tokens", o.Vocab.Path)
		}
	} else {
		tokens, scores, types := ByteVocab()
		vocab = len(tokens)
		w.AddKV("tokenizer.ggml.model", "llama")
		w.AddKV("tokenizer.ggml.tokens", tokens)
		w.AddKV("tokenizer.ggml.scores", scores)
		w.AddKV("tokenizer.ggml.token_type", types)
		w.AddKV("tokenizer.ggml.bos_token_id", uint32(1))
		w.AddKV("tokenizer.ggml.eos_token_id", uint32(2))
		w.AddKV("tokenizer.ggml.unknown_token_id", uint32(0))
	}
	r := rand.New(rand.NewPCG(o.Seed, 0x5eed))
	mat := func(name string, rows, cols int) {
		v := make([]float32, rows*cols)
		scale := float32(1 / math.Sqrt(float64(cols)))
		for i := range v {
			v[i] = float32(r.NormFloat64()) * scale
		}
		t := o.weightType(name, cols)
		w.AddTensor(name, t, []uint64{uint64(cols), uint64(rows)}, quant.Quantize(t, v))
	}
	vec := func(name string, n int, center, spread float64) {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(center + spread*r.NormFloat64())
		}
		w.AddTensor(name, quant.F32, []uint64{uint64(n)}, quant.Quantize(quant.F32, v))
	}
	q, kv := o.Heads*o.HeadDim, o.KVHeads*o.HeadDim
	mat("token_embd.weight", vocab, o.Dim)
	vec("output_norm.weight", o.Dim, 1, 0.1)
	mat("output.weight", vocab, o.Dim)
	for l := 0; l < o.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		vec(p+"attn_norm.weight", o.Dim, 1, 0.1)
		mat(p+"attn_q.weight", q, o.Dim)
		mat(p+"attn_k.weight", kv, o.Dim)
		mat(p+"attn_v.weight", kv, o.Dim)
		if a == "qwen2" {
			vec(p+"attn_q.bias", q, 0, 0.1)
			vec(p+"attn_k.bias", kv, 0, 0.1)
			vec(p+"attn_v.bias", kv, 0, 0.1)
		}
		if a == "qwen3" {
			vec(p+"attn_q_norm.weight", o.HeadDim, 1, 0.1)
			vec(p+"attn_k_norm.weight", o.HeadDim, 1, 0.1)
		}
		mat(p+"attn_output.weight", o.Dim, q)
		vec(p+"ffn_norm.weight", o.Dim, 1, 0.1)
		mat(p+"ffn_gate.weight", o.FF, o.Dim)
		mat(p+"ffn_up.weight", o.FF, o.Dim)
		mat(p+"ffn_down.weight", o.Dim, o.FF)
	}
	return w, nil
}

// ByteVocab is a SentencePiece vocabulary of <unk>, <s>, </s> and the 256
// byte tokens: every text encodes, one token per byte.
func ByteVocab() ([]string, []float32, []int32) {
	tokens := []string{"<unk>", "<s>", "</s>"}
	types := []int32{2, 3, 3}
	for b := 0; b < 256; b++ {
		tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
		types = append(types, 6)
	}
	return tokens, make([]float32, len(tokens)), types
}
