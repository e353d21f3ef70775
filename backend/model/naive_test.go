package model

import (
	"fmt"
	"math"
	"sort"

	"jspark/kernels"
	"jspark/kernels/quant"
)

// The float64 reference forward the tests hold the model to: one sequence,
// every weight dequantized, plain loops, attention over the whole prefix
// (or its window), RoPE by pow, routing decided in float64. It reads each
// architecture's weights from its own layer type (naiveLayerOf) and states
// each architecture's block again (naiveLogits), independently of
// blocks.go and moe.go.

// naiveLayer is one layer's weights as the reference reads them.
type naiveLayer struct {
	attnNorm, ffnNorm  []float32
	q, k, v, o         [][]float64
	qb, kb, vb, ob     []float32
	qn, kn             []float32
	sinks              []float32
	window             int
	gate, up, down     [][]float64 // dense MLP
	router             [][]float64
	routerB            []float32
	eg, eu, ed         [][][]float64 // (experts, rows, cols)
	egB, euB, edB      []float32     // (experts, width) flattened
	probsB             []float32     // glm4moe's selection bias
	sGate, sUp, sDown  [][]float64   // shared expert
	routing            string        // "softmax", "sigmoid" or "oai"
	gluOAI             bool
	hasMoE, hasDenseFF bool
}

func deq(w *kernels.Matrix) [][]float64 {
	out := make([][]float64, w.Rows)
	row := make([]float32, w.Cols)
	for r := range out {
		quant.Dequantize(w.Type, w.Row(r), row)
		out[r] = make([]float64, w.Cols)
		for i, v := range row {
			out[r][i] = float64(v)
		}
	}
	return out
}

func deqExperts(e *Experts) [][][]float64 {
	var out [][][]float64
	for _, w := range e.M {
		out = append(out, deq(w))
	}
	return out
}

func vals(v *Vec) []float32 {
	if v == nil {
		return nil
	}
	return v.Data
}

// naiveLayerOf reads a block's weights.
func naiveLayerOf(b block, c Config, i int) naiveLayer {
	var l naiveLayer
	attn := func(a *attention) { l.q, l.k, l.v, l.o = deq(a.Q), deq(a.K), deq(a.V), deq(a.O) }
	dense := func(m *mlp) { l.gate, l.up, l.down, l.hasDenseFF = deq(m.Gate), deq(m.Up), deq(m.Down), true }
	experts := func(e *moe) {
		l.router, l.eg, l.eu, l.ed, l.hasMoE = deq(e.Router), deqExperts(e.Gate), deqExperts(e.Up), deqExperts(e.Down), true
	}
	switch x := b.(type) {
	case *llamaLayer:
		l.attnNorm, l.ffnNorm = x.AttnNorm.Data, x.FFNNorm.Data
		attn(&x.Attn)
		dense(&x.MLP)
	case *qwen2Layer:
		l.attnNorm, l.ffnNorm = x.AttnNorm.Data, x.FFNNorm.Data
		attn(&x.Attn)
		l.qb, l.kb, l.vb = x.Bias.Q.Data, x.Bias.K.Data, x.Bias.V.Data
		dense(&x.MLP)
	case *qwen3Layer:
		l.attnNorm, l.ffnNorm = x.AttnNorm.Data, x.FFNNorm.Data
		attn(&x.Attn)
		l.qn, l.kn = x.QKNorm.Q.Data, x.QKNorm.K.Data
		dense(&x.MLP)
	case *qwen3moeLayer:
		l.attnNorm, l.ffnNorm = x.AttnNorm.Data, x.FFNNorm.Data
		attn(&x.Attn)
		l.qn, l.kn = x.QKNorm.Q.Data, x.QKNorm.K.Data
		experts(&x.MoE)
		l.routing = "softmax"
	case *glm4moeDense:
		l.attnNorm, l.ffnNorm = x.AttnNorm.Data, x.PostNorm.Data
		attn(&x.Attn)
		l.qb, l.kb, l.vb = x.Bias.Q.Data, x.Bias.K.Data, x.Bias.V.Data
		l.qn, l.kn = vals(x.QKNorm.Q), vals(x.QKNorm.K)
		dense(&x.MLP)
	case *glm4moeShared:
		l = naiveLayerOf(&x.glm4moeLayer, c, i)
		l.sGate, l.sUp, l.sDown = deq(x.Shared.Gate), deq(x.Shared.Up), deq(x.Shared.Down)
	case *glm4moeLayer:
		l.attnNorm, l.ffnNorm = x.AttnNorm.Data, x.PostNorm.Data
		attn(&x.Attn)
		l.qb, l.kb, l.vb = x.Bias.Q.Data, x.Bias.K.Data, x.Bias.V.Data
		l.qn, l.kn = vals(x.QKNorm.Q), vals(x.QKNorm.K)
		experts(&x.MoE)
		l.probsB, l.routing = x.ProbsBias.Data, "sigmoid"
	case *gptossLayer:
		l.attnNorm, l.ffnNorm = x.AttnNorm.Data, x.PostNorm.Data
		attn(&x.Attn)
		l.qb, l.kb, l.vb, l.ob = x.Bias.Q.Data, x.Bias.K.Data, x.Bias.V.Data, x.OBias.Data
		l.sinks = x.Sinks.Data
		if i%2 == 0 {
			l.window = c.SlidingWindow
		}
		experts(&x.MoE)
		l.routerB, l.egB, l.euB, l.edB = x.EBias.Router.Data, x.EBias.Gate.Data, x.EBias.Up.Data, x.EBias.Down.Data
		l.routing, l.gluOAI = "oai", true
	default:
		panic(fmt.Sprintf("naive reference: no reading of %T", b))
	}
	return l
}

func mul(w [][]float64, x []float64) []float64 {
	y := make([]float64, len(w))
	for r := range w {
		for i := range x {
			y[r] += w[r][i] * x[i]
		}
	}
	return y
}

func addTo(x []float64, b []float32) {
	for i := range b {
		x[i] += float64(b[i])
	}
}

func rmsNorm(x []float64, wt []float32, eps float32) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	s := 1 / math.Sqrt(ss/float64(len(x))+float64(eps))
	y := make([]float64, len(x))
	for i := range x {
		y[i] = x[i] * s * float64(wt[i])
	}
	return y
}

// naiveRope rotates each head of x at pos: the first RopeDim dims, by
// θ_i = pos·base^(-2i/d), YaRN-interpolated as its paper (and ggml) say.
func naiveRope(c Config, x []float64, pos int) {
	d := float64(c.RopeDim)
	mscale, fs := 1.0, 1.0
	var lo, hi float64
	if c.RopeScaling != "" {
		fs = 1 / float64(c.RopeFactor)
	}
	if c.RopeScaling == "yarn" {
		mscale = float64(c.RopeAttn) * (1 + 0.1*math.Log(float64(c.RopeFactor)))
		corr := func(beta float64) float64 {
			return d * math.Log(float64(c.RopeOrigCtx)/(beta*2*math.Pi)) / (2 * math.Log(float64(c.RopeBase)))
		}
		lo, hi = math.Max(0, math.Floor(corr(float64(c.YarnBetaFast)))), math.Min(d-1, math.Ceil(corr(float64(c.YarnBetaSlow))))
	}
	for h := 0; h < len(x)/c.HeadDim; h++ {
		head := x[h*c.HeadDim : (h+1)*c.HeadDim]
		for i := 0; i < c.RopeDim/2; i++ {
			extrap := float64(pos) * math.Pow(float64(c.RopeBase), -2*float64(i)/d)
			theta := fs * extrap
			if c.RopeScaling == "yarn" {
				mix := 1 - math.Min(1, math.Max(0, (float64(i)-lo)/math.Max(0.001, hi-lo)))
				theta = theta*(1-mix) + extrap*mix
			}
			a, b := 2*i, 2*i+1
			if c.RopeNeox {
				a, b = i, i+c.RopeDim/2
			}
			cs, sn := math.Cos(theta)*mscale, math.Sin(theta)*mscale
			x0, x1 := head[a], head[b]
			head[a] = x0*cs - x1*sn
			head[b] = x0*sn + x1*cs
		}
	}
}

func forcedIDs(forced map[int][]int32, layer, token, k int) []int {
	f, ok := forced[layer]
	if !ok {
		return nil
	}
	var ids []int
	for _, e := range f[token*k : (token+1)*k] {
		ids = append(ids, int(e))
	}
	return ids
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// naiveRoute picks a token's experts and their weights from its router
// logits, as each family's paper states its router.
func naiveRoute(l *naiveLayer, c Config, logits []float64, forced []int) ([]int, []float64) {
	k := c.ExpertsUsed
	order := func(score []float64) []int {
		if forced != nil {
			return forced
		}
		ids := make([]int, len(score))
		for i := range ids {
			ids[i] = i
		}
		sort.SliceStable(ids, func(a, b int) bool { return score[ids[a]] > score[ids[b]] })
		return ids[:k]
	}
	w := make([]float64, k)
	switch l.routing {
	case "softmax": // qwen3moe: softmax over all, top-k, renormalised
		p := softmax64(logits)
		ids := order(p)
		var sum float64
		for j, e := range ids {
			w[j] = p[e]
			sum += p[e]
		}
		for j := range w {
			w[j] /= sum
		}
		return ids, w
	case "sigmoid": // glm4moe: sigmoid, biased for the choice only, normalised, scaled
		p, sel := make([]float64, len(logits)), make([]float64, len(logits))
		for e, v := range logits {
			p[e] = sigmoid(v)
			sel[e] = p[e] + float64(l.probsB[e])
		}
		ids := order(sel)
		var sum float64
		for j, e := range ids {
			w[j] = p[e]
			sum += p[e]
		}
		for j := range w {
			if c.ExpertWeightsNorm {
				w[j] /= sum
			}
			w[j] *= float64(c.ExpertWeightsScale)
		}
		return ids, w
	default: // gpt-oss: top-k of the logits, softmax over those
		ids := order(logits)
		chosen := make([]float64, k)
		for j, e := range ids {
			chosen[j] = logits[e]
		}
		return ids, softmax64(chosen)
	}
}

func softmax64(x []float64) []float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = math.Max(mx, v)
	}
	out := make([]float64, len(x))
	var sum float64
	for i, v := range x {
		out[i] = math.Exp(v - mx)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// glu is silu(g)·u, or gpt-oss's clamped form.
func naiveGLU(g, u []float64, oai bool) {
	for j := range g {
		if oai {
			x, y := math.Min(g[j], 7), math.Max(math.Min(u[j], 7), -7)
			g[j] = x * sigmoid(1.702*x) * (y + 1)
		} else {
			g[j] = g[j] * sigmoid(g[j]) * u[j]
		}
	}
}

func naiveLogits(m *Model, ids []int) [][]float64 { return naiveForced(m, ids, nil) }

// naiveForced is naiveLogits with each MoE layer's choice of experts
// taken from forced (by layer, the token's k experts one after another)
// where it is not nil: a choice is discontinuous in the router's scores,
// so a device whose activations carry 8-bit error is held to the
// reference only along its own choices. The weights are still the
// reference's.
func naiveForced(m *Model, ids []int, forced map[int][]int32) [][]float64 {
	c := m.Config
	emb := deq(m.TokenEmbd)
	xs := make([][]float64, len(ids))
	for i, id := range ids {
		xs[i] = append([]float64(nil), emb[id]...)
	}
	for li, b := range m.Blocks {
		l := naiveLayerOf(b, c, li)
		qs, ks, vs := make([][]float64, len(ids)), make([][]float64, len(ids)), make([][]float64, len(ids))
		for i := range ids {
			h := rmsNorm(xs[i], l.attnNorm, c.RMSEps)
			qs[i], ks[i], vs[i] = mul(l.q, h), mul(l.k, h), mul(l.v, h)
			addTo(qs[i], l.qb)
			addTo(ks[i], l.kb)
			addTo(vs[i], l.vb)
			if l.qn != nil {
				for h := 0; h < c.Heads; h++ {
					copy(qs[i][h*c.HeadDim:], rmsNorm(qs[i][h*c.HeadDim:(h+1)*c.HeadDim], l.qn, c.RMSEps))
				}
				for h := 0; h < c.KVHeads; h++ {
					copy(ks[i][h*c.HeadDim:], rmsNorm(ks[i][h*c.HeadDim:(h+1)*c.HeadDim], l.kn, c.RMSEps))
				}
			}
			naiveRope(c, qs[i], i)
			naiveRope(c, ks[i], i)
		}
		for i := range ids {
			lo := 0
			if l.window > 0 {
				lo = max(0, i-l.window+1)
			}
			attn := make([]float64, c.Heads*c.HeadDim)
			for h := 0; h < c.Heads; h++ {
				kvh := h / (c.Heads / c.KVHeads)
				var sc []float64
				for p := lo; p <= i; p++ {
					var s float64
					for d := 0; d < c.HeadDim; d++ {
						s += qs[i][h*c.HeadDim+d] * ks[p][kvh*c.HeadDim+d]
					}
					sc = append(sc, s/math.Sqrt(float64(c.HeadDim)))
				}
				if l.sinks != nil {
					sc = append(sc, float64(l.sinks[h])) // joins the softmax, has no value
				}
				w := softmax64(sc)
				for p := lo; p <= i; p++ {
					for d := 0; d < c.HeadDim; d++ {
						attn[h*c.HeadDim+d] += w[p-lo] * vs[p][kvh*c.HeadDim+d]
					}
				}
			}
			o := mul(l.o, attn)
			addTo(o, l.ob)
			for j := range xs[i] {
				xs[i][j] += o[j]
			}
			h := rmsNorm(xs[i], l.ffnNorm, c.RMSEps)
			out := make([]float64, c.Dim)
			if l.hasDenseFF {
				g, u := mul(l.gate, h), mul(l.up, h)
				naiveGLU(g, u, false)
				out = mul(l.down, g)
			}
			if l.hasMoE {
				logits := mul(l.router, h)
				addTo(logits, l.routerB)
				chosen, w := naiveRoute(&l, c, logits, forcedIDs(forced, li, i, c.ExpertsUsed))
				for j, e := range chosen {
					g, u := mul(l.eg[e], h), mul(l.eu[e], h)
					if l.egB != nil {
						addTo(g, l.egB[e*c.ExpertFF:(e+1)*c.ExpertFF])
						addTo(u, l.euB[e*c.ExpertFF:(e+1)*c.ExpertFF])
					}
					naiveGLU(g, u, l.gluOAI)
					y := mul(l.ed[e], g)
					if l.edB != nil {
						addTo(y, l.edB[e*c.Dim:(e+1)*c.Dim])
					}
					for d := range out {
						out[d] += w[j] * y[d]
					}
				}
				if l.sGate != nil {
					g, u := mul(l.sGate, h), mul(l.sUp, h)
					naiveGLU(g, u, false)
					for d, v := range mul(l.sDown, g) {
						out[d] += v
					}
				}
			}
			for j := range xs[i] {
				xs[i][j] += out[j]
			}
		}
	}
	out := deq(m.Output)
	logits := make([][]float64, len(ids))
	for i := range ids {
		logits[i] = mul(out, rmsNorm(xs[i], m.OutputNorm.Data, c.RMSEps))
	}
	return logits
}
