package model

import "fmt"

// qwen2: Qwen2 and Qwen2.5. Llama's block plus biases on Q, K and V, and
// NeoX-style RoPE.
func init() {
	register("qwen2", archSpec{ropeNeox: true, layer: func(*Config, int) block { return &qwen2Layer{} }, synth: synthQwen2})
}

type qwen2Layer struct {
	AttnNorm *Vec `gguf:"attn_norm" shape:"dim"` // (dim)
	Attn     attention
	Bias     qkvBias
	FFNNorm  *Vec `gguf:"ffn_norm" shape:"dim"` // (dim)
	MLP      mlp
}

func (l *qwen2Layer) forward(s *step) {
	s.norm(l.AttnNorm)
	s.project(&l.Attn)
	s.bias(&l.Bias)
	s.rope(s.c.Rope())
	s.attend(0, nil)
	s.output(l.Attn.O, nil)
	s.norm(l.FFNNorm)
	s.mlp(&l.MLP)
}

func synthQwen2(g *synthGen, i int) {
	if i < 0 {
		return
	}
	p := fmt.Sprintf("blk.%d.", i)
	g.vec(p+"attn_norm.weight", 1, 0.1, g.o.Dim)
	g.attention(p, true)
	g.mat(p+"attn_output.weight", g.o.Dim, g.o.Heads*g.o.HeadDim)
	g.vec(p+"ffn_norm.weight", 1, 0.1, g.o.Dim)
	g.mlp(p, "", g.o.FF)
}
