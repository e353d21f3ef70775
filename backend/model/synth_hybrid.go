package model

import (
	"fmt"
	"math"
	"math/rand/v2"

	"jspark/kernels/quant"
)

// The synthesis of the hybrid families: their option defaults and checks,
// and the tensors of their shared blocks (delta.go).

// defaultHybrid sets the hybrid families' options: small versions of the
// released shapes (Qwen3.5-35B-A3B: 16 key heads, 32 value heads of 128,
// every fourth layer full attention; gemma3: a window).
func defaultHybrid(o *SynthOptions) {
	switch o.Arch {
	case "gemma3":
		o.SlidingWindow = 128
	case "qwen35", "qwen35moe", "qwen3next":
		hd := o.HeadDim
		if hd == 0 && o.Heads > 0 {
			hd = o.Dim / o.Heads
		}
		o.FullAttnInterval, o.SSMKHeads, o.SSMVHeads, o.SSMDim = 4, max(o.Heads/2, 1), max(o.Heads, 1), hd
		if o.Arch != "qwen35" {
			o.Experts, o.ExpertsUsed, o.ExpertFF = 8, 2, max(o.FF/2, 32)
			o.SharedFF = o.ExpertFF
		}
	}
}

// checkHybrid refuses options that do not fit the architecture.
func checkHybrid(o *SynthOptions) error {
	delta := o.Arch == "qwen35" || o.Arch == "qwen35moe" || o.Arch == "qwen3next"
	switch {
	case !delta && (o.FullAttnInterval != 0 || o.SSMKHeads != 0 || o.SSMVHeads != 0 || o.SSMDim != 0 || o.SharedFF != 0):
		return fmt.Errorf("synth: %s has no recurrent layers", o.Arch)
	case o.Arch == "gemma3" && o.SlidingWindow <= 0:
		return fmt.Errorf("synth: gemma3 needs a sliding window")
	case !delta:
		return nil
	case o.FullAttnInterval < 1 || o.SSMKHeads < 1 || o.SSMDim < 1 || o.SSMVHeads < 1 || o.SSMVHeads%o.SSMKHeads != 0:
		return fmt.Errorf("synth: %s needs a full-attention interval ≥ 1 and value heads a multiple of key heads (have %d, %d, %d)",
			o.Arch, o.FullAttnInterval, o.SSMKHeads, o.SSMVHeads)
	case o.Arch == "qwen3next" && o.FullAttnInterval != 4:
		return fmt.Errorf("synth: qwen3next's full-attention interval is 4")
	case o.Arch != "qwen35" && o.SharedFF < 1:
		return fmt.Errorf("synth: %s needs a shared expert width", o.Arch)
	case o.Arch == "qwen35" && o.SharedFF != 0:
		return fmt.Errorf("synth: qwen35 has no shared expert")
	case o.HeadDim%4 != 0:
		return fmt.Errorf("synth: %s rotates a quarter of each head: head dim %d", o.Arch, o.HeadDim)
	}
	return nil
}

// deltaLayer says whether layer i is recurrent.
func (g *synthGen) deltaLayer(i int) bool { return (i+1)%g.o.FullAttnInterval != 0 }

// deltaMeta writes the DeltaNet families' metadata: ssm.*, the interval,
// a quarter of each head rotated (as the released models), and the rope
// sections ik_llama.cpp needs for qwen35 (interleaved, covering every
// rotated pair, so a text token rotates as plain NeoX RoPE).
func (g *synthGen) deltaMeta() {
	o := g.o
	g.kv("ssm.conv_kernel", uint32(4))
	g.kv("ssm.state_size", uint32(o.SSMDim))
	g.kv("ssm.group_count", uint32(o.SSMKHeads))
	g.kv("ssm.time_step_rank", uint32(o.SSMVHeads))
	g.kv("ssm.inner_size", uint32(o.SSMVHeads*o.SSMDim))
	g.kv("full_attention_interval", uint32(o.FullAttnInterval))
	rot := o.HeadDim / 4
	g.kv("rope.dimension_count", uint32(rot))
	if o.Arch != "qwen3next" {
		n := int32(rot / 2) // pairs: sections of the pairs ≡ 0, 1, 2 (mod 3)
		g.kv("rope.dimension_sections", []int32{(n + 2) / 3, (n + 1) / 3, n / 3, 0})
	}
	if o.SharedFF > 0 {
		g.kv("expert_shared_feed_forward_length", uint32(o.SharedFF))
	}
}

// deltaProj writes qwen35's DeltaNet projections.
func (g *synthGen) deltaProj(p string) {
	o := g.o
	g.mat(p+"attn_qkv.weight", (2*o.SSMKHeads+o.SSMVHeads)*o.SSMDim, o.Dim)
	g.mat(p+"attn_gate.weight", o.SSMVHeads*o.SSMDim, o.Dim)
	g.mat(p+"ssm_beta.weight", o.SSMVHeads, o.Dim)
	g.mat(p+"ssm_alpha.weight", o.SSMVHeads, o.Dim)
}

// deltaNet writes a DeltaNet mixer's convolution, gates, norm and output.
// The decay rates A = −e^x, x uniform in [−3, 0] (the released models'
// A_log spans about that), make some heads remember and some forget.
func (g *synthGen) deltaNet(p string) {
	o := g.o
	g.vec(p+"ssm_conv1d.weight", 0, 0.5, 4, (2*o.SSMKHeads+o.SSMVHeads)*o.SSMDim)
	g.vec(p+"ssm_dt.bias", 1, 0.5, o.SSMVHeads)
	g.add(p+"ssm_a", quant.F32, []int{o.SSMVHeads}, func(r *rand.Rand, a []float32) {
		for i := range a {
			a[i] = -float32(math.Exp(-3 * r.Float64()))
		}
	})
	g.vec(p+"ssm_norm.weight", 1, 0.1, o.SSMDim)
	g.mat(p+"ssm_out.weight", o.Dim, o.SSMVHeads*o.SSMDim)
}

// gatedAttention writes a gated full-attention layer: each head's query
// rows, then its gate rows.
func (g *synthGen) gatedAttention(p string) {
	o := g.o
	q, kv := o.Heads*o.HeadDim, o.KVHeads*o.HeadDim
	g.mat(p+"attn_q.weight", 2*q, o.Dim)
	g.mat(p+"attn_k.weight", kv, o.Dim)
	g.mat(p+"attn_v.weight", kv, o.Dim)
	g.qkNorm(p)
	g.mat(p+"attn_output.weight", o.Dim, q)
}

// gatedExperts writes routed experts and a gated shared expert.
func (g *synthGen) gatedExperts(p string) {
	o := g.o
	g.router(p+"ffn_gate_inp.weight", o.Experts, o.Dim)
	g.experts(p)
	g.vec(p+"ffn_gate_inp_shexp.weight", 0, 1/math.Sqrt(float64(o.Dim)), o.Dim)
	g.mlp(p, "_shexp", o.SharedFF)
}
