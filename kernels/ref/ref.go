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

// Kernels is the reference implementation.
type Kernels struct{}

var _ kernels.Kernels = Kernels{}

func (Kernels) MatMul(dst, x []float32, n int, w *kernels.Matrix) {
	for t := 0; t < n; t++ {
		xt := x[t*w.Cols : (t+1)*w.Cols]
		for r := 0; r < w.Rows; r++ {
			dst[t*w.Rows+r] = float32(quant.ReferenceDot(w.Type, w.Row(r), xt))
		}
	}
}

func (Kernels) Embed(dst []float32, w *kernels.Matrix, ids []int) {
	for i, id := range ids {
		quant.Dequantize(w.Type, w.Row(id), dst[i*w.Cols:(i+1)*w.Cols])
	}
}

func (Kernels) RMSNorm(dst, x, weight []float32, dim int, eps float32) {
	for off := 0; off < len(x); off += dim {
		RMSNormRow(dst[off:off+dim], x[off:off+dim], weight, eps)
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

func (Kernels) RoPE(x []float32, pos []int, heads, headDim, ropeDim int, base float32, neox bool) {
	for t, p := range pos {
		for h := 0; h < heads; h++ {
			off := (t*heads + h) * headDim
			RoPEHead(x[off:off+headDim], p, ropeDim, base, neox)
		}
	}
}

// RoPEHead rotates one head. Like ggml, theta is carried in float32 and
// multiplied by base^(-2/ropeDim) per pair rather than recomputed by pow,
// so that positions rotate exactly as llama.cpp rotates them.
func RoPEHead(x []float32, pos, ropeDim int, base float32, neox bool) {
	scale := float32(math.Pow(float64(base), -2/float64(ropeDim)))
	theta := float32(pos)
	for i := 0; i < ropeDim/2; i++ {
		c := float32(math.Cos(float64(theta)))
		s := float32(math.Sin(float64(theta)))
		a, b := 2*i, 2*i+1
		if neox {
			a, b = i, i+ropeDim/2
		}
		x0, x1 := x[a], x[b]
		x[a] = x0*c - x1*s
		x[b] = x0*s + x1*c
		theta *= scale
	}
}

func (Kernels) Attend(a *kernels.Attention) {
	dim := a.Heads * a.HeadDim
	kvDim := a.KVHeads * a.HeadDim
	group := a.Heads / a.KVHeads
	for i := 0; i < a.N; i++ {
		for h := 0; h < a.Heads; h++ {
			q := a.Q[i*dim+h*a.HeadDim : i*dim+(h+1)*a.HeadDim]
			kvOff := (h / group) * a.HeadDim
			n := a.Pos[i] + 1
			scores := make([]float64, n)
			maxS := math.Inf(-1)
			for p := 0; p < n; p++ {
				k := a.K[a.Slot(i, p)*kvDim+kvOff:][:a.HeadDim]
				var s float64
				for d := range q {
					s += float64(q[d]) * float64(k[d])
				}
				scores[p] = s * float64(a.Scale)
				maxS = math.Max(maxS, scores[p])
			}
			var sum float64
			for p := range scores {
				scores[p] = math.Exp(scores[p] - maxS)
				sum += scores[p]
			}
			out := a.Out[i*dim+h*a.HeadDim : i*dim+(h+1)*a.HeadDim]
			for d := range out {
				var acc float64
				for p := 0; p < n; p++ {
					acc += scores[p] / sum * float64(a.V[a.Slot(i, p)*kvDim+kvOff+d])
				}
				out[d] = float32(acc)
			}
		}
	}
}

func (Kernels) SiLUMul(gate, up []float32) {
	for i, g := range gate {
		gate[i] = SiLU(g) * up[i]
	}
}

// SiLU is x·sigmoid(x).
func SiLU(x float32) float32 { return x / (1 + float32(math.Exp(float64(-x)))) }

func (Kernels) Add(dst, src []float32) {
	for i := range dst {
		dst[i] += src[i]
	}
}

func (Kernels) AddBias(x, bias []float32) {
	for off := 0; off < len(x); off += len(bias) {
		for i, b := range bias {
			x[off+i] += b
		}
	}
}
