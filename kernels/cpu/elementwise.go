package cpu

import (
	"math"

	"jspark/kernels"
)

// The element-wise kernels that cost enough to matter in a prefill run
// here in parallel; the rest are ref's.

// rope is RoPE in flight: tasks are tokens.
type rope struct {
	k                       *Kernels
	x                       []float32
	pos                     []int32
	heads, headDim, ropeDim int
	base                    float32
	neox                    bool
}

// RoPE rotates as ref.RoPEHead does, bit for bit, but computes a token's
// angles once for all its heads.
func (k *Kernels) RoPE(x, pos *kernels.Buffer, n, heads, headDim, ropeDim int, base float32, neox bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	r := &k.rope
	*r = rope{k: k, x: kernels.HostF32(x), pos: kernels.HostI32(pos), heads: heads, headDim: headDim, ropeDim: ropeDim, base: base, neox: neox}
	k.pool.runSized(n, n*heads*ropeDim*4, r)
	*r = rope{}
}

func (r *rope) task(worker, t int) {
	s := &r.k.scratch[worker]
	half := r.ropeDim / 2
	if len(s.rope) < 2*half {
		s.rope = make([]float32, 2*half)
	}
	cs, sn := s.rope[:half], s.rope[half:2*half]
	scale := float32(math.Pow(float64(r.base), -2/float64(r.ropeDim)))
	theta := float32(r.pos[t])
	for i := range cs {
		cs[i] = float32(math.Cos(float64(theta)))
		sn[i] = float32(math.Sin(float64(theta)))
		theta *= scale
	}
	for h := 0; h < r.heads; h++ {
		x := r.x[(t*r.heads+h)*r.headDim:][:r.headDim]
		for i := range cs {
			a, b := 2*i, 2*i+1
			if r.neox {
				a, b = i, i+half
			}
			x0, x1 := x[a], x[b]
			x[a] = x0*cs[i] - x1*sn[i]
			x[b] = x0*sn[i] + x1*cs[i]
		}
	}
}

// siluChunk is the elements per SiLUMul task.
const siluChunk = 4096

type siluMul struct {
	g, u []float32
	isa  isa
}

// SiLUMul is ref's with expf (within 2e-7 of math.Exp; vectorised on
// AVX-512) in parallel chunks.
func (k *Kernels) SiLUMul(gate, up *kernels.Buffer, n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := &k.silu
	*s = siluMul{g: kernels.HostF32(gate)[:n], u: kernels.HostF32(up)[:n], isa: k.isa}
	k.pool.runSized((n+siluChunk-1)/siluChunk, n*8, s)
	*s = siluMul{}
}

func (s *siluMul) task(_, i int) {
	g := s.g[i*siluChunk : min(len(s.g), (i+1)*siluChunk)]
	u := s.u[i*siluChunk:][:len(g)]
	if s.isa == isaAVX512 {
		if body := len(g) &^ 15; body > 0 {
			silu512(&g[0], &u[0], body)
			g, u = g[body:], u[body:]
		}
	}
	for j, x := range g {
		if x < -87 { // e^-x overflows float32: sigmoid is 0
			g[j] = 0
			continue
		}
		g[j] = x / (1 + expf(-x)) * u[j]
	}
}
