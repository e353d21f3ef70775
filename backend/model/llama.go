package model

import "fmt"

// llama: Llama 1/2/3 and the llama2.c TinyStories models. RoPE rotates
// adjacent pairs because llama.cpp's converter permutes Q and K to match.
func init() {
	register("llama", archSpec{ropeNeox: false, layer: func(*Config, int) block { return &llamaLayer{} }, synth: synthLlama})
}

type llamaLayer struct {
	AttnNorm *Vec `gguf:"attn_norm" shape:"dim"` // (dim)
	Attn     attention
	FFNNorm  *Vec `gguf:"ffn_norm" shape:"dim"` // (dim)
	MLP      mlp
}

func (l *llamaLayer) forward(s *step) {
	s.norm(l.AttnNorm)
	s.project(&l.Attn)
	s.rope(s.c.Rope())
	s.attend(0, nil)
	s.output(l.Attn.O, nil)
	s.norm(l.FFNNorm)
	s.mlp(&l.MLP)
}

func synthLlama(g *synthGen, i int) {
	if i < 0 {
		return
	}
	p := fmt.Sprintf("blk.%d.", i)
	g.vec(p+"attn_norm.weight", 1, 0.1, g.o.Dim)
	g.attention(p, false)
	g.mat(p+"attn_output.weight", g.o.Dim, g.o.Heads*g.o.HeadDim)
	g.vec(p+"ffn_norm.weight", 1, 0.1, g.o.Dim)
	g.mlp(p, "", g.o.FF)
}
