package model

import "fmt"

// qwen3: Qwen3 dense models. No QKV bias; RMSNorm on each head of Q and K
// before RoPE; NeoX RoPE; head_dim from attention.key_length rather than
// n_embd/n_head.
func init() {
	register("qwen3", archSpec{ropeNeox: true, layer: func(*Config, int) block { return &qwen3Layer{} }, synth: synthQwen3})
}

type qwen3Layer struct {
	AttnNorm *Vec `gguf:"attn_norm" shape:"dim"` // (dim)
	Attn     attention
	QKNorm   qkNorm
	FFNNorm  *Vec `gguf:"ffn_norm" shape:"dim"` // (dim)
	MLP      mlp
}

func (l *qwen3Layer) forward(s *step) {
	s.norm(l.AttnNorm)
	s.project(&l.Attn)
	s.headNorm(&l.QKNorm)
	s.rope(s.c.Rope())
	s.attend(0, nil)
	s.output(l.Attn.O, nil)
	s.norm(l.FFNNorm)
	s.mlp(&l.MLP)
}

func synthQwen3(g *synthGen, i int) {
	if i < 0 {
		return
	}
	p := fmt.Sprintf("blk.%d.", i)
	g.vec(p+"attn_norm.weight", 1, 0.1, g.o.Dim)
	g.attention(p, false)
	g.qkNorm(p)
	g.mat(p+"attn_output.weight", g.o.Dim, g.o.Heads*g.o.HeadDim)
	g.vec(p+"ffn_norm.weight", 1, 0.1, g.o.Dim)
	g.mlp(p, "", g.o.FF)
}
