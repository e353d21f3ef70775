package model

import "fmt"

// gpt-oss: OpenAI's gpt-oss-20b and 120b. Biases on Q, K, V and the
// output; per-head attention sinks (a logit in each head's softmax with no
// value); even layers attend through a sliding window of
// attention.sliding_window positions, odd layers to the whole context;
// YaRN RoPE (rope.scaling.*). Every layer's MLP is routed experts, with
// biases on the router and every expert product: the top k router logits,
// a softmax over just those, and the clamped SwiGLU (ik_llama.cpp's
// build_openai_moe).
func init() {
	register("gpt-oss", archSpec{ropeNeox: true,
		keys: []string{"expert_count", "expert_used_count", "expert_feed_forward_length", "attention.sliding_window"},
		layer: func(c *Config, i int) block {
			l := &gptossLayer{}
			if i%2 == 0 {
				l.window = c.SlidingWindow
			}
			return l
		},
		state: func(c *Config, i int) LayerState {
			if i%2 == 0 {
				return LayerState{Kind: SlidingWindow, Window: c.SlidingWindow}
			}
			return LayerState{Kind: FullAttention}
		},
		synth: synthGPTOSS})
}

type gptossLayer struct {
	AttnNorm *Vec `gguf:"attn_norm" shape:"dim"` // (dim)
	Attn     attention
	Bias     qkvBias
	OBias    *Vec `gguf:"attn_output.bias" shape:"dim"`    // (dim)
	Sinks    *Vec `gguf:"attn_sinks" shape:"heads"`        // (heads)
	PostNorm *Vec `gguf:"post_attention_norm" shape:"dim"` // (dim) the experts' input norm
	MoE      moe
	EBias    expertBias
	window   int // 0: full attention
}

func (l *gptossLayer) forward(s *step) {
	s.norm(l.AttnNorm)
	s.project(&l.Attn)
	s.bias(&l.Bias)
	s.rope(s.c.Rope())
	s.attend(l.window, l.Sinks)
	s.output(l.Attn.O, l.OBias)
	s.norm(l.PostNorm)
	s.moe(&l.MoE, &l.EBias, l, oaiGLU)
}

// route: the k largest logits, weighted by a softmax over just those.
func (l *gptossLayer) route(logits []float32, ids []int32, w []float32) {
	topK(logits, ids)
	for j, e := range ids {
		w[j] = logits[e]
	}
	softmax(w)
}

func synthGPTOSS(g *synthGen, i int) {
	o := g.o
	if i < 0 {
		g.kv("attention.sliding_window", uint32(o.SlidingWindow))
		g.kv("rope.freq_base", float32(150000))
		g.kv("rope.scaling.type", "yarn")
		g.kv("rope.scaling.factor", float32(32))
		g.kv("rope.scaling.original_context_length", uint32(4096))
		return
	}
	p := fmt.Sprintf("blk.%d.", i)
	g.vec(p+"attn_norm.weight", 1, 0.1, o.Dim)
	g.attention(p, true)
	g.mat(p+"attn_output.weight", o.Dim, o.Heads*o.HeadDim)
	g.vec(p+"attn_output.bias", 0, 0.1, o.Dim)
	g.vec(p+"attn_sinks.weight", 0, 1, o.Heads)
	g.vec(p+"post_attention_norm.weight", 1, 0.1, o.Dim)
	g.router(p+"ffn_gate_inp.weight", o.Experts, o.Dim)
	g.vec(p+"ffn_gate_inp.bias", 0, 0.1, o.Experts)
	g.experts(p)
	g.vec(p+"ffn_gate_exps.bias", 0, 0.1, o.ExpertFF, o.Experts)
	g.vec(p+"ffn_up_exps.bias", 0, 0.1, o.ExpertFF, o.Experts)
	g.vec(p+"ffn_down_exps.bias", 0, 0.1, o.Dim, o.Experts)
}
