// Package model holds the transformer architectures. Each is one small
// file (llama.go, qwen3moe.go, gptoss.go …) that declares its layer's
// weights as a struct whose fields bind from GGUF tensor names by struct
// tags, and states its block as straight-line calls of the shared
// building blocks (blocks.go: norms, attention with its RoPE variants,
// the dense MLP; moe.go: the routed experts), which run on the kernels
// interface. Forward (forward.go) runs the embedding, every layer's block
// and the output head over one batch.
package model

import (
	"fmt"
	"math"
	"reflect"
	"sort"

	"jspark/backend/embedded"
	"jspark/backend/gguf"
	"jspark/backend/tokenizer"
	"jspark/kernels"
	"jspark/kernels/quant"
)

// Config holds the architecture facts read from GGUF metadata.
type Config struct {
	Arch       string  `json:"arch"`
	Name       string  `json:"name,omitempty"`
	Layers     int     `json:"n_layer"`
	Dim        int     `json:"n_embd"`
	Heads      int     `json:"n_head"`
	KVHeads    int     `json:"n_head_kv"`
	HeadDim    int     `json:"head_dim"`
	FF         int     `json:"n_ff"`
	Vocab      int     `json:"vocab_size"`
	Context    int     `json:"context_length"`
	RMSEps     float32 `json:"rms_eps"`
	RopeBase   float32 `json:"rope_base"`
	RopeDim    int     `json:"rope_dim"`
	RopeNeox   bool    `json:"-"`
	TiedOutput bool    `json:"tied_output"`

	// Rope scaling (rope.scaling.*): "" or "none", "linear" or "yarn".
	RopeScaling  string  `json:"rope_scaling,omitempty"`
	RopeFactor   float32 `json:"rope_factor,omitempty"`   // context multiple (1/freq_scale)
	RopeOrigCtx  int     `json:"rope_orig_ctx,omitempty"` // the context trained before scaling
	RopeAttn     float32 `json:"-"`                       // rope.scaling.attn_factor
	YarnBetaFast float32 `json:"-"`
	YarnBetaSlow float32 `json:"-"`

	// Mixture of experts: zero Experts for a dense model.
	Experts            int     `json:"n_expert,omitempty"`
	ExpertsUsed        int     `json:"n_expert_used,omitempty"`
	ExpertFF           int     `json:"n_ff_exp,omitempty"`
	SharedExperts      int     `json:"n_expert_shared,omitempty"`
	DenseLayers        int     `json:"n_layer_dense_lead,omitempty"` // leading layers with a dense MLP
	ExpertWeightsScale float32 `json:"expert_weights_scale,omitempty"`
	ExpertWeightsNorm  bool    `json:"expert_weights_norm,omitempty"`
	// SlidingWindow is the window of the sliding-window layers (0: none).
	SlidingWindow int  `json:"sliding_window,omitempty"`
	Sinks         bool `json:"attn_sinks,omitempty"` // attention has per-head sink logits

	Hybrid // sliding-window and recurrent families (hybrid.go)
}

// RopeType names the rotation as llama.cpp does: "normal" or "neox".
func (c Config) RopeType() string {
	if c.RopeNeox {
		return "neox"
	}
	return "normal"
}

// KVDim is the width of one token's keys (and of its values) in one layer.
func (c Config) KVDim() int { return c.KVHeads * c.HeadDim }

// KVBytesPerToken is the KV memory one token takes over all layers that
// keep keys and values (every layer but the recurrent ones), of type t
// (F32 or F16).
func (c Config) KVBytesPerToken(t quant.Type) int {
	return 2 * (c.Layers - c.RecurrentLayers()) * t.RowBytes(c.KVDim())
}

// AttnScale is the softmax scale: 1/sqrt(head_dim), or the architecture's
// own (QueryScale).
func (c Config) AttnScale() float32 {
	if c.QueryScale != 0 {
		return c.QueryScale
	}
	return float32(1 / math.Sqrt(float64(c.HeadDim)))
}

// Rope is the rotation of the attention layers, as ggml's rope_ext makes
// it from the file's rope.* keys: plain, linear (positions divided by the
// factor) or YaRN (interpolated below the correction dims, with the
// magnitude correction).
func (c Config) Rope() kernels.Rope {
	r := kernels.PlainRope(c.RopeDim, c.RopeBase, c.RopeNeox)
	switch c.RopeScaling {
	case "linear":
		r.FreqScale = 1 / c.RopeFactor
	case "yarn":
		r.FreqScale = 1 / c.RopeFactor
		r.ExtFactor = 1
		// As ggml: mscale = attn_factor · (1 + 0.1·ln(1/freq_scale)), in
		// float32, and the correction dims from the original context.
		r.Mscale = c.RopeAttn * (1 + 0.1*float32(math.Log(float64(1/r.FreqScale))))
		corr := func(beta float32) float64 {
			return float64(c.RopeDim) * math.Log(float64(c.RopeOrigCtx)/(float64(beta)*2*math.Pi)) / (2 * math.Log(float64(c.RopeBase)))
		}
		r.Corr = [2]float32{float32(max(0, math.Floor(corr(c.YarnBetaFast)))), float32(min(float64(c.RopeDim-1), math.Ceil(corr(c.YarnBetaSlow))))}
	}
	return r
}

// A block is one layer of an architecture: a struct of its weights, bound
// from the tensors of the layer's prefix (blk.N.) by the fields' gguf tags
// (bind.go), whose forward states the layer over the shared blocks.
type block interface {
	forward(s *step)
}

// archSpec is what an architecture file registers.
type archSpec struct {
	ropeNeox bool     // rotate halves (GPT-NeoX) instead of adjacent pairs
	keys     []string // metadata it needs beyond the common ones, without the arch prefix
	// layer returns layer i's empty block (its weights bind after).
	layer func(c *Config, i int) block
	// synth writes layer i's tensors of a random model (synth.go), or with
	// i = -1 the architecture's own metadata; nil: it is not synthesized.
	synth func(g *synthGen, i int)
	// config reads the architecture's own metadata after the common keys
	// (nil: none); state says what layer i keeps of a sequence (nil: its
	// keys and values, every position).
	config func(c *Config, f *gguf.File) error
	state  func(c *Config, i int) LayerState
}

var archs = map[string]archSpec{}

// register makes an architecture loadable; each arch file calls it in init.
func register(name string, a archSpec) { archs[name] = a }

// Archs lists the registered architecture names.
func Archs() []string {
	var names []string
	for n := range archs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Model is a loaded transformer.
type Model struct {
	Config
	Tok *tokenizer.Tokenizer
	K   kernels.Kernels
	// KVType is the element type (F32 or F16) of the KV pools Generate makes.
	KVType quant.Type

	TokenEmbd  *kernels.Matrix `gguf:"token_embd" shape:"vocab dim"`
	OutputNorm *Vec            `gguf:"output_norm" shape:"dim"`
	Output     *kernels.Matrix `gguf:"output,alt:token_embd" shape:"vocab dim"`
	Blocks     []block         // (layer) each layer's weights and its block
	dev        *device         // step buffers on K's device (device.go)
	// onRoute, when set (by tests), sees each MoE layer's choice of
	// experts for the step's tokens, (tokens, k).
	onRoute func(layer int, ids []int32)
}

// Load binds a model's weights from f (which must stay open) and builds its
// tokenizer. The kernels k compute its forward pass.
func Load(f *gguf.File, k kernels.Kernels) (*Model, error) {
	c, err := ReadConfig(f)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, err
	}
	c.Vocab = tok.VocabSize()
	m := &Model{Config: c, Tok: tok, K: k}
	b := binder{f: f, c: &m.Config}
	b.bind(reflect.ValueOf(m).Elem(), "")
	spec := archs[c.Arch]
	m.Blocks = make([]block, c.Layers)
	for i := range m.Blocks {
		m.Blocks[i] = spec.layer(&m.Config, i)
		b.bind(reflect.ValueOf(m.Blocks[i]).Elem(), fmt.Sprintf("blk.%d.", i))
	}
	if b.err != nil {
		return nil, b.err
	}
	m.TiedOutput = m.Output == m.TokenEmbd || m.Output.Data != nil && &m.Output.Data[0] == &m.TokenEmbd.Data[0]
	if err := m.upload(); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	return m, nil
}

// Matrices lists every weight matrix the forward pass multiplies by (the
// embedding only when tied to the output), an expert tensor as its
// experts, in layer order.
func (m *Model) Matrices() []*kernels.Matrix {
	ws := []*kernels.Matrix{m.Output}
	for _, b := range m.Blocks {
		walk(reflect.ValueOf(b).Elem(), func(w *kernels.Matrix) { ws = append(ws, w) }, nil, func(e *Experts) { ws = append(ws, e.M...) })
	}
	return ws
}

// OpenFile opens the GGUF file at path, or the embedded default when path
// is "".
func OpenFile(path string) (*gguf.File, error) {
	if path == "" {
		return embedded.Open()
	}
	return gguf.Open(path)
}

// Open loads the model at path, or the embedded default when path is "".
// The returned close function releases the file.
func Open(path string, k kernels.Kernels) (*Model, func() error, error) {
	f, err := OpenFile(path)
	if err != nil {
		return nil, nil, err
	}
	m, err := Load(f, k)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return m, f.Close, nil
}
