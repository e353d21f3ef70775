package model

import "jspark/kernels"

// The shared blocks of the hybrid recurrent families (qwen35, qwen35moe,
// qwen3next): the Gated DeltaNet mixer in its two projection layouts, the
// gated full attention, and the shared expert behind a sigmoid gate.

// deltaNet is a Gated DeltaNet mixer's weights past its projections.
type deltaNet struct {
	Conv *Vec            `gguf:"ssm_conv1d" shape:"conv conv_k"` // (conv, conv_k) the short convolution's taps, oldest first
	DT   *Vec            `gguf:"ssm_dt.bias" shape:"v_heads"`    // (v_heads) added to alpha before the softplus
	A    *Vec            `gguf:"ssm_a,raw" shape:"v_heads"`      // (v_heads) −exp(A_log): each head's decay rate
	Norm *Vec            `gguf:"ssm_norm" shape:"ssm_d"`         // (ssm_d) the output's RMSNorm gain, every head
	Out  *kernels.Matrix `gguf:"ssm_out" shape:"dim value"`      // (dim, value)
}

func (*deltaNet) setup(d *device) []*kernels.Matrix {
	d.hyb.delta = true
	return nil
}

// deltaProj is qwen35's projections, each its own product.
type deltaProj struct {
	QKV   *kernels.Matrix `gguf:"attn_qkv" shape:"conv dim"`     // (conv, dim) queries, keys (k_heads each), values
	Z     *kernels.Matrix `gguf:"attn_gate" shape:"value dim"`   // (value, dim) the output gate
	Beta  *kernels.Matrix `gguf:"ssm_beta" shape:"v_heads dim"`  // (v_heads, dim)
	Alpha *kernels.Matrix `gguf:"ssm_alpha" shape:"v_heads dim"` // (v_heads, dim)
}

// deltaFused is qwen3next's: one product for q, k, v and z grouped by key
// head, and one for beta and alpha (hybridBufs.fusedRows says how).
type deltaFused struct {
	In *kernels.Matrix `gguf:"ssm_in" shape:"qkvz dim"` // (qkvz, dim)
	BA *kernels.Matrix `gguf:"ssm_ba" shape:"ba dim"`   // (2·v_heads, dim)
}

func (*deltaFused) setup(d *device) []*kernels.Matrix {
	d.hyb.fused = true
	return nil
}

// project sets the mixer's inputs from h: qkv, z, beta and alpha.
func (p *deltaProj) project(s *step) {
	k, d, hb, n := s.k, s.d, &s.d.hyb, s.n
	k.MatMul(hb.qkv, d.h, n, p.QKV)
	k.MatMul(hb.z, d.h, n, p.Z)
	k.MatMul(hb.beta, d.h, n, p.Beta)
	k.MatMul(hb.alpha, d.h, n, p.Alpha)
}

func (p *deltaFused) project(s *step) {
	k, d, hb, n, c := s.k, s.d, &s.d.hyb, s.n, s.c
	k.MatMul(hb.mixed, d.h, n, p.In)
	k.Gather(hb.qkv, hb.mixed, hb.qkvRows, n*(2*c.SSMKHeads+c.SSMVHeads), c.SSMDim)
	k.Gather(hb.z, hb.mixed, hb.zRows, n*c.SSMVHeads, c.SSMDim)
	r := c.SSMVHeads / c.SSMKHeads
	k.MatMul(hb.ba, d.h, n, p.BA)
	k.Gather(hb.beta, hb.ba, hb.bRows, n*c.SSMKHeads, r)
	k.Gather(hb.alpha, hb.ba, hb.aRows, n*c.SSMKHeads, r)
}

// delta runs the mixer over the projected inputs and adds its output to
// the residual:
//
//	q, k, v = silu(conv(qkv));  o = delta rule (kernels.DeltaNet)
//	x += Out·(rms(o)·Norm ⊙ silu(z))   (per value head)
//
// tiled says which key head a value head reads (kernels.DeltaNet).
func (s *step) delta(w *deltaNet, tiled bool) {
	k, d, hb, n, c := s.k, s.d, &s.d.hyb, s.n, s.c
	state := s.states[s.layer]
	stride := c.States[s.layer].StateFloats
	hb.cv = kernels.Conv{Out: hb.conv, X: hb.qkv, W: w.Conv.Buf, State: state, StateStride: stride,
		Runs: &hb.runs, Channels: c.convDim(), Width: c.ConvKernel, N: n}
	k.Conv(&hb.cv)
	hb.dn = kernels.DeltaNet{Out: hb.o, X: hb.conv, Alpha: hb.alpha, Beta: hb.beta, DT: w.DT.Buf, A: w.A.Buf,
		State: state, StateStride: stride, StateOff: (c.ConvKernel - 1) * c.convDim(), Runs: &hb.runs,
		KHeads: c.SSMKHeads, VHeads: c.SSMVHeads, Dim: c.SSMDim, Tiled: tiled, Chunk: s.chunk, Eps: c.RMSEps, N: n}
	k.DeltaNet(&hb.dn)
	v := c.SSMVHeads * c.SSMDim
	k.RMSNorm(hb.o, hb.o, w.Norm.Buf, n*c.SSMVHeads, c.SSMDim, c.RMSEps)
	k.SiLUMul(hb.z, hb.o, n*v)
	k.MatMul(d.h, hb.z, n, w.Out)
	k.Add(d.x, d.h, n*c.Dim)
}

// gatedAttention is full attention whose output each head gates by a
// sigmoid of its own projection, with QK-norm (qwen35, qwen3next).
type gatedAttention struct {
	Q      *kernels.Matrix `gguf:"attn_q" shape:"q2 dim"`     // (heads·2·head_dim, dim): each head's query, then its gate
	K      *kernels.Matrix `gguf:"attn_k" shape:"kv dim"`     // (kv_heads·head_dim, dim)
	V      *kernels.Matrix `gguf:"attn_v" shape:"kv dim"`     // (kv_heads·head_dim, dim)
	O      *kernels.Matrix `gguf:"attn_output" shape:"dim q"` // (dim, heads·head_dim)
	QKNorm qkNorm
}

func (*gatedAttention) setup(d *device) []*kernels.Matrix {
	d.hyb.gatedAttn = true
	return nil
}

// gatedAttend adds the gated attention of h to the residual:
// x += O·(attn(q, k, v) ⊙ sigmoid(gate)).
func (s *step) gatedAttend(a *gatedAttention, r kernels.Rope) {
	k, d, hb, n, c := s.k, s.d, &s.d.hyb, s.n, s.c
	k.MatMul(hb.qg, d.h, n, a.Q)
	k.Gather(d.q, hb.qg, hb.qRows, n*c.Heads, c.HeadDim)
	k.Gather(hb.gate, hb.qg, hb.gRows, n*c.Heads, c.HeadDim)
	k.MatMul(d.k, d.h, n, a.K)
	k.MatMul(d.v, d.h, n, a.V)
	s.headNorm(&a.QKNorm)
	s.rope(r)
	s.attend(0, nil)
	k.SigmoidMul(d.attn, hb.gate, n*c.Heads*c.HeadDim, 1)
	s.output(a.O, nil)
}

// gatedShared is a shared expert whose output a sigmoid of its own router
// row scales, per token (qwen35moe, qwen3next).
type gatedShared struct {
	Gate   *kernels.Matrix `gguf:"ffn_gate_inp_shexp" shape:"dim"` // (1, dim)
	Expert sharedExpert
}

func (*gatedShared) setup(d *device) []*kernels.Matrix {
	d.hyb.sharedGate = true
	return nil
}

// gatedShared adds the gated shared expert of h to the residual:
// x += sigmoid(Gate·h) · MLP(h). It overwrites h.
func (s *step) gatedShared(g *gatedShared) {
	k, d, n := s.k, s.d, s.n
	k.MatMul(d.hyb.shGate, d.h, n, g.Gate)
	s.ffn((*mlp)(&g.Expert), siluGLU)
	k.SigmoidMul(d.h, d.hyb.shGate, n*s.c.Dim, s.c.Dim)
	k.Add(d.x, d.h, n*s.c.Dim)
}
