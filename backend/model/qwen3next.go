package model

import "fmt"

// qwen3next: Qwen3-Next and Qwen3-Coder-Next. qwen35moe's layers (three
// Gated DeltaNet layers then one of gated full attention, fixed at four
// by ik_llama.cpp whatever the file says; routed experts beside a gated
// shared expert) with the DeltaNet projections fused as first released:
// ssm_in gives q, k, v and z grouped by key head, ssm_ba beta and alpha,
// and a value head reads the key head of its group (not tiled). Plain
// NeoX RoPE, partial. (ik_llama.cpp's build_qwen3next.)
func init() {
	register("qwen3next", archSpec{ropeNeox: true, config: readSharedConfig, state: deltaLayerState,
		keys: []string{"expert_count", "expert_used_count", "expert_feed_forward_length"},
		layer: func(c *Config, i int) block {
			if c.recurrentLayer(i) {
				return &qwen3nextLinear{}
			}
			return &qwen35moeFull{}
		},
		synth: synthQwen3next})
}

type qwen3nextLinear struct {
	qwen35moeLayer
	Proj  deltaFused
	Delta deltaNet
}

func (l *qwen3nextLinear) forward(s *step) {
	s.norm(l.AttnNorm)
	l.Proj.project(s)
	s.delta(&l.Delta, false)
	l.ffn(s)
}

func synthQwen3next(g *synthGen, i int) {
	if i < 0 {
		g.deltaMeta()
		return
	}
	o := g.o
	p := fmt.Sprintf("blk.%d.", i)
	g.vec(p+"attn_norm.weight", 1, 0.1, o.Dim)
	if g.deltaLayer(i) {
		v := o.SSMVHeads * o.SSMDim
		g.mat(p+"ssm_in.weight", 2*o.SSMKHeads*o.SSMDim+2*v, o.Dim)
		g.mat(p+"ssm_ba.weight", 2*o.SSMVHeads, o.Dim)
		g.deltaNet(p)
	} else {
		g.gatedAttention(p)
	}
	g.vec(p+"post_attention_norm.weight", 1, 0.1, o.Dim)
	g.gatedExperts(p)
}
