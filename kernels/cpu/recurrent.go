package cpu

import (
	"math"

	"jspark/kernels"
	"jspark/kernels/ref"
)

// The recurrent kernels (the short convolution and the gated delta rule)
// and the element-wise ones of the hybrid families, in parallel. A task
// of the convolution is a run's block of channels, of the delta rule a
// (run, value head) pair: every output is computed by one task from its
// own sequence's rows only, so a token's bits do not depend on the batch
// or the threads.

// recurrent is a recurrent kernel in flight and its reused scratch.
type recurrent struct {
	cv    *kernels.Conv
	dn    *kernels.DeltaNet
	start []int32 // the runs' starts, slots and the step's positions
	slot  []int32
	pos   []int32
	win   [][]float32 // a worker's convolution window
	delta []deltaScratch
	g, u  []float32 // element-wise operands
	per   int
}

// convChannels is the channels of a convolution task.
const convChannels = 256

type convTasks recurrent

func (k *Kernels) Conv(c *kernels.Conv) {
	k.mu.Lock()
	defer k.mu.Unlock()
	r := &k.rec
	r.cv, r.start, r.slot, r.pos = c, kernels.HostI32(c.Runs.Start), kernels.HostI32(c.Runs.Slot), kernels.HostI32(c.Runs.Pos)
	for len(r.win) < k.pool.workers {
		r.win = append(r.win, nil)
	}
	for i := range r.win {
		if len(r.win[i]) < c.Width-1 {
			r.win[i] = make([]float32, c.Width-1)
		}
	}
	per := (c.Channels + convChannels - 1) / convChannels
	k.pool.runSized(c.Runs.N*per, c.N*c.Channels*c.Width*2, (*convTasks)(r))
	r.cv = nil
}

func (r *convTasks) task(worker, i int) {
	c := r.cv
	per := (c.Channels + convChannels - 1) / convChannels
	run, lo := i/per, i%per*convChannels
	t0, t1 := int(r.start[run]), int(r.start[run+1])
	ref.ConvRun(c, int(r.slot[run]), t0, t1, r.pos[t0] == 0, lo, min(lo+convChannels, c.Channels), r.win[worker][:c.Width-1])
}

// deltaScratch is a worker's: a chunk's normed queries and keys, values,
// log decays and betas, its u, the state read by its keys and queries,
// and the decays between its tokens.
type deltaScratch struct {
	q, k, v, ks, qs, u []float32 // (chunk, dim)
	g, b               []float32 // (chunk)
	kk, kq             []float32 // (chunk, chunk)
	coef               []float32 // (chunk) a state row's coefficients of the u rows
	avx512             bool      // the loops run in assembly
}

func (s *deltaScratch) grow(c, d int) {
	if len(s.q) >= c*d && len(s.kk) >= c*c {
		return
	}
	mk := func() []float32 { return make([]float32, c*d) }
	s.q, s.k, s.v, s.ks, s.qs, s.u = mk(), mk(), mk(), mk(), mk(), mk()
	s.g, s.b = make([]float32, c), make([]float32, c)
	s.kk, s.kq = make([]float32, c*c), make([]float32, c*c)
	s.coef = make([]float32, c)
}

// vecmat sets acc = a·acc + Σ_i x[i]·m[i·stride:][:len(acc)].
func (s *deltaScratch) vecmat(acc, x, m []float32, stride int, a float32) {
	rows, cols := len(x), len(acc)
	if rows > 0 {
		m = m[:(rows-1)*stride+cols]
	}
	if s.avx512 && cols%16 == 0 && rows > 0 {
		vecmat512(&acc[0], &x[0], &m[0], rows, cols, stride, a)
		return
	}
	if a != 1 {
		for j := range acc {
			acc[j] *= a
		}
	}
	for i, xi := range x {
		axpy(acc, xi, m[i*stride:i*stride+cols])
	}
}

// update sets each row i of S to a·S[i] + k[i]·u, and o = Σ_i q[i]·S[i]
// over the new rows.
func (s *deltaScratch) update(S, k, q, u, o []float32, a float32) {
	D := len(u)
	S = S[:len(k)*D]
	if s.avx512 && D%16 == 0 {
		update512(&S[0], &k[0], &q[0], &u[0], &o[0], a, len(k), D)
		return
	}
	clear(o)
	for i, ki := range k {
		row := S[i*D : (i+1)*D]
		for j := range row {
			row[j] = a*row[j] + ki*u[j]
		}
		axpy(o, q[i], row)
	}
}

func (s *deltaScratch) dot(x, y []float32) float32 {
	if s.avx512 && len(x)%16 == 0 && len(x) > 0 {
		return dot512(&x[0], &y[:len(x)][0], len(x))
	}
	return dot(x, y)
}

type deltaTasks recurrent

// DeltaNet is ref's rule in float32, the chunked form over whole aligned
// chunks (as ref, the state rounded to float32 after each), in parallel
// over (run, value head).
func (k *Kernels) DeltaNet(d *kernels.DeltaNet) {
	k.mu.Lock()
	defer k.mu.Unlock()
	r := &k.rec
	r.dn, r.start, r.slot, r.pos = d, kernels.HostI32(d.Runs.Start), kernels.HostI32(d.Runs.Slot), kernels.HostI32(d.Runs.Pos)
	for len(r.delta) < k.pool.workers {
		r.delta = append(r.delta, deltaScratch{})
	}
	for i := range r.delta {
		r.delta[i].grow(max(d.Chunk, 1), d.Dim)
		r.delta[i].avx512 = k.isa == isaAVX512
	}
	k.pool.runSized(d.Runs.N*d.VHeads, d.N*d.VHeads*d.Dim*d.Dim*6, (*deltaTasks)(r))
	r.dn = nil
}

func (r *deltaTasks) task(worker, i int) {
	d := r.dn
	run, h := i/d.VHeads, i%d.VHeads
	t0, t1 := int(r.start[run]), int(r.start[run+1])
	D := d.Dim
	state := kernels.HostF32(d.State)[int(r.slot[run])*d.StateStride+d.StateOff+h*D*D:][:D*D]
	if r.pos[t0] == 0 {
		clear(state)
	}
	s := &r.delta[worker]
	for t := t0; t < t1; {
		L := 1
		if c := d.Chunk; c > 1 && int(r.pos[t])%c == 0 && t+c <= t1 {
			L = c
		}
		deltaInputs(d, s, h, t, L)
		if L == 1 {
			deltaStep(state, s, D)
		} else {
			deltaChunk(state, s, D, L)
		}
		out := kernels.HostF32(d.Out)
		for j := 0; j < L; j++ {
			copy(out[(t+j)*d.VHeads*D+h*D:][:D], s.u[j*D:(j+1)*D]) // deltaStep/Chunk leave the outputs in u
		}
		t += L
	}
}

// deltaInputs fills the scratch with tokens t..t+L-1's inputs to head h:
// q/max(‖q‖, eps)/√D, k/max(‖k‖, eps), v, the log decay and the beta.
func deltaInputs(d *kernels.DeltaNet, s *deltaScratch, h, t, L int) {
	D := d.Dim
	kh := h / (d.VHeads / d.KHeads)
	if d.Tiled {
		kh = h % d.KHeads
	}
	x := kernels.HostF32(d.X)
	width := (2*d.KHeads + d.VHeads) * D
	alpha, beta := kernels.HostF32(d.Alpha), kernels.HostF32(d.Beta)
	dt, a := kernels.HostF32(d.DT)[h], kernels.HostF32(d.A)[h]
	scale := float32(1 / math.Sqrt(float64(D)))
	for j := 0; j < L; j++ {
		row := x[(t+j)*width:]
		s.l2(s.q[j*D:(j+1)*D], row[kh*D:(kh+1)*D], d.Eps, scale)
		s.l2(s.k[j*D:(j+1)*D], row[(d.KHeads+kh)*D:(d.KHeads+kh+1)*D], d.Eps, 1)
		copy(s.v[j*D:(j+1)*D], row[(2*d.KHeads+h)*D:])
		s.g[j] = a * float32(ref.Softplus(float64(alpha[(t+j)*d.VHeads+h]+dt)))
		s.b[j] = ref.Sigmoid(beta[(t+j)*d.VHeads+h])
	}
}

// l2 sets dst = x/max(‖x‖, eps)·scale.
func (s *deltaScratch) l2(dst, x []float32, eps, scale float32) {
	ss := s.dot(x, x)
	inv := scale / float32(math.Max(math.Sqrt(float64(ss)), float64(eps)))
	for i, v := range x {
		dst[i] = v * inv
	}
}

// axpy sets y += a·x.
func axpy(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	i := 0
	for ; i+4 <= len(y); i += 4 {
		y[i] += a * x[i]
		y[i+1] += a * x[i+1]
		y[i+2] += a * x[i+2]
		y[i+3] += a * x[i+3]
	}
	for ; i < len(y); i++ {
		y[i] += a * x[i]
	}
}

func dot(x, y []float32) float32 {
	y = y[:len(x)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += x[i] * y[i]
		s1 += x[i+1] * y[i+1]
		s2 += x[i+2] * y[i+2]
		s3 += x[i+3] * y[i+3]
	}
	for ; i < len(x); i++ {
		s0 += x[i] * y[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// deltaStep is one token (the scratch's first) from state S (D × D by key
// dim): u = b(v − a·Sᵀk), S ← a·S + k uᵀ, out = Sᵀq, left in u.
func deltaStep(S []float32, s *deltaScratch, D int) {
	a := float32(math.Exp(float64(s.g[0])))
	q, k, v, sk, u := s.q[:D], s.k[:D], s.v[:D], s.ks[:D], s.u[:D]
	clear(sk)
	s.vecmat(sk, k, S, D, 1)
	for j := range u {
		u[j] = s.b[0] * (v[j] - a*sk[j])
	}
	o := s.qs[:D]
	s.update(S, k, q, u, o, a)
	copy(u, o)
}

// colBlock is the columns of the state a chunk's products take at a
// time: 128 rows of 64 floats, 32 KiB, stay in L1 across the chunk's
// tokens.
const colBlock = 64

// deltaChunk is L tokens from state S in the chunked form (ref's
// deltaChunk, in float32), the outputs left in u's rows.
func deltaChunk(S []float32, s *deltaScratch, D, L int) {
	G := s.g[:L]
	for t := 1; t < L; t++ {
		G[t] += G[t-1]
	}
	ks, qs := s.ks[:L*D], s.qs[:L*D]
	clear(ks)
	clear(qs)
	// S₀ᵀk_t and S₀ᵀq_t, a block of columns at a time.
	for c := 0; c < D; c += colBlock {
		w := min(colBlock, D-c)
		for t := 0; t < L; t++ {
			s.vecmat(ks[t*D+c:t*D+c+w], s.k[t*D:(t+1)*D], S[c:], D, 1)
			s.vecmat(qs[t*D+c:t*D+c+w], s.q[t*D:(t+1)*D], S[c:], D, 1)
		}
	}
	kk, kq := s.kk[:L*L], s.kq[:L*L]
	for t := 0; t < L; t++ {
		kt, qt := s.k[t*D:(t+1)*D], s.q[t*D:(t+1)*D]
		for p := 0; p <= t; p++ {
			e := float32(math.Exp(float64(G[t] - G[p])))
			kp := s.k[p*D : (p+1)*D]
			kk[t*L+p] = -s.b[t] * e * s.dot(kt, kp)
			kq[t*L+p] = e * s.dot(kp, qt)
		}
	}
	u := s.u[:L*D]
	for t := 0; t < L; t++ {
		gt := float32(math.Exp(float64(G[t])))
		ut := u[t*D : (t+1)*D]
		vt, kst := s.v[t*D:(t+1)*D], ks[t*D:(t+1)*D]
		for j := range ut {
			ut[j] = s.b[t] * (vt[j] - gt*kst[j])
		}
		s.vecmat(ut, kk[t*L:t*L+t], u, D, 1) // − Σ_{p<t} b_t·e^{G_t−G_p}(k_t·k_p)·u_p
	}
	// The outputs (o_t = γ_t·S₀ᵀq_t + Σ_{p≤t} kq·u_p) into qs.
	for t := 0; t < L; t++ {
		s.vecmat(qs[t*D:(t+1)*D], kq[t*L:t*L+t+1], u, D, float32(math.Exp(float64(G[t]))))
	}
	// The state after the chunk: S[i] = γ_L·S₀[i] + Σ_p e^{G_L−G_p}·k_p[i]·u_p,
	// the coefficients transposed into kk (free now) a row at a time.
	last := G[L-1]
	gl := float32(math.Exp(float64(last)))
	for p := 0; p < L; p++ {
		s.g[p] = float32(math.Exp(float64(last - G[p])))
	}
	coef := s.coef[:L]
	for i := 0; i < D; i++ {
		for p := range coef {
			coef[p] = s.g[p] * s.k[p*D+i]
		}
		s.vecmat(S[i*D:(i+1)*D], coef, u, D, gl)
	}
	copy(u, qs)
}

type geluTasks recurrent

// GELUMul is ref's, element for element, in parallel chunks.
func (k *Kernels) GELUMul(gate, up *kernels.Buffer, n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	r := &k.rec
	r.g, r.u = kernels.HostF32(gate)[:n], kernels.HostF32(up)[:n]
	k.pool.runSized((n+siluChunk-1)/siluChunk, n*16, (*geluTasks)(r))
	r.g, r.u = nil, nil
}

func (r *geluTasks) task(_, i int) {
	g := r.g[i*siluChunk : min(len(r.g), (i+1)*siluChunk)]
	u := r.u[i*siluChunk:][:len(g)]
	for j, x := range g {
		g[j] = ref.GELU(x) * u[j]
	}
}

type sigmoidTasks recurrent

// SigmoidMul is ref's, element for element, in parallel chunks.
func (k *Kernels) SigmoidMul(x, gate *kernels.Buffer, n, per int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	r := &k.rec
	r.g, r.u, r.per = kernels.HostF32(x)[:n], kernels.HostF32(gate), per
	k.pool.runSized((n+siluChunk-1)/siluChunk, n*8, (*sigmoidTasks)(r))
	r.g, r.u = nil, nil
}

func (r *sigmoidTasks) task(_, i int) {
	lo := i * siluChunk
	x := r.g[lo:min(len(r.g), lo+siluChunk)]
	for j := range x {
		x[j] *= ref.Sigmoid(r.u[(lo+j)/r.per])
	}
}
