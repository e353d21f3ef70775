package cpu

import (
	"jspark/kernels"
)

// The element-wise kernels that cost enough to matter in a prefill run
// here in parallel; the rest are ref's.

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
