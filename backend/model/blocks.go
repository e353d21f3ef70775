package model

import (
	"jspark/kernels"
)

// step is one forward step in flight: the batch's activations on the
// device (device.go), the layer being run and its KV pool. The shared
// blocks are its methods; an architecture's forward calls them in the
// order of its paper. Activations: x (n, dim) is the residual stream, h
// (n, dim) the normed input of a sub-block or its output, q, k, v and
// attn the attention's.
type step struct {
	m            *Model
	k            kernels.Kernels
	d            *device
	c            *Config
	n            int
	layer        int
	keys, values []*kernels.Buffer
	states       []*kernels.Buffer // recurrent layers' (StateStore), nil for others
	chunk        int               // the recurrent layers' chunk: the store's block size
	group        []int             // each layer's KV group (KVLayout)
}

// norm sets h = rms(x)·w.
func (s *step) norm(w *Vec) {
	s.k.RMSNorm(s.d.h, s.d.x, w.Buf, s.n, s.c.Dim, s.c.RMSEps)
}

// attention is the projections of one self-attention layer.
type attention struct {
	Q   *kernels.Matrix `gguf:"attn_q" shape:"q dim"`      // (heads*head_dim, dim)
	K   *kernels.Matrix `gguf:"attn_k" shape:"kv dim"`     // (kv_heads*head_dim, dim)
	V   *kernels.Matrix `gguf:"attn_v" shape:"kv dim"`     // (kv_heads*head_dim, dim)
	O   *kernels.Matrix `gguf:"attn_output" shape:"dim q"` // (dim, heads*head_dim)
	qkv *kernels.Matrix // Q, K, V stacked; nil where they cannot be
}

func (a *attention) setup(d *device) []*kernels.Matrix {
	if fuse && a.Q.Rows%a.K.Rows == 0 && a.K.Rows == a.V.Rows {
		a.qkv = stack(a.Q.Name+"+k+v", a.Q, a.K, a.V)
	}
	if a.qkv == nil {
		return nil
	}
	d.fusedQKV = true
	return []*kernels.Matrix{a.Q, a.K, a.V}
}

// qkvBias is the biases of the projections (qwen2, glm4moe, gpt-oss).
type qkvBias struct {
	Q *Vec `gguf:"attn_q.bias" shape:"q"`  // (heads*head_dim)
	K *Vec `gguf:"attn_k.bias" shape:"kv"` // (kv_heads*head_dim)
	V *Vec `gguf:"attn_v.bias" shape:"kv"` // (kv_heads*head_dim)
}

// qkNorm is the RMSNorm gains of each head of q and of k (qwen3).
type qkNorm struct {
	Q *Vec `gguf:"attn_q_norm" shape:"head_dim"` // (head_dim)
	K *Vec `gguf:"attn_k_norm" shape:"head_dim"` // (head_dim)
}

// project sets q, k, v = Wq·h, Wk·h, Wv·h, as one stacked product where it
// can.
func (s *step) project(a *attention) {
	k, d, n := s.k, s.d, s.n
	qDim, kvDim := s.c.Heads*s.c.HeadDim, s.c.KVDim()
	if a.qkv != nil {
		k.MatMul(d.qkv, d.h, n, a.qkv)
		k.Gather(d.q, d.qkv, d.qRows, n*qDim/kvDim, kvDim)
		k.Gather(d.k, d.qkv, d.kRows, n, kvDim)
		k.Gather(d.v, d.qkv, d.vRows, n, kvDim)
		return
	}
	k.MatMul(d.q, d.h, n, a.Q)
	k.MatMul(d.k, d.h, n, a.K)
	k.MatMul(d.v, d.h, n, a.V)
}

// bias adds b to q, k and v.
func (s *step) bias(b *qkvBias) {
	qDim, kvDim := s.c.Heads*s.c.HeadDim, s.c.KVDim()
	s.k.AddBias(s.d.q, b.Q.Buf, s.n, qDim)
	s.k.AddBias(s.d.k, b.K.Buf, s.n, kvDim)
	s.k.AddBias(s.d.v, b.V.Buf, s.n, kvDim)
}

// headNorm normalises each head of q and of k: rms(head)·gain.
func (s *step) headNorm(g *qkNorm) {
	s.k.RMSNorm(s.d.q, s.d.q, g.Q.Buf, s.n*s.c.Heads, s.c.HeadDim, s.c.RMSEps)
	s.k.RMSNorm(s.d.k, s.d.k, g.K.Buf, s.n*s.c.KVHeads, s.c.HeadDim, s.c.RMSEps)
}

// rope rotates q and k by their tokens' positions.
func (s *step) rope(r kernels.Rope) {
	s.k.RoPE(s.d.q, s.d.pos, s.n, s.c.Heads, s.c.HeadDim, r)
	s.k.RoPE(s.d.k, s.d.pos, s.n, s.c.KVHeads, s.c.HeadDim, r)
}

// attend stores k and v in the layer's KV pool, through its KV group's
// block table, and sets attn to causal attention of q over each token's
// sequence: over its last window positions when window > 0, with per-head
// sink logits when sinks is not nil.
func (s *step) attend(window int, sinks *Vec) {
	k, d := s.k, s.d
	kvDim := s.c.KVDim()
	slots, a := d.slots, &d.att
	if g := s.group[s.layer]; g > 0 {
		slots, a = d.groups[g-1].slots, &d.groups[g-1].att
	}
	k.Scatter(s.keys[s.layer], d.k, slots, s.n, kvDim)
	k.Scatter(s.values[s.layer], d.v, slots, s.n, kvDim)
	a.K, a.V = s.keys[s.layer], s.values[s.layer]
	a.Window, a.Sinks = window, nil
	if sinks != nil {
		a.Sinks = sinks.Buf
	}
	k.Attend(a)
}

// output adds the attention's projection to the residual: x += Wo·attn
// (+ bias).
func (s *step) output(o *kernels.Matrix, bias *Vec) {
	s.k.MatMul(s.d.h, s.d.attn, s.n, o)
	if bias != nil {
		s.k.AddBias(s.d.h, bias.Buf, s.n, s.c.Dim)
	}
	s.k.Add(s.d.x, s.d.h, s.n*s.c.Dim)
}

// mlp is a dense SwiGLU feed-forward block.
type mlp struct {
	Gate   *kernels.Matrix `gguf:"ffn_gate" shape:"ff dim"` // (ff, dim)
	Up     *kernels.Matrix `gguf:"ffn_up" shape:"ff dim"`   // (ff, dim)
	Down   *kernels.Matrix `gguf:"ffn_down" shape:"dim ff"` // (dim, ff)
	gateUp *kernels.Matrix // Gate, Up stacked; nil where they cannot be
}

// sharedExpert is the expert every token of a MoE layer runs (glm4moe):
// an mlp of its own tensors, expert_ff × shared experts wide.
type sharedExpert struct {
	Gate   *kernels.Matrix `gguf:"ffn_gate_shexp" shape:"shared_ff dim"` // (shared_ff, dim)
	Up     *kernels.Matrix `gguf:"ffn_up_shexp" shape:"shared_ff dim"`   // (shared_ff, dim)
	Down   *kernels.Matrix `gguf:"ffn_down_shexp" shape:"dim shared_ff"` // (dim, shared_ff)
	gateUp *kernels.Matrix
}

func (m *mlp) setup(d *device) []*kernels.Matrix {
	d.ff = max(d.ff, m.Gate.Rows)
	if fuse && m.Gate.Rows == m.Up.Rows {
		m.gateUp = stack(m.Gate.Name+"+up", m.Gate, m.Up)
	}
	if m.gateUp == nil {
		return nil
	}
	d.fusedGLU[m.Gate.Rows] = true
	return []*kernels.Matrix{m.Gate, m.Up}
}

func (m *sharedExpert) setup(d *device) []*kernels.Matrix { return (*mlp)(m).setup(d) }

// mlp adds the MLP of h to the residual: x += Down·(silu(Gate·h) ⊙ Up·h).
func (s *step) mlp(m *mlp) {
	s.ffn(m, siluGLU)
	s.k.Add(s.d.x, s.d.h, s.n*s.c.Dim)
}

// ffn sets h = Down·(act(Gate·h) ⊙ Up·h), act silu or gelu.
func (s *step) ffn(m *mlp, act glu) {
	k, d, n := s.k, s.d, s.n
	ff := m.Gate.Rows
	if m.gateUp != nil {
		r := d.gluRows[ff]
		k.MatMul(d.gateUp, d.h, n, m.gateUp)
		k.Gather(d.gate, d.gateUp, r[0], n, ff)
		k.Gather(d.up, d.gateUp, r[1], n, ff)
	} else {
		k.MatMul(d.gate, d.h, n, m.Gate)
		k.MatMul(d.up, d.h, n, m.Up)
	}
	if act == geluGLU {
		k.GELUMul(d.gate, d.up, n*ff)
	} else {
		k.SiLUMul(d.gate, d.up, n*ff)
	}
	k.MatMul(d.h, d.gate, n, m.Down)
}
