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
	Arch    string // a registered architecture
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
	// TextVocab types that vocabulary's 256 byte tokens as normal tokens
	// whose text is their name (<0x41>), same ids: a peer then sends every
	// token back as valid UTF-8 (llama-server's JSON refuses the raw bytes
	// a random model emits).
	TextVocab bool

	// Mixture of experts (qwen3moe, glm4moe, gpt-oss), taken as given:
	// DefaultMoE has each architecture's.
	Experts       int // routed experts
	ExpertsUsed   int // chosen per token
	ExpertFF      int // an expert's feed-forward width
	SharedExperts int // glm4moe: experts every token runs (one MLP this many times as wide)
	DenseLayers   int // glm4moe: leading layers with a dense MLP of width FF
	SlidingWindow int // gpt-oss, gemma3: the window of the sliding-window layers

	// Gated DeltaNet (qwen35, qwen35moe, qwen3next), taken as given:
	// DefaultMoE has each architecture's.
	FullAttnInterval int // of every this many layers the last is full attention (qwen3next: 4)
	SSMKHeads        int // query and key heads of the recurrent layers
	SSMVHeads        int // their value heads, a multiple of SSMKHeads
	SSMDim           int // the width of each of their heads
	SharedFF         int // qwen35moe, qwen3next: the gated shared expert's width
}

// DefaultMoE sets the mixture-of-experts options to arch's defaults: small
// versions of the released models' shapes (qwen3moe 8 experts of 2 used,
// glm4moe the same with one shared expert and one leading dense layer,
// gpt-oss a 128-token window); zero for a dense architecture.
func DefaultMoE(o *SynthOptions) {
	o.Experts, o.ExpertsUsed, o.ExpertFF, o.SharedExperts, o.DenseLayers, o.SlidingWindow = 0, 0, 0, 0, 0, 0
	o.FullAttnInterval, o.SSMKHeads, o.SSMVHeads, o.SSMDim, o.SharedFF = 0, 0, 0, 0, 0
	defaultHybrid(o)
	switch o.Arch {
	case "qwen3moe":
		o.Experts, o.ExpertsUsed, o.ExpertFF = 8, 2, max(o.FF/2, 32)
	case "glm4moe":
		o.Experts, o.ExpertsUsed, o.ExpertFF, o.SharedExperts, o.DenseLayers = 8, 2, max(o.FF/2, 32), 1, 1
	case "gpt-oss":
		o.Experts, o.ExpertsUsed, o.ExpertFF, o.SlidingWindow = 8, 2, max(o.FF/2, 32), 128
	}
}

// synthGen writes one random-weight model: metadata now, each tensor's
// values drawn from the seed's stream (synth_stream.go) and quantized when
// the file is written, so a model of any size is written holding about one
// tensor.
type synthGen struct {
	o SynthOptions
	w *gguf.Writer
	s *stream
}

// add appends a tensor of type t and dims (innermost first) whose values
// set draws from the stream.
func (g *synthGen) add(name string, t quant.Type, dims []int, set func(r *rand.Rand, v []float32)) {
	n, ud := 1, []uint64{}
	for _, d := range dims {
		n *= d
		ud = append(ud, uint64(d))
	}
	i := g.s.add(n, dims[0], set)
	g.w.AddTensorFunc(name, t, ud, func() ([]byte, error) { return g.s.encode(i, t), nil })
}

// kv adds the metadata key arch.key.
func (g *synthGen) kv(key string, v any) { g.w.AddKV(g.o.Arch+"."+key, v) }

// weights adds a tensor of dims (innermost first, the first the rows'
// width) of normal weights scaled by 1/sqrt(width), in the type the
// options' mix gives it (mix.go).
func (g *synthGen) weights(name string, dims ...int) {
	g.typed(name, g.o.weightType(name, dims[0]), dims...)
}

// router adds a MoE router of rows × cols, in F32: llama-quantize leaves
// ffn_gate_inp in the type it came in (a choice among experts is
// discontinuous in its scores).
func (g *synthGen) router(name string, rows, cols int) { g.typed(name, quant.F32, cols, rows) }

func (g *synthGen) typed(name string, t quant.Type, dims ...int) {
	scale := float32(1 / math.Sqrt(float64(dims[0])))
	g.add(name, t, dims, func(r *rand.Rand, v []float32) {
		for i := range v {
			v[i] = float32(r.NormFloat64()) * scale
		}
	})
}

// mat adds a matrix of rows × cols.
func (g *synthGen) mat(name string, rows, cols int) { g.weights(name, cols, rows) }

// vec adds an F32 tensor of dims (innermost first) of center ± spread.
func (g *synthGen) vec(name string, center, spread float64, dims ...int) {
	g.add(name, quant.F32, dims, func(r *rand.Rand, v []float32) {
		for i := range v {
			v[i] = float32(center + spread*r.NormFloat64())
		}
	})
}

// Synth builds a GGUF model with random weights, with the metadata keys
// and tensor names llama.cpp reads for its architecture. The writer draws
// and encodes each tensor as it writes the file, in memory of about the
// largest tensor's encoding, and gives the same bytes each time.
func Synth(o SynthOptions) (*gguf.Writer, error) {
	g, err := newSynth(o)
	if err != nil {
		return nil, err
	}
	return g.w, nil
}

// newSynth checks o and lays out its model: metadata, and each tensor's
// draw from the stream.
func newSynth(o SynthOptions) (*synthGen, error) {
	spec, ok := archs[o.Arch]
	if !ok || spec.synth == nil {
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
	moe := o.Arch == "qwen3moe" || o.Arch == "glm4moe" || o.Arch == "gpt-oss" || o.Arch == "qwen35moe" || o.Arch == "qwen3next"
	windowed := o.Arch == "gpt-oss" || o.Arch == "gemma3"
	switch {
	case !moe && (o.Experts != 0 || o.ExpertsUsed != 0 || o.SharedExperts != 0 || o.DenseLayers != 0):
		return nil, fmt.Errorf("synth: %s has no experts", o.Arch)
	case moe && (o.Experts <= 0 || o.ExpertsUsed <= 0 || o.ExpertsUsed > o.Experts || o.ExpertFF <= 0):
		return nil, fmt.Errorf("synth: %s needs experts > 0, 0 < experts used ≤ experts and expert ff > 0 (have %d, %d, %d)", o.Arch, o.Experts, o.ExpertsUsed, o.ExpertFF)
	case o.SharedExperts < 0 || o.DenseLayers < 0 || o.DenseLayers > o.Layers || o.SlidingWindow < 0:
		return nil, fmt.Errorf("synth: shared experts, dense layers (≤ layers) and sliding window must not be negative")
	case o.Arch != "glm4moe" && (o.SharedExperts != 0 || o.DenseLayers != 0):
		return nil, fmt.Errorf("synth: shared experts and dense layers are glm4moe's")
	case !windowed && o.SlidingWindow != 0:
		return nil, fmt.Errorf("synth: a sliding window is gpt-oss's and gemma3's")
	}
	if o.Vocab != nil && o.TextVocab {
		return nil, fmt.Errorf("synth: a text vocabulary is the byte vocabulary's, not a copied one")
	}
	if err := checkHybrid(&o); err != nil {
		return nil, err
	}
	w := &gguf.Writer{}
	g := &synthGen{o: o, w: w, s: newStream(o.Seed)}
	a := o.Arch
	w.AddKV("general.architecture", a)
	w.AddKV("general.name", fmt.Sprintf("synth-%s-%dL-%dd", a, o.Layers, o.Dim))
	w.AddKV("general.alignment", uint32(32))
	g.kv("block_count", uint32(o.Layers))
	g.kv("context_length", uint32(o.Context))
	g.kv("embedding_length", uint32(o.Dim))
	g.kv("feed_forward_length", uint32(o.FF))
	g.kv("attention.head_count", uint32(o.Heads))
	g.kv("attention.head_count_kv", uint32(o.KVHeads))
	g.kv("attention.key_length", uint32(o.HeadDim))
	g.kv("attention.value_length", uint32(o.HeadDim))
	if a != "glm4moe" && o.SSMVHeads == 0 { // their own: partial rotary
		g.kv("rope.dimension_count", uint32(o.HeadDim))
	}
	if a != "gpt-oss" && a != "gemma3" { // their own base
		g.kv("rope.freq_base", float32(10000))
	}
	g.kv("attention.layer_norm_rms_epsilon", float32(1e-6))
	if moe {
		g.kv("expert_count", uint32(o.Experts))
		g.kv("expert_used_count", uint32(o.ExpertsUsed))
		g.kv("expert_feed_forward_length", uint32(o.ExpertFF))
	}
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
		if o.TextVocab {
			for i := 3; i < len(types); i++ {
				types[i] = 1 // normal
			}
		}
		vocab = len(tokens)
		w.AddKV("tokenizer.ggml.model", "llama")
		w.AddKV("tokenizer.ggml.tokens", tokens)
		w.AddKV("tokenizer.ggml.scores", scores)
		w.AddKV("tokenizer.ggml.token_type", types)
		w.AddKV("tokenizer.ggml.bos_token_id", uint32(1))
		w.AddKV("tokenizer.ggml.eos_token_id", uint32(2))
		w.AddKV("tokenizer.ggml.unknown_token_id", uint32(0))
	}
	spec.synth(g, -1) // the architecture's own metadata
	g.mat("token_embd.weight", vocab, o.Dim)
	g.vec("output_norm.weight", 1, 0.1, o.Dim)
	g.mat("output.weight", vocab, o.Dim)
	for l := 0; l < o.Layers; l++ {
		spec.synth(g, l)
	}
	return g, nil
}

// Shared pieces of the architectures' synth functions, each writing the
// tensors its group of weights binds (p is the layer's prefix).

func (g *synthGen) attention(p string, bias bool) {
	o := g.o
	q, kv := o.Heads*o.HeadDim, o.KVHeads*o.HeadDim
	g.mat(p+"attn_q.weight", q, o.Dim)
	g.mat(p+"attn_k.weight", kv, o.Dim)
	g.mat(p+"attn_v.weight", kv, o.Dim)
	if bias {
		g.vec(p+"attn_q.bias", 0, 0.1, q)
		g.vec(p+"attn_k.bias", 0, 0.1, kv)
		g.vec(p+"attn_v.bias", 0, 0.1, kv)
	}
}

func (g *synthGen) qkNorm(p string) {
	g.vec(p+"attn_q_norm.weight", 1, 0.1, g.o.HeadDim)
	g.vec(p+"attn_k_norm.weight", 1, 0.1, g.o.HeadDim)
}

func (g *synthGen) mlp(p, suffix string, ff int) {
	g.mat(p+"ffn_gate"+suffix+".weight", ff, g.o.Dim)
	g.mat(p+"ffn_up"+suffix+".weight", ff, g.o.Dim)
	g.mat(p+"ffn_down"+suffix+".weight", g.o.Dim, ff)
}

func (g *synthGen) experts(p string) {
	o := g.o
	g.weights(p+"ffn_gate_exps.weight", o.Dim, o.ExpertFF, o.Experts)
	g.weights(p+"ffn_up_exps.weight", o.Dim, o.ExpertFF, o.Experts)
	g.weights(p+"ffn_down_exps.weight", o.ExpertFF, o.Dim, o.Experts)
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
