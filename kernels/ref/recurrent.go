package ref

import (
	"math"

	"jspark/kernels"
)

// The kernels of the sliding-window and recurrent families: GeGLU, output
// gates, scaling, the short convolution and the gated delta rule.

func (Kernels) GELUMul(gate, up *kernels.Buffer, n int) {
	g, u := kernels.HostF32(gate)[:n], kernels.HostF32(up)
	for i, x := range g {
		g[i] = GELU(x) * u[i]
	}
}

// GELU is the tanh form of gelu, in float32 as ggml computes it.
func GELU(x float32) float32 {
	const c, a = 0.79788456080286535587989211986876, 0.044715
	return 0.5 * x * (1 + float32(math.Tanh(float64(c*x*(1+a*x*x)))))
}

func (Kernels) SigmoidMul(x, gate *kernels.Buffer, n, per int) {
	xs, g := kernels.HostF32(x)[:n], kernels.HostF32(gate)
	for i := range xs {
		xs[i] *= Sigmoid(g[i/per])
	}
}

// Sigmoid is 1/(1+e^-x).
func Sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(float64(-x)))) }

func (Kernels) Scale(x *kernels.Buffer, n int, s float32) {
	xs := kernels.HostF32(x)[:n]
	for i, v := range xs {
		xs[i] = v * s
	}
}

func (Kernels) Conv(c *kernels.Conv) {
	start, slot, pos := kernels.HostI32(c.Runs.Start), kernels.HostI32(c.Runs.Slot), kernels.HostI32(c.Runs.Pos)
	for r := 0; r < c.Runs.N; r++ {
		t0, t1 := int(start[r]), int(start[r+1])
		ConvRun(c, int(slot[r]), t0, t1, pos[t0] == 0, 0, c.Channels, make([]float32, c.Width-1))
	}
}

// ConvRun convolves channels lo..hi-1 of tokens t0..t1-1 (one run, its
// state in slot; fresh: from zeros), with win (Width-1 floats) as scratch.
// Each output is a float32 sum in tap order, so every device that calls it
// on any split of the channels gets the same bits.
func ConvRun(c *kernels.Conv, slot, t0, t1 int, fresh bool, lo, hi int, win []float32) {
	out, x, w, st := kernels.HostF32(c.Out), kernels.HostF32(c.X), kernels.HostF32(c.W), kernels.HostF32(c.State)
	C, K := c.Channels, c.Width
	state := st[slot*c.StateStride+c.StateOff:][:(K-1)*C]
	for ch := lo; ch < hi; ch++ {
		for j := range win {
			win[j] = 0
			if !fresh {
				win[j] = state[j*C+ch]
			}
		}
		wc := w[ch*K : (ch+1)*K]
		for t := t0; t < t1; t++ {
			in := x[t*C+ch]
			var sum float32
			for j, v := range win {
				sum += wc[j] * v
			}
			sum += wc[K-1] * in
			out[t*C+ch] = SiLU(sum)
			copy(win, win[1:])
			win[K-2] = in
		}
		for j, v := range win {
			state[j*C+ch] = v
		}
	}
}

func (Kernels) DeltaNet(d *kernels.DeltaNet) {
	start, slot, pos := kernels.HostI32(d.Runs.Start), kernels.HostI32(d.Runs.Slot), kernels.HostI32(d.Runs.Pos)
	st := kernels.HostF32(d.State)
	D := d.Dim
	s := make([]float64, D*D)
	for r := 0; r < d.Runs.N; r++ {
		t0, t1 := int(start[r]), int(start[r+1])
		for h := 0; h < d.VHeads; h++ {
			state := st[int(slot[r])*d.StateStride+d.StateOff+h*D*D:][:D*D]
			if pos[t0] == 0 {
				clear(state)
			}
			// NOTE: the state is rounded to float32 after every chunk or
			// step, as a step that ends there would leave it, so that
			// where a run ends does not change the bits.
			for t := t0; t < t1; {
				L := 1
				if c := d.Chunk; c > 1 && int(pos[t])%c == 0 && t+c <= t1 {
					L = c
				}
				for i, v := range state {
					s[i] = float64(v)
				}
				deltaChunk(d, s, h, t, L)
				for i, v := range s {
					state[i] = float32(v)
				}
				t += L
			}
		}
	}
}

// deltaToken is one token's inputs to value head h, in float64: its
// normed, scaled query, normed key, value, log decay and beta.
type deltaToken struct {
	q, k, v []float64
	g, b    float64
}

func deltaInputs(d *kernels.DeltaNet, h, t int) deltaToken {
	D := d.Dim
	kh := h / (d.VHeads / d.KHeads)
	if d.Tiled {
		kh = h % d.KHeads
	}
	row := kernels.HostF32(d.X)[t*(2*d.KHeads+d.VHeads)*D:]
	norm := func(x []float32, scale float64) []float64 {
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		inv := scale / math.Max(math.Sqrt(ss), float64(d.Eps))
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = float64(v) * inv
		}
		return out
	}
	var tok deltaToken
	tok.q = norm(row[kh*D:(kh+1)*D], 1/math.Sqrt(float64(D)))
	tok.k = norm(row[(d.KHeads+kh)*D:(d.KHeads+kh+1)*D], 1)
	for _, v := range row[(2*d.KHeads+h)*D : (2*d.KHeads+h+1)*D] {
		tok.v = append(tok.v, float64(v))
	}
	alpha := float64(kernels.HostF32(d.Alpha)[t*d.VHeads+h] + kernels.HostF32(d.DT)[h])
	tok.g = float64(kernels.HostF32(d.A)[h]) * Softplus(alpha)
	tok.b = 1 / (1 + math.Exp(-float64(kernels.HostF32(d.Beta)[t*d.VHeads+h])))
	return tok
}

// Softplus is ln(1+eˣ), and x itself above 20 (as ggml).
func Softplus(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log(1 + math.Exp(x))
}

// deltaChunk runs tokens t0..t0+L-1 of value head h from state s (Dim ×
// Dim, [key][value]) in the chunked form, which for L = 1 is one step:
// with G_t the sum of the log decays up to t,
//
//	u_t = b_t·(v_t − e^{G_t}·S₀ᵀk_t) − Σ_{s<t} b_t·e^{G_t−G_s}·(k_t·k_s)·u_s
//	o_t = e^{G_t}·S₀ᵀq_t + Σ_{s≤t} e^{G_t−G_s}·(k_s·q_t)·u_s
//	S   = e^{G_{L−1}}·S₀ + Σ_s e^{G_{L−1}−G_s}·k_s·u_sᵀ
func deltaChunk(d *kernels.DeltaNet, s []float64, h, t0, L int) {
	D := d.Dim
	toks := make([]deltaToken, L)
	G := make([]float64, L)
	for t := range toks {
		toks[t] = deltaInputs(d, h, t0+t)
		G[t] = toks[t].g
		if t > 0 {
			G[t] += G[t-1]
		}
	}
	dot := func(a, b []float64) float64 {
		var x float64
		for i := range a {
			x += a[i] * b[i]
		}
		return x
	}
	// sT returns Sᵀx (the state read by x over the key dim).
	sT := func(x []float64) []float64 {
		y := make([]float64, D)
		for i, xi := range x {
			for j := range y {
				y[j] += xi * s[i*D+j]
			}
		}
		return y
	}
	us := make([][]float64, L)
	out := kernels.HostF32(d.Out)
	for t, tok := range toks {
		sk, sq := sT(tok.k), sT(tok.q)
		u := make([]float64, D)
		for j := range u {
			u[j] = tok.b * (tok.v[j] - math.Exp(G[t])*sk[j])
		}
		for p := 0; p < t; p++ {
			c := tok.b * math.Exp(G[t]-G[p]) * dot(tok.k, toks[p].k)
			for j := range u {
				u[j] -= c * us[p][j]
			}
		}
		us[t] = u
		kq := make([]float64, t+1)
		for p := range kq {
			kq[p] = math.Exp(G[t]-G[p]) * dot(toks[p].k, tok.q)
		}
		o := out[(t0+t)*d.VHeads*D+h*D:][:D]
		for j := range o {
			acc := math.Exp(G[t]) * sq[j]
			for p, c := range kq {
				acc += c * us[p][j]
			}
			o[j] = float32(acc)
		}
	}
	last := G[L-1]
	for i := 0; i < D; i++ {
		for j := 0; j < D; j++ {
			acc := math.Exp(last) * s[i*D+j]
			for p := range toks {
				acc += math.Exp(last-G[p]) * toks[p].k[i] * us[p][j]
			}
			s[i*D+j] = acc
		}
	}
}
