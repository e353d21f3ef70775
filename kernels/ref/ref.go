// Package ref is the scalar reference implementation of kernels.Kernels:
// single-threaded, straight loops, float64 accumulation where a sum runs
// long. Optimized kernels are tested against it; its element-wise row
// functions are shared with them.
package ref

import (
	"math"

	"jspark/kernels"
	"jspark/kernels/quant"
)

// Kernels is the reference implementation, a host device.
type Kernels struct{ kernels.HostMemory }

var _ kernels.Kernels = Kernels{}

func (Kernels) MatMul(dst, x *kernels.Buffer, n int, w *kernels.Matrix) {
	d, xs, wb := kernels.HostF32(dst), kernels.HostF32(x), kernels.HostBytes(w.Buf)
	rb := w.Type.RowBytes(w.Cols)
	for t := 0; t < n; t++ {
		xt := xs[t*w.Cols : (t+1)*w.Cols]
		for r := 0; r < w.Rows; r++ {
			d[t*w.Rows+r] = float32(quant.ReferenceDot(w.Type, wb[r*rb:(r+1)*rb], xt))
		}
	}
}

func (Kernels) Embed(dst *kernels.Buffer, w *kernels.Matrix, ids *kernels.Buffer, n int) {
	d, wb := kernels.HostF32(dst), kernels.HostBytes(w.Buf)
	rb := w.Type.RowBytes(w.Cols)
	for i, id := range kernels.HostI32(ids)[:n] {
		quant.Dequantize(w.Type, wb[int(id)*rb:(int(id)+1)*rb], d[i*w.Cols:(i+1)*w.Cols])
	}
}

func (Kernels) RMSNorm(dst, x, weight *kernels.Buffer, n, dim int, eps float32) {
	d, xs, w := kernels.HostF32(dst), kernels.HostF32(x), kernels.HostF32(weight)
	for off := 0; off < n*dim; off += dim {
		RMSNormRow(d[off:off+dim], xs[off:off+dim], w, eps)
	}
}

// RMSNormRow normalizes one row as ggml does: the mean square summed in
// float64, the scale applied, then the weight.
func RMSNormRow(dst, x, weight []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v) * float64(v)
	}
	scale := float32(1 / math.Sqrt(sum/float64(len(x))+float64(eps)))
	for i, v := range x {
		dst[i] = v * scale * weight[i]
	}
}

func (Kernels) RoPE(x, pos *kernels.Buffer, n, heads, headDim int, r kernels.Rope) {
	xs := kernels.HostF32(x)
	cs, sn := make([]float32, r.Dim/2), make([]float32, r.Dim/2)
	for t, p := range kernels.HostI32(pos)[:n] {
		RopeAngles(cs, sn, int(p), r)
		for h := 0; h < heads; h++ {
			off := (t*heads + h) * headDim
			RotateHead(xs[off:off+headDim], cs, sn, r.Neox)
		}
	}
}

// RopeAngles sets the cosines and sines (times Mscale) of the Dim/2 pairs
// at position pos as ggml's rope_yarn does: θ is carried in float32 and
// multiplied by Base^(-2/Dim) per pair rather than recomputed by pow, so
// that positions rotate exactly as llama.cpp rotates them.
func RopeAngles(cs, sn []float32, pos int, r kernels.Rope) {
	scale := float32(math.Pow(float64(r.Base), -2/float64(r.Dim)))
	theta := float32(pos)
	for i := range cs {
		t := r.FreqScale * theta
		if r.ExtFactor != 0 {
			y := (float32(i) - r.Corr[0]) / max(0.001, r.Corr[1]-r.Corr[0])
			mix := (1 - min(1, max(0, y))) * r.ExtFactor
			t = t*(1-mix) + theta*mix
		}
		cs[i] = float32(math.Cos(float64(t))) * r.Mscale
		sn[i] = float32(math.Sin(float64(t))) * r.Mscale
		theta *= scale
	}
}

// RotateHead turns the pairs of one head by the angles of RopeAngles: neox
// pairs i with i+len(cs), normal 2i with 2i+1.
func RotateHead(x, cs, sn []float32, neox bool) {
	for i := range cs {
		a, b := 2*i, 2*i+1
		if neox {
			a, b = i, i+len(cs)
		}
		x0, x1 := x[a], x[b]
		x[a] = x0*cs[i] - x1*sn[i]
		x[b] = x0*sn[i] + x1*cs[i]
	}
}

func (Kernels) Attend(a *kernels.Attention) {
	Q, O, pos := kernels.HostF32(a.Q), kernels.HostF32(a.Out), kernels.HostI32(a.Pos)
	K, V := KVRows(a.K), KVRows(a.V)
	dim := a.Heads * a.HeadDim
	kvDim := a.KVHeads * a.HeadDim
	group := a.Heads / a.KVHeads
	for i := 0; i < a.N; i++ {
		lo, n := WindowStart(int(pos[i]), a.Window), int(pos[i])+1
		for h := 0; h < a.Heads; h++ {
			q := Q[i*dim+h*a.HeadDim : i*dim+(h+1)*a.HeadDim]
			kvOff := (h / group) * a.HeadDim
			scores := make([]float64, n)
			maxS := math.Inf(-1)
			for p := lo; p < n; p++ {
				kOff := a.Slot(i, p)*kvDim + kvOff
				var s float64
				for d := range q {
					s += float64(q[d]) * float64(K(kOff+d))
				}
				scores[p] = s * float64(a.Scale)
				maxS = math.Max(maxS, scores[p])
			}
			var sink float64
			if a.Sinks != nil {
				sink = float64(kernels.HostF32(a.Sinks)[h])
				maxS = math.Max(maxS, sink)
			}
			var sum float64
			for p := lo; p < n; p++ {
				scores[p] = math.Exp(scores[p] - maxS)
				sum += scores[p]
			}
			if a.Sinks != nil {
				sum += math.Exp(sink - maxS)
			}
			out := O[i*dim+h*a.HeadDim : i*dim+(h+1)*a.HeadDim]
			for d := range out {
				var acc float64
				for p := lo; p < n; p++ {
					acc += scores[p] / sum * float64(V(a.Slot(i, p)*kvDim+kvOff+d))
				}
				out[d] = float32(acc)
			}
		}
	}
}

// WindowStart is the first position a token at pos sees through a sliding
// window of window positions (0: no window).
func WindowStart(pos, window int) int {
	if window <= 0 {
		return 0
	}
	return max(0, pos-window+1)
}

// KVRows returns a reader of a host KV pool's elements, F32 or F16.
func KVRows(b *kernels.Buffer) func(i int) float32 {
	if b.Type == quant.F16 {
		h := kernels.HostF16(b)
		return func(i int) float32 { return quant.F16ToF32(h[i]) }
	}
	f := kernels.HostF32(b)
	return func(i int) float32 { return f[i] }
}

func (Kernels) SiLUMul(gate, up *kernels.Buffer, n int) {
	g, u := kernels.HostF32(gate)[:n], kernels.HostF32(up)
	for i, x := range g {
		g[i] = SiLU(x) * u[i]
	}
}

func (Kernels) SwiGLUOAI(gate, up *kernels.Buffer, n int, alpha, limit float32) {
	g, u := kernels.HostF32(gate)[:n], kernels.HostF32(up)
	for i, x := range g {
		g[i] = SwiGLUOAI(x, u[i], alpha, limit)
	}
}

// SwiGLUOAI is gpt-oss's clamped gate: x = min(g, limit) times
// sigmoid(alpha·x), times (clamp(u, ±limit) + 1), as ggml computes it.
func SwiGLUOAI(g, u, alpha, limit float32) float32 {
	x := min(g, limit)
	y := max(min(u, limit), -limit)
	return x / (1 + float32(math.Exp(float64(-alpha*x)))) * (y + 1)
}

func (k Kernels) MatMulGroups(dst, x *kernels.Buffer, ws []*kernels.Matrix, start []int) {
	d, xs := kernels.HostF32(dst), kernels.HostF32(x)
	for g, w := range ws {
		n := start[g+1] - start[g]
		if n <= 0 {
			continue
		}
		r0 := start[g]
		k.MatMul(kernels.NewHostBuffer(quant.F32, n*w.Rows, kernels.F32Bytes(d[r0*w.Rows:])),
			kernels.NewHostBuffer(quant.F32, n*w.Cols, kernels.F32Bytes(xs[r0*w.Cols:])), n, w)
	}
}

func (Kernels) WeightedSum(dst, src, rows, weights *kernels.Buffer, n, k, width int) {
	d, s := kernels.HostF32(dst), kernels.HostF32(src)
	r, w := kernels.HostI32(rows), kernels.HostF32(weights)
	acc := make([]float32, width)
	for t := 0; t < n; t++ {
		WeightedRow(acc, s, r[t*k:(t+1)*k], w[t*k:(t+1)*k])
		for i, v := range acc {
			d[t*width+i] += v
		}
	}
}

// WeightedRow sets acc to Σ_j w[j]·(row rows[j] of src), in j order.
func WeightedRow(acc, src []float32, rows []int32, w []float32) {
	width := len(acc)
	clear(acc)
	for j, r := range rows {
		row := src[int(r)*width:][:width]
		for i, v := range row {
			acc[i] += w[j] * v
		}
	}
}

// SiLU is x·sigmoid(x).
func SiLU(x float32) float32 { return x / (1 + float32(math.Exp(float64(-x)))) }

func (Kernels) Add(dst, src *kernels.Buffer, n int) {
	d, s := kernels.HostF32(dst)[:n], kernels.HostF32(src)
	for i := range d {
		d[i] += s[i]
	}
}

func (Kernels) AddBias(x, bias *kernels.Buffer, n, dim int) {
	xs, b := kernels.HostF32(x), kernels.HostF32(bias)[:dim]
	for off := 0; off < n*dim; off += dim {
		for i, v := range b {
			xs[off+i] += v
		}
	}
}

func (Kernels) Gather(dst, src, rows *kernels.Buffer, n, width int) {
	d, s := kernels.HostF32(dst), kernels.HostF32(src)
	for i, r := range kernels.HostI32(rows)[:n] {
		copy(d[i*width:(i+1)*width], s[int(r)*width:(int(r)+1)*width])
	}
}

func (Kernels) Scatter(dst, src, slots *kernels.Buffer, n, width int) {
	s := kernels.HostF32(src)
	for i, slot := range kernels.HostI32(slots)[:n] {
		ScatterRow(dst, int(slot), s[i*width:(i+1)*width])
	}
}

// ScatterRow stores one F32 row as row slot of dst (F32, or F16 rounded to
// nearest even).
func ScatterRow(dst *kernels.Buffer, slot int, row []float32) {
	w := len(row)
	if dst.Type == quant.F16 {
		h := kernels.HostF16(dst)[slot*w : (slot+1)*w]
		for j, v := range row {
			h[j] = quant.F32ToF16(v)
		}
		return
	}
	copy(kernels.HostF32(dst)[slot*w:(slot+1)*w], row)
}
