package model

import (
	"fmt"
	"math"
)

// The float64 reference of the hybrid families (gemma3, qwen35, qwen35moe,
// qwen3next), as naive_test.go's of the others: one sequence, every weight
// dequantized, plain loops, the delta rule one token at a time as its
// paper writes it, independently of blocks.go, delta.go and the kernels.

func f64s(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// naiveAttention is causal attention of each position over the earlier
// ones (its window when window > 0), softmax scaled by scale.
func naiveAttention(c Config, qs, ks, vs [][]float64, window int, scale float64) [][]float64 {
	out := make([][]float64, len(qs))
	for i := range qs {
		lo := 0
		if window > 0 {
			lo = max(0, i-window+1)
		}
		out[i] = make([]float64, c.Heads*c.HeadDim)
		for h := 0; h < c.Heads; h++ {
			kvh := h / (c.Heads / c.KVHeads)
			var sc []float64
			for p := lo; p <= i; p++ {
				var s float64
				for d := 0; d < c.HeadDim; d++ {
					s += qs[i][h*c.HeadDim+d] * ks[p][kvh*c.HeadDim+d]
				}
				sc = append(sc, s*scale)
			}
			w := softmax64(sc)
			for p := lo; p <= i; p++ {
				for d := 0; d < c.HeadDim; d++ {
					out[i][h*c.HeadDim+d] += w[p-lo] * vs[p][kvh*c.HeadDim+d]
				}
			}
		}
	}
	return out
}

// headsNorm RMS-normalises each head of x by the gain g.
func headsNorm(x []float64, heads, hd int, g []float32, eps float32) {
	for h := 0; h < heads; h++ {
		copy(x[h*hd:], rmsNorm(x[h*hd:(h+1)*hd], g, eps))
	}
}

func gelu64(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

// naiveGemma3 is gemma3 (gemma3.go's doc) over one sequence.
func naiveGemma3(m *Model, ids []int) [][]float64 {
	c := m.Config
	emb := deq(m.TokenEmbd)
	xs := make([][]float64, len(ids))
	for i, id := range ids {
		xs[i] = make([]float64, c.Dim)
		for j, v := range emb[id] {
			xs[i][j] = v * math.Sqrt(float64(c.Dim))
		}
	}
	for li, b := range m.Blocks {
		l := b.(*gemma3Layer)
		window, rc := 0, c
		if (li+1)%6 != 0 {
			window, rc.RopeBase, rc.RopeScaling = c.SlidingWindow, c.RopeLocalBase, ""
		}
		wq, wk, wv, wo := deq(l.Attn.Q), deq(l.Attn.K), deq(l.Attn.V), deq(l.Attn.O)
		qs, ks, vs := make([][]float64, len(ids)), make([][]float64, len(ids)), make([][]float64, len(ids))
		for i := range ids {
			h := rmsNorm(xs[i], l.AttnNorm.Data, c.RMSEps)
			qs[i], ks[i], vs[i] = mul(wq, h), mul(wk, h), mul(wv, h)
			headsNorm(qs[i], c.Heads, c.HeadDim, l.QKNorm.Q.Data, c.RMSEps)
			headsNorm(ks[i], c.KVHeads, c.HeadDim, l.QKNorm.K.Data, c.RMSEps)
			naiveRope(rc, qs[i], i)
			naiveRope(rc, ks[i], i)
		}
		attn := naiveAttention(c, qs, ks, vs, window, 1/math.Sqrt(float64(c.HeadDim)))
		wg, wu, wd := deq(l.MLP.Gate), deq(l.MLP.Up), deq(l.MLP.Down)
		for i := range ids {
			o := rmsNorm(mul(wo, attn[i]), l.AttnPost.Data, c.RMSEps)
			for j := range xs[i] {
				xs[i][j] += o[j]
			}
			h := rmsNorm(xs[i], l.FFNNorm.Data, c.RMSEps)
			g, u := mul(wg, h), mul(wu, h)
			for j := range g {
				g[j] = gelu64(g[j]) * u[j]
			}
			y := rmsNorm(mul(wd, g), l.FFNPost.Data, c.RMSEps)
			for j := range xs[i] {
				xs[i][j] += y[j]
			}
		}
	}
	return naiveOutput(m, xs)
}

func naiveOutput(m *Model, xs [][]float64) [][]float64 {
	out := deq(m.Output)
	logits := make([][]float64, len(xs))
	for i := range xs {
		logits[i] = mul(out, rmsNorm(xs[i], m.OutputNorm.Data, m.RMSEps))
	}
	return logits
}

// naiveDeltaInputs are a DeltaNet layer's projections of each token: q, k
// and v before the convolution (concatenated), z, beta and alpha.
type naiveDeltaInputs struct{ qkv, z, beta, alpha [][]float64 }

// naiveDelta is a Gated DeltaNet mixer over one sequence: the causal
// convolution (zeros before the first token) and SiLU, L2-normed q and k,
// then per value head S ← a·S(I − b·k kᵀ) + b·v kᵀ, o = Sᵀq/√d, and the
// gated RMSNorm; it returns Out·o of each token.
func naiveDelta(c Config, w *deltaNet, in naiveDeltaInputs, tiled bool) [][]float64 {
	n, D, K := len(in.qkv), c.SSMDim, c.ConvKernel
	cw := w.Conv.Data // (conv, K)
	conv := make([][]float64, n)
	for t := range conv {
		conv[t] = make([]float64, c.convDim())
		for ch := range conv[t] {
			var s float64
			for j := 0; j < K; j++ {
				if u := t - K + 1 + j; u >= 0 {
					s += float64(cw[ch*K+j]) * in.qkv[u][ch]
				}
			}
			conv[t][ch] = s * sigmoid(s)
		}
	}
	l2 := func(x []float64, scale float64) []float64 {
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		inv := scale / math.Max(math.Sqrt(ss), float64(c.RMSEps))
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = v * inv
		}
		return out
	}
	wout := deq(w.Out)
	out := make([][]float64, n)
	os := make([][]float64, n)
	for t := range os {
		os[t] = make([]float64, c.SSMVHeads*D)
	}
	for h := 0; h < c.SSMVHeads; h++ {
		kh := h / (c.SSMVHeads / c.SSMKHeads)
		if tiled {
			kh = h % c.SSMKHeads
		}
		S := make([][]float64, D) // [key][value]
		for i := range S {
			S[i] = make([]float64, D)
		}
		for t := 0; t < n; t++ {
			q := l2(conv[t][kh*D:(kh+1)*D], 1/math.Sqrt(float64(D)))
			k := l2(conv[t][(c.SSMKHeads+kh)*D:(c.SSMKHeads+kh+1)*D], 1)
			v := conv[t][(2*c.SSMKHeads+h)*D : (2*c.SSMKHeads+h+1)*D]
			x := in.alpha[t][h] + float64(w.DT.Data[h])
			a := math.Exp(float64(w.A.Data[h]) * math.Log1p(math.Exp(x)))
			b := sigmoid(in.beta[t][h])
			// S ← a·S(I − b·k kᵀ) + b·v kᵀ, with S as [key][value]: the
			// transpose, S ← a(I − b·k kᵀ)S + b·k vᵀ.
			kS := make([]float64, D) // kᵀS
			for i := range S {
				for j := range S[i] {
					kS[j] += k[i] * S[i][j]
				}
			}
			for i := range S {
				for j := range S[i] {
					S[i][j] = a*(S[i][j]-b*k[i]*kS[j]) + b*k[i]*v[j]
				}
			}
			for j := 0; j < D; j++ {
				for i := 0; i < D; i++ {
					os[t][h*D+j] += q[i] * S[i][j]
				}
			}
		}
	}
	for t := range out {
		g := make([]float64, len(os[t]))
		for h := 0; h < c.SSMVHeads; h++ {
			normed := rmsNorm(os[t][h*D:(h+1)*D], w.Norm.Data, c.RMSEps)
			for j, v := range normed {
				z := in.z[t][h*D+j]
				g[h*D+j] = v * z * sigmoid(z)
			}
		}
		out[t] = mul(wout, g)
	}
	return out
}

// naiveGatedAttention is the gated full attention: Q's rows give each head
// its query then its gate; QK-norm, RoPE, attention, the sigmoid gate.
func naiveGatedAttention(c Config, a *gatedAttention, hs [][]float64) [][]float64 {
	wq, wk, wv, wo := deq(a.Q), deq(a.K), deq(a.V), deq(a.O)
	hd := c.HeadDim
	qs, ks, vs, gates := make([][]float64, len(hs)), make([][]float64, len(hs)), make([][]float64, len(hs)), make([][]float64, len(hs))
	for i, h := range hs {
		qg := mul(wq, h)
		for head := 0; head < c.Heads; head++ {
			qs[i] = append(qs[i], qg[2*head*hd:(2*head+1)*hd]...)
			gates[i] = append(gates[i], qg[(2*head+1)*hd:(2*head+2)*hd]...)
		}
		ks[i], vs[i] = mul(wk, h), mul(wv, h)
		headsNorm(qs[i], c.Heads, hd, a.QKNorm.Q.Data, c.RMSEps)
		headsNorm(ks[i], c.KVHeads, hd, a.QKNorm.K.Data, c.RMSEps)
		naiveRope(c, qs[i], i)
		naiveRope(c, ks[i], i)
	}
	attn := naiveAttention(c, qs, ks, vs, 0, 1/math.Sqrt(float64(hd)))
	out := make([][]float64, len(hs))
	for i := range attn {
		for j := range attn[i] {
			attn[i][j] *= sigmoid(gates[i][j])
		}
		out[i] = mul(wo, attn[i])
	}
	return out
}

// naiveDeltaNet is qwen35, qwen35moe or qwen3next over one sequence, each
// MoE layer's experts taken from forced where it is not nil.
func naiveDeltaNet(m *Model, ids []int, forced map[int][]int32) [][]float64 {
	c := m.Config
	emb := deq(m.TokenEmbd)
	xs := make([][]float64, len(ids))
	for i, id := range ids {
		xs[i] = append([]float64(nil), emb[id]...)
	}
	for li, b := range m.Blocks {
		var attnNorm, postNorm []float32
		var ffn func(i int, h []float64) []float64
		var mix func(hs [][]float64) [][]float64
		proj := func(p *deltaProj, hs [][]float64) naiveDeltaInputs {
			var in naiveDeltaInputs
			wqkv, wz, wb, wa := deq(p.QKV), deq(p.Z), deq(p.Beta), deq(p.Alpha)
			for _, h := range hs {
				in.qkv, in.z = append(in.qkv, mul(wqkv, h)), append(in.z, mul(wz, h))
				in.beta, in.alpha = append(in.beta, mul(wb, h)), append(in.alpha, mul(wa, h))
			}
			return in
		}
		moeFFN := func(l *qwen35moeLayer) func(i int, h []float64) []float64 {
			router, eg, eu, ed := deq(l.MoE.Router), deqExperts(l.MoE.Gate), deqExperts(l.MoE.Up), deqExperts(l.MoE.Down)
			sg, su, sd, sw := deq(l.Shared.Expert.Gate), deq(l.Shared.Expert.Up), deq(l.Shared.Expert.Down), deq(l.Shared.Gate)
			nl := naiveLayer{routing: "softmax"}
			return func(i int, h []float64) []float64 {
				chosen, w := naiveRoute(&nl, c, mul(router, h), forcedIDs(forced, li, i, c.ExpertsUsed))
				out := make([]float64, c.Dim)
				for j, e := range chosen {
					g, u := mul(eg[e], h), mul(eu[e], h)
					naiveGLU(g, u, false)
					for d, v := range mul(ed[e], g) {
						out[d] += w[j] * v
					}
				}
				g, u := mul(sg, h), mul(su, h)
				naiveGLU(g, u, false)
				gate := sigmoid(mul(sw, h)[0])
				for d, v := range mul(sd, g) {
					out[d] += gate * v
				}
				return out
			}
		}
		denseFFN := func(mm *mlp) func(int, []float64) []float64 {
			wg, wu, wd := deq(mm.Gate), deq(mm.Up), deq(mm.Down)
			return func(_ int, h []float64) []float64 {
				g, u := mul(wg, h), mul(wu, h)
				naiveGLU(g, u, false)
				return mul(wd, g)
			}
		}
		switch l := b.(type) {
		case *qwen35Linear:
			attnNorm, postNorm, ffn = l.AttnNorm.Data, l.PostNorm.Data, denseFFN(&l.MLP)
			mix = func(hs [][]float64) [][]float64 { return naiveDelta(c, &l.Delta, proj(&l.Proj, hs), true) }
		case *qwen35Full:
			attnNorm, postNorm, ffn = l.AttnNorm.Data, l.PostNorm.Data, denseFFN(&l.MLP)
			mix = func(hs [][]float64) [][]float64 { return naiveGatedAttention(c, &l.Attn, hs) }
		case *qwen35moeLinear:
			attnNorm, postNorm, ffn = l.AttnNorm.Data, l.PostNorm.Data, moeFFN(&l.qwen35moeLayer)
			mix = func(hs [][]float64) [][]float64 { return naiveDelta(c, &l.Delta, proj(&l.Proj, hs), true) }
		case *qwen35moeFull:
			attnNorm, postNorm, ffn = l.AttnNorm.Data, l.PostNorm.Data, moeFFN(&l.qwen35moeLayer)
			mix = func(hs [][]float64) [][]float64 { return naiveGatedAttention(c, &l.Attn, hs) }
		case *qwen3nextLinear:
			attnNorm, postNorm, ffn = l.AttnNorm.Data, l.PostNorm.Data, moeFFN(&l.qwen35moeLayer)
			mix = func(hs [][]float64) [][]float64 {
				return naiveDelta(c, &l.Delta, naiveFusedInputs(c, &l.Proj, hs), false)
			}
		default:
			panic(fmt.Sprintf("naive reference: no reading of %T", b))
		}
		hs := make([][]float64, len(ids))
		for i := range ids {
			hs[i] = rmsNorm(xs[i], attnNorm, c.RMSEps)
		}
		for i, o := range mix(hs) {
			for j := range xs[i] {
				xs[i][j] += o[j]
			}
			for j, v := range ffn(i, rmsNorm(xs[i], postNorm, c.RMSEps)) {
				xs[i][j] += v
			}
		}
	}
	return naiveOutput(m, xs)
}

// naiveFusedInputs splits qwen3next's fused products: ssm_in's rows are,
// for each key head g, its query, its key, then the values and the z of
// its value heads g·r … g·r+r-1; ssm_ba's the r betas then the r alphas.
func naiveFusedInputs(c Config, p *deltaFused, hs [][]float64) naiveDeltaInputs {
	win, wba := deq(p.In), deq(p.BA)
	D, hk, r := c.SSMDim, c.SSMKHeads, c.SSMVHeads/c.SSMKHeads
	var in naiveDeltaInputs
	for _, h := range hs {
		mixed, ba := mul(win, h), mul(wba, h)
		var q, k, v, z, beta, alpha []float64
		for g := 0; g < hk; g++ {
			grp := mixed[g*(2+2*r)*D:]
			q, k = append(q, grp[:D]...), append(k, grp[D:2*D]...)
			v, z = append(v, grp[2*D:(2+r)*D]...), append(z, grp[(2+r)*D:(2+2*r)*D]...)
			beta, alpha = append(beta, ba[2*r*g:2*r*g+r]...), append(alpha, ba[2*r*g+r:2*r*(g+1)]...)
		}
		in.qkv = append(in.qkv, append(append(q, k...), v...))
		in.z, in.beta, in.alpha = append(in.z, z), append(in.beta, beta), append(in.alpha, alpha)
	}
	return in
}
