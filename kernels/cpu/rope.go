package cpu

import (
	"jspark/kernels"
	"jspark/kernels/ref"
)

// rope is RoPE in flight: tasks are tokens.
type rope struct {
	k              *Kernels
	x              []float32
	pos            []int32
	heads, headDim int
	r              kernels.Rope
}

// RoPE rotates as ref's does, bit for bit, but computes a token's angles
// once for all its heads.
func (k *Kernels) RoPE(x, pos *kernels.Buffer, n, heads, headDim int, r kernels.Rope) {
	k.mu.Lock()
	defer k.mu.Unlock()
	rp := &k.rope
	*rp = rope{k: k, x: kernels.HostF32(x), pos: kernels.HostI32(pos), heads: heads, headDim: headDim, r: r}
	k.pool.runSized(n, n*heads*r.Dim*4, rp)
	*rp = rope{}
}

func (r *rope) task(worker, t int) {
	s := &r.k.scratch[worker]
	half := r.r.Dim / 2
	if len(s.rope) < 2*half {
		s.rope = make([]float32, 2*half)
	}
	cs, sn := s.rope[:half], s.rope[half:2*half]
	ref.RopeAngles(cs, sn, int(r.pos[t]), r.r)
	for h := 0; h < r.heads; h++ {
		ref.RotateHead(r.x[(t*r.heads+h)*r.headDim:][:r.headDim], cs, sn, r.r.Neox)
	}
}
