package model

import "fmt"

// glm4moe: GLM-4.5, 4.5-Air, 4.6, 4.7. Attention with biases on Q, K and V
// (and QK-norm where the file has it) and partial NeoX RoPE (the first
// rope.dimension_count dims of a head, half of it in the released
// models); then a dense MLP in the leading_dense_block_count first layers
// and routed experts in the rest: sigmoid scores, the top k chosen by
// score plus a per-expert selection bias (exp_probs_b) but weighted by
// the unbiased scores, normalised when expert_weights_norm and scaled by
// expert_weights_scale (ik_llama.cpp's llm_build_moe_ffn), beside a
// shared expert every token runs. The file's last nextn_predict_layers
// blocks are a multi-token-prediction head, not run (config.go).
func init() {
	register("glm4moe", archSpec{ropeNeox: true,
		keys: []string{"expert_count", "expert_used_count", "expert_feed_forward_length", "expert_shared_count"},
		layer: func(c *Config, i int) block {
			switch {
			case i < c.DenseLayers:
				return &glm4moeDense{}
			case c.SharedExperts > 0:
				return &glm4moeShared{glm4moeLayer: glm4moeLayer{c: c}}
			}
			return &glm4moeLayer{c: c}
		},
		synth: synthGLM4moe})
}

// glmAttention is the attention sub-block of every GLM layer, ending with
// the MLP's input norm.
type glmAttention struct {
	AttnNorm *Vec `gguf:"attn_norm" shape:"dim"` // (dim)
	Attn     attention
	Bias     qkvBias
	QKNorm   optQKNorm
	PostNorm *Vec `gguf:"post_attention_norm" shape:"dim"` // (dim) the MLP's input norm
}

// optQKNorm is qkNorm where a family has it in some models only.
type optQKNorm struct {
	Q *Vec `gguf:"attn_q_norm,optional" shape:"head_dim"` // (head_dim)
	K *Vec `gguf:"attn_k_norm,optional" shape:"head_dim"` // (head_dim)
}

func (a *glmAttention) forward(s *step) {
	s.norm(a.AttnNorm)
	s.project(&a.Attn)
	s.bias(&a.Bias)
	if a.QKNorm.Q != nil && a.QKNorm.K != nil {
		s.headNorm((*qkNorm)(&a.QKNorm))
	}
	s.rope(s.c.Rope())
	s.attend(0, nil)
	s.output(a.Attn.O, nil)
	s.norm(a.PostNorm)
}

// glm4moeDense is a leading layer: attention, then a dense MLP.
type glm4moeDense struct {
	glmAttention
	MLP mlp
}

func (l *glm4moeDense) forward(s *step) {
	l.glmAttention.forward(s)
	s.mlp(&l.MLP)
}

// glm4moeLayer is a layer of routed experts.
type glm4moeLayer struct {
	glmAttention
	MoE       moe
	ProbsBias *Vec    `gguf:"exp_probs_b.bias" shape:"experts"` // (experts) added to the scores for the choice only
	c         *Config // the expert weights' norm and scale
	sel       []float32
}

func (l *glm4moeLayer) forward(s *step) {
	l.glmAttention.forward(s)
	s.moe(&l.MoE, nil, l, siluGLU)
}

// glm4moeShared adds the shared expert, of the same normed input.
type glm4moeShared struct {
	glm4moeLayer
	Shared sharedExpert
}

func (l *glm4moeShared) forward(s *step) {
	l.glm4moeLayer.forward(s)
	s.mlp((*mlp)(&l.Shared))
}

// route: sigmoid scores; the top k of score + selection bias; weighted by
// their scores, normalised and scaled as the file says.
func (l *glm4moeLayer) route(logits []float32, ids []int32, w []float32) {
	if len(l.sel) < len(logits) {
		l.sel = make([]float32, len(logits))
	}
	sel := l.sel[:len(logits)]
	for e, v := range logits {
		logits[e] = 1 / (1 + float32(exp64(-v)))
		sel[e] = logits[e] + l.ProbsBias.Data[e]
	}
	topK(sel, ids)
	for j, e := range ids {
		w[j] = logits[e]
	}
	if l.c.ExpertWeightsNorm {
		normalize(w)
	}
	for j := range w {
		w[j] *= l.c.ExpertWeightsScale
	}
}

func synthGLM4moe(g *synthGen, i int) {
	o := g.o
	if i < 0 {
		g.kv("expert_shared_count", uint32(o.SharedExperts))
		g.kv("leading_dense_block_count", uint32(o.DenseLayers))
		g.kv("expert_weights_scale", float32(2.5))
		g.kv("expert_weights_norm", true)
		g.kv("expert_gating_func", uint32(2)) // sigmoid
		g.kv("rope.dimension_count", uint32(o.HeadDim/2))
		return
	}
	p := fmt.Sprintf("blk.%d.", i)
	g.vec(p+"attn_norm.weight", 1, 0.1, o.Dim)
	g.attention(p, true)
	g.mat(p+"attn_output.weight", o.Dim, o.Heads*o.HeadDim)
	g.vec(p+"post_attention_norm.weight", 1, 0.1, o.Dim)
	if i < o.DenseLayers {
		g.mlp(p, "", o.FF)
		return
	}
	g.router(p+"ffn_gate_inp.weight", o.Experts, o.Dim)
	g.vec(p+"exp_probs_b.bias", 0, 0.05, o.Experts)
	g.experts(p)
	if o.SharedExperts > 0 {
		g.mlp(p, "_shexp", o.ExpertFF*o.SharedExperts)
	}
}
