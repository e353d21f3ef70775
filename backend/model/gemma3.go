package model

import (
	"fmt"
	"math"

	"jspark/backend/gguf"
	"jspark/kernels"
)

// gemma3: Gemma 3. Of every six layers the first five attend through a
// sliding window of attention.sliding_window positions, rotated with RoPE
// base rope.freq_base_swa (10000) and no scaling; the sixth attends to the
// whole context with rope.freq_base and the file's rope scaling. QK-norm;
// the softmax scale 1/√key_length (1/√(dim/heads) in the 62-layer 27B, as
// ik_llama.cpp has it); RMSNorm before and after both the attention and
// the MLP (the converter stores Gemma's 1+w gains, so they multiply as any
// other); a GeGLU MLP (gelu's tanh form); the embedding scaled by √dim
// (ik_llama.cpp's build_gemma3).
func init() {
	register("gemma3", archSpec{ropeNeox: true, config: readGemma3Config,
		state: func(c *Config, i int) LayerState {
			if gemma3Sliding(i) {
				return LayerState{Kind: SlidingWindow, Window: c.SlidingWindow}
			}
			return LayerState{Kind: FullAttention}
		},
		layer: func(c *Config, i int) block {
			if gemma3Sliding(i) {
				return &gemma3Layer{window: c.SlidingWindow, rope: kernels.PlainRope(c.RopeDim, c.RopeLocalBase, true)}
			}
			return &gemma3Layer{rope: c.Rope()}
		},
		synth: synthGemma3})
}

// gemma3Sliding: five sliding-window layers, then a global one (the
// pattern ik_llama.cpp fixes at 6).
func gemma3Sliding(i int) bool { return (i+1)%6 != 0 }

func readGemma3Config(c *Config, f *gguf.File) error {
	if c.SlidingWindow == 0 {
		return fmt.Errorf("missing metadata %s.attention.sliding_window", c.Arch)
	}
	c.RopeLocalBase = 10000
	if v, ok := f.Float(c.Arch + ".rope.freq_base_swa"); ok {
		c.RopeLocalBase = float32(v)
	}
	c.EmbedScale = float32(math.Sqrt(float64(c.Dim)))
	c.QueryScale = float32(1 / math.Sqrt(float64(c.HeadDim)))
	if c.Layers == 62 { // the 27B's query_pre_attn_scalar is dim/heads
		c.QueryScale = float32(1 / math.Sqrt(float64(c.Dim/c.Heads)))
	}
	return nil
}

type gemma3Layer struct {
	AttnNorm *Vec `gguf:"attn_norm" shape:"dim"` // (dim)
	Attn     attention
	QKNorm   qkNorm
	AttnPost *Vec `gguf:"post_attention_norm" shape:"dim"` // (dim)
	FFNNorm  *Vec `gguf:"ffn_norm" shape:"dim"`            // (dim)
	MLP      mlp
	FFNPost  *Vec `gguf:"post_ffw_norm" shape:"dim"` // (dim)
	window   int  // 0: global
	rope     kernels.Rope
}

func (l *gemma3Layer) forward(s *step) {
	s.norm(l.AttnNorm)
	s.project(&l.Attn)
	s.headNorm(&l.QKNorm)
	s.rope(l.rope)
	s.attend(l.window, nil)
	s.k.MatMul(s.d.h, s.d.attn, s.n, l.Attn.O)
	s.postNorm(l.AttnPost)
	s.norm(l.FFNNorm)
	s.ffn(&l.MLP, geluGLU)
	s.postNorm(l.FFNPost)
}

// postNorm adds h, normed, to the residual: x += rms(h)·w.
func (s *step) postNorm(w *Vec) {
	s.k.RMSNorm(s.d.h, s.d.h, w.Buf, s.n, s.c.Dim, s.c.RMSEps)
	s.k.Add(s.d.x, s.d.h, s.n*s.c.Dim)
}

func synthGemma3(g *synthGen, i int) {
	o := g.o
	if i < 0 {
		g.kv("attention.sliding_window", uint32(o.SlidingWindow))
		g.kv("rope.freq_base", float32(1e6))
		g.kv("rope.scaling.type", "linear")
		g.kv("rope.scaling.factor", float32(8))
		return
	}
	p := fmt.Sprintf("blk.%d.", i)
	g.vec(p+"attn_norm.weight", 1, 0.1, o.Dim)
	g.attention(p, false)
	g.qkNorm(p)
	g.mat(p+"attn_output.weight", o.Dim, o.Heads*o.HeadDim)
	g.vec(p+"post_attention_norm.weight", 1, 0.1, o.Dim)
	g.vec(p+"ffn_norm.weight", 1, 0.1, o.Dim)
	g.mlp(p, "", o.FF)
	g.vec(p+"post_ffw_norm.weight", 1, 0.1, o.Dim)
}
