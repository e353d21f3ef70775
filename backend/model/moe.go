package model

import (
	"math"

	"jspark/kernels"
	"jspark/kernels/quant"
)

// moe is a layer's routed experts: a router and each expert's SwiGLU,
// three 3-D tensors of which expert e is a slice.
type moe struct {
	Router *kernels.Matrix `gguf:"ffn_gate_inp" shape:"experts dim"`            // (experts, dim)
	Gate   *Experts        `gguf:"ffn_gate_exps" shape:"experts expert_ff dim"` // (experts, expert_ff, dim)
	Up     *Experts        `gguf:"ffn_up_exps" shape:"experts expert_ff dim"`   // (experts, expert_ff, dim)
	Down   *Experts        `gguf:"ffn_down_exps" shape:"experts dim expert_ff"` // (experts, dim, expert_ff)
}

// expertBias is the biases of the router and of every expert's products
// (gpt-oss).
type expertBias struct {
	Router *Vec `gguf:"ffn_gate_inp.bias" shape:"experts"`            // (experts)
	Gate   *Vec `gguf:"ffn_gate_exps.bias" shape:"experts expert_ff"` // (experts, expert_ff)
	Up     *Vec `gguf:"ffn_up_exps.bias" shape:"experts expert_ff"`   // (experts, expert_ff)
	Down   *Vec `gguf:"ffn_down_exps.bias" shape:"experts dim"`       // (experts, dim)
}

func (*expertBias) setup(d *device) []*kernels.Matrix {
	d.expertBias = true
	return nil
}

// A router chooses a token's experts from its router logits (experts):
// ids, the k chosen, and the weight of each. It may overwrite logits.
type router interface {
	route(logits []float32, ids []int32, weights []float32)
}

// glu is the gate of the experts' SwiGLU.
type glu int

const (
	siluGLU glu = iota // silu(gate)·up
	oaiGLU             // gpt-oss's clamped form, alpha 1.702 and limit 7 as its release fixes them
	geluGLU            // gelu(gate)·up, gelu's tanh form (gemma3)
)

// moeBufs are the routed experts' step buffers: a step's (token, expert)
// pairs in rows grouped by expert, and the routing staged on the host.
type moeBufs struct {
	logits      *kernels.Buffer // F32 (tokens, experts)
	xs, ys      *kernels.Buffer // F32 (pairs, dim): each pair's input row, then its expert's output
	g, u, eb    *kernels.Buffer // F32 (pairs, expert_ff): the experts' gate and up; eb their gathered biases (gpt-oss)
	src, exp    *kernels.Buffer // I32 (pairs): the token and the expert of each grouped row
	dst         *kernels.Buffer // I32 (tokens, k): the grouped row of each token's j-th expert
	w           *kernels.Buffer // F32 (tokens, k): each token's expert weights
	hLogits, hW []float32
	hIDs        []int32
	hSrc, hDst  []int32
	hExp        []int32
	start, next []int // (experts+1): the first grouped row of each expert; a cursor
}

func (mb *moeBufs) reserve(alloc func(**kernels.Buffer, quant.Type, int), c Config, t int, bias bool) {
	pairs := t * c.ExpertsUsed
	alloc(&mb.logits, quant.F32, t*c.Experts)
	alloc(&mb.xs, quant.F32, pairs*c.Dim)
	alloc(&mb.ys, quant.F32, pairs*c.Dim)
	alloc(&mb.g, quant.F32, pairs*c.ExpertFF)
	alloc(&mb.u, quant.F32, pairs*c.ExpertFF)
	if bias {
		alloc(&mb.eb, quant.F32, pairs*c.ExpertFF)
	}
	for _, b := range []**kernels.Buffer{&mb.src, &mb.exp, &mb.dst} {
		alloc(b, quant.I32, pairs)
	}
	alloc(&mb.w, quant.F32, pairs)
	mb.hLogits = make([]float32, t*c.Experts)
	mb.hW, mb.hIDs = make([]float32, pairs), make([]int32, pairs)
	mb.hSrc, mb.hDst, mb.hExp = make([]int32, pairs), make([]int32, pairs), make([]int32, pairs)
	mb.start, mb.next = make([]int, c.Experts+1), make([]int, c.Experts)
}

// moe adds the routed experts of h to the residual:
//
//	x += Σ_{e chosen by r} w_e · Down_e·act(Gate_e·h + bg_e, Up_e·h + bu_e) + bd_e
//
// (biases b from bias when it is not nil). The router's logits come back
// to the host, which picks each token's experts and groups the step's
// (token, expert) pairs by expert; then each expert that has tokens runs
// one product over all of them (a prefill reads each expert once), and
// each token sums its experts' outputs in its own order of choice, so its
// bits do not depend on the batch.
func (s *step) moe(e *moe, bias *expertBias, r router, act glu) {
	k, d, n, c := s.k, s.d, s.n, s.c
	mb := &d.moe
	E, K, ff, dim := c.Experts, c.ExpertsUsed, c.ExpertFF, c.Dim
	k.MatMul(mb.logits, d.h, n, e.Router)
	if bias != nil {
		k.AddBias(mb.logits, bias.Router.Buf, n, E)
	}
	k.Read(kernels.F32Bytes(mb.hLogits[:n*E]), mb.logits, 0)
	mb.route(k, n, E, K, r)
	if s.m.onRoute != nil {
		s.m.onRoute(s.layer, mb.hIDs[:n*K])
	}
	pairs := n * K
	k.Gather(mb.xs, d.h, mb.src, pairs, dim)
	k.MatMulGroups(mb.g, mb.xs, e.Gate.M, mb.start)
	k.MatMulGroups(mb.u, mb.xs, e.Up.M, mb.start)
	if bias != nil {
		k.Gather(mb.eb, bias.Gate.Buf, mb.exp, pairs, ff)
		k.Add(mb.g, mb.eb, pairs*ff)
		k.Gather(mb.eb, bias.Up.Buf, mb.exp, pairs, ff)
		k.Add(mb.u, mb.eb, pairs*ff)
	}
	switch act {
	case siluGLU:
		k.SiLUMul(mb.g, mb.u, pairs*ff)
	case oaiGLU:
		k.SwiGLUOAI(mb.g, mb.u, pairs*ff, 1.702, 7)
	}
	k.MatMulGroups(mb.ys, mb.g, e.Down.M, mb.start)
	if bias != nil {
		k.Gather(mb.xs, bias.Down.Buf, mb.exp, pairs, dim)
		k.Add(mb.ys, mb.xs, pairs*dim)
	}
	k.WeightedSum(d.x, mb.ys, mb.dst, mb.w, n, K, dim)
}

// route picks every token's experts and groups the pairs by expert (in
// token order within an expert), then writes the grouping to the device.
func (mb *moeBufs) route(k kernels.Kernels, n, E, K int, r router) {
	count := mb.next[:E]
	clear(count)
	for t := 0; t < n; t++ {
		ids := mb.hIDs[t*K : (t+1)*K]
		r.route(mb.hLogits[t*E:(t+1)*E], ids, mb.hW[t*K:(t+1)*K])
		for _, e := range ids {
			count[e]++
		}
	}
	mb.start[0] = 0
	for e := 0; e < E; e++ {
		mb.start[e+1] = mb.start[e] + count[e]
	}
	next := count
	copy(next, mb.start[:E])
	for t := 0; t < n; t++ {
		for j, e := range mb.hIDs[t*K : (t+1)*K] {
			p := next[e]
			next[e]++
			mb.hSrc[p], mb.hExp[p], mb.hDst[t*K+j] = int32(t), e, int32(p)
		}
	}
	pairs := n * K
	k.Write(mb.src, 0, kernels.I32Bytes(mb.hSrc[:pairs]))
	k.Write(mb.exp, 0, kernels.I32Bytes(mb.hExp[:pairs]))
	k.Write(mb.dst, 0, kernels.I32Bytes(mb.hDst[:pairs]))
	k.Write(mb.w, 0, kernels.F32Bytes(mb.hW[:pairs]))
}

// topK sets ids to the indices of the len(ids) largest scores, largest
// first; of equal scores the lower index comes first.
func topK(scores []float32, ids []int32) {
	k := len(ids)
	for i := range ids {
		ids[i] = -1
	}
	for e, v := range scores {
		j := k
		for j > 0 && (ids[j-1] < 0 || v > scores[ids[j-1]]) {
			j--
		}
		if j == k {
			continue
		}
		copy(ids[j+1:], ids[j:k-1])
		ids[j] = int32(e)
	}
}

// softmax turns x into e^(x-max)/Σ in place, summed in float64.
func softmax(x []float32) {
	mx := x[0]
	for _, v := range x {
		mx = max(mx, v)
	}
	var sum float64
	for i, v := range x {
		e := math.Exp(float64(v - mx))
		x[i] = float32(e)
		sum += e
	}
	for i, v := range x {
		x[i] = float32(float64(v) / sum)
	}
}

// normalize divides w by its sum.
func normalize(w []float32) {
	var sum float64
	for _, v := range w {
		sum += float64(v)
	}
	for i := range w {
		w[i] = float32(float64(w[i]) / sum)
	}
}

func exp64(x float32) float64 { return math.Exp(float64(x)) }
