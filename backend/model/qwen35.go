package model

import (
	"fmt"

	"jspark/backend/gguf"
)

// qwen35: Qwen3.5 and 3.6, dense; qwen35moe: their mixtures of experts
// (35B-A3B, 122B-A10B, 397B-A17B). Of every full_attention_interval
// layers (4) all but the last are Gated DeltaNet layers (delta.go: a short
// convolution, the gated delta rule, value heads reading key heads tiled)
// and the last is gated full attention (QK-norm, partial NeoX RoPE over
// rope.dimension_count dims, a sigmoid gate on each output element). The
// files state rope.dimension_sections (interleaved M-RoPE, for images); a
// text token's sections all turn by its position, which is plain NeoX
// RoPE. After the mixer, post_attention_norm and the MLP: a dense SwiGLU
// (qwen35), or routed experts (softmax over all, top k, renormalised)
// beside a shared expert behind a sigmoid gate (qwen35moe). The file's
// last nextn_predict_layers blocks (multi-token prediction) are not run
// (config.go). (ik_llama.cpp's build_qwen35 and build_qwen35moe.)
func init() {
	register("qwen35", archSpec{ropeNeox: true, config: readDeltaConfig, state: deltaLayerState,
		layer: func(c *Config, i int) block {
			if c.recurrentLayer(i) {
				return &qwen35Linear{}
			}
			return &qwen35Full{}
		},
		synth: synthQwen35})
	register("qwen35moe", archSpec{ropeNeox: true, config: readSharedConfig, state: deltaLayerState,
		keys: []string{"expert_count", "expert_used_count", "expert_feed_forward_length"},
		layer: func(c *Config, i int) block {
			if c.recurrentLayer(i) {
				return &qwen35moeLinear{}
			}
			return &qwen35moeFull{}
		},
		synth: synthQwen35})
}

func deltaLayerState(c *Config, i int) LayerState {
	if c.recurrentLayer(i) {
		return c.deltaState()
	}
	return LayerState{Kind: FullAttention}
}

// readSharedConfig reads a DeltaNet family with routed experts: its
// shared expert is expert_shared_feed_forward_length wide (or as wide as
// the dense feed-forward, as ik_llama.cpp defaults it).
func readSharedConfig(c *Config, f *gguf.File) error {
	if err := readDeltaConfig(c, f); err != nil {
		return err
	}
	if c.SharedFF == 0 {
		c.SharedFF = c.FF
	}
	c.SharedExperts = 1
	return nil
}

// qwen35Layer is what every layer of the dense model has besides its
// mixer: the mixer's input norm and the MLP with its own.
type qwen35Layer struct {
	AttnNorm *Vec `gguf:"attn_norm" shape:"dim"`           // (dim)
	PostNorm *Vec `gguf:"post_attention_norm" shape:"dim"` // (dim) the MLP's input norm
	MLP      mlp
}

func (l *qwen35Layer) ffn(s *step) {
	s.norm(l.PostNorm)
	s.mlp(&l.MLP)
}

type qwen35Linear struct {
	qwen35Layer
	Proj  deltaProj
	Delta deltaNet
}

func (l *qwen35Linear) forward(s *step) {
	s.norm(l.AttnNorm)
	l.Proj.project(s)
	s.delta(&l.Delta, true)
	l.ffn(s)
}

type qwen35Full struct {
	qwen35Layer
	Attn gatedAttention
}

func (l *qwen35Full) forward(s *step) {
	s.norm(l.AttnNorm)
	s.gatedAttend(&l.Attn, s.c.Rope())
	l.ffn(s)
}

// qwen35moeLayer is the MoE model's: routed experts and the gated shared
// expert, of one normed input.
type qwen35moeLayer struct {
	AttnNorm *Vec `gguf:"attn_norm" shape:"dim"`           // (dim)
	PostNorm *Vec `gguf:"post_attention_norm" shape:"dim"` // (dim) the experts' input norm
	MoE      moe
	Shared   gatedShared
}

func (l *qwen35moeLayer) ffn(s *step) {
	s.norm(l.PostNorm)
	s.moe(&l.MoE, nil, l, siluGLU)
	s.gatedShared(&l.Shared)
}

// route: qwen3moe's router (softmax over every expert, the k most
// probable, renormalised).
func (l *qwen35moeLayer) route(logits []float32, ids []int32, w []float32) {
	(*qwen3moeLayer)(nil).route(logits, ids, w)
}

type qwen35moeLinear struct {
	qwen35moeLayer
	Proj  deltaProj
	Delta deltaNet
}

func (l *qwen35moeLinear) forward(s *step) {
	s.norm(l.AttnNorm)
	l.Proj.project(s)
	s.delta(&l.Delta, true)
	l.ffn(s)
}

type qwen35moeFull struct {
	qwen35moeLayer
	Attn gatedAttention
}

func (l *qwen35moeFull) forward(s *step) {
	s.norm(l.AttnNorm)
	s.gatedAttend(&l.Attn, s.c.Rope())
	l.ffn(s)
}

func synthQwen35(g *synthGen, i int) {
	if i < 0 {
		g.deltaMeta()
		return
	}
	p := fmt.Sprintf("blk.%d.", i)
	g.vec(p+"attn_norm.weight", 1, 0.1, g.o.Dim)
	if g.deltaLayer(i) {
		g.deltaProj(p)
		g.deltaNet(p)
	} else {
		g.gatedAttention(p)
	}
	g.vec(p+"post_attention_norm.weight", 1, 0.1, g.o.Dim)
	if g.o.Arch == "qwen35" {
		g.mlp(p, "", g.o.FF)
		return
	}
	g.gatedExperts(p)
}
