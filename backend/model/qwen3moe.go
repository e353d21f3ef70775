package model

import "fmt"

// qwen3moe: Qwen3's mixture of experts (Qwen3-30B-A3B, Qwen3-Coder-30B-A3B,
// 235B-A22B). Qwen3's attention (QK-norm, NeoX RoPE), then in every layer
// routed experts instead of the MLP: softmax over all experts, the top k,
// their probabilities renormalised to sum 1; no shared expert.
func init() {
	register("qwen3moe", archSpec{ropeNeox: true, keys: []string{"expert_count", "expert_used_count", "expert_feed_forward_length"},
		layer: func(*Config, int) block { return &qwen3moeLayer{} }, synth: synthQwen3moe})
}

type qwen3moeLayer struct {
	AttnNorm *Vec `gguf:"attn_norm" shape:"dim"` // (dim)
	Attn     attention
	QKNorm   qkNorm
	FFNNorm  *Vec `gguf:"ffn_norm" shape:"dim"` // (dim)
	MoE      moe
}

func (l *qwen3moeLayer) forward(s *step) {
	s.norm(l.AttnNorm)
	s.project(&l.Attn)
	s.headNorm(&l.QKNorm)
	s.rope(s.c.Rope())
	s.attend(0, nil)
	s.output(l.Attn.O, nil)
	s.norm(l.FFNNorm)
	s.moe(&l.MoE, nil, l, siluGLU)
}

// route: softmax over every expert, the k most probable, renormalised.
func (l *qwen3moeLayer) route(logits []float32, ids []int32, w []float32) {
	softmax(logits)
	topK(logits, ids)
	for j, e := range ids {
		w[j] = logits[e]
	}
	normalize(w)
}

func synthQwen3moe(g *synthGen, i int) {
	if i < 0 {
		return
	}
	o := g.o
	p := fmt.Sprintf("blk.%d.", i)
	g.vec(p+"attn_norm.weight", 1, 0.1, o.Dim)
	g.attention(p, false)
	g.qkNorm(p)
	g.mat(p+"attn_output.weight", o.Dim, o.Heads*o.HeadDim)
	g.vec(p+"ffn_norm.weight", 1, 0.1, o.Dim)
	g.router(p+"ffn_gate_inp.weight", o.Experts, o.Dim)
	g.experts(p)
}
