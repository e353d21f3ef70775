package cpu

import (
	"jspark/kernels"
	"jspark/kernels/ref"
)

// The mixture-of-experts kernels: a product per expert over its rows, the
// weighted sum of a token's experts, and gpt-oss's clamped SwiGLU.

// moeState is their state in flight and their reused views and scratch
// (a call allocates nothing once the first has grown them).
type moeState struct {
	dstView, xView kernels.Buffer
	acc            [][]float32 // a worker's sum of one row
	dst, src, w    []float32
	rows           []int32
	k, width       int
	alpha, limit   float32
}

// MatMulGroups runs one product per group that has rows, each over a view
// of its rows: the product's arithmetic for a row does not depend on the
// rows beside it, so a token's bits are those of a product on it alone.
func (k *Kernels) MatMulGroups(dst, x *kernels.Buffer, ws []*kernels.Matrix, start []int) {
	m := &k.moe
	for g, w := range ws {
		n := start[g+1] - start[g]
		if n <= 0 {
			continue
		}
		kernels.HostView(&m.dstView, dst, start[g]*w.Rows, n*w.Rows)
		kernels.HostView(&m.xView, x, start[g]*w.Cols, n*w.Cols)
		k.MatMul(&m.dstView, &m.xView, n, w)
	}
	m.dstView, m.xView = kernels.Buffer{}, kernels.Buffer{}
}

// weightedSum is WeightedSum in flight: tasks are tokens.
type weightedSum moeState

func (k *Kernels) WeightedSum(dst, src, rows, weights *kernels.Buffer, n, kk, width int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	m := &k.moe
	for len(m.acc) < k.pool.workers {
		m.acc = append(m.acc, nil)
	}
	for i := range m.acc {
		if len(m.acc[i]) < width {
			m.acc[i] = make([]float32, width)
		}
	}
	m.dst, m.src, m.rows, m.w, m.k, m.width = kernels.HostF32(dst), kernels.HostF32(src), kernels.HostI32(rows), kernels.HostF32(weights), kk, width
	k.pool.runSized(n, n*kk*width*8, (*weightedSum)(m))
	m.dst, m.src, m.rows, m.w = nil, nil, nil, nil
}

func (m *weightedSum) task(worker, t int) {
	acc := m.acc[worker][:m.width]
	ref.WeightedRow(acc, m.src, m.rows[t*m.k:(t+1)*m.k], m.w[t*m.k:(t+1)*m.k])
	d := m.dst[t*m.width:][:m.width]
	for i, v := range acc {
		d[i] += v
	}
}

// swiglu is SwiGLUOAI in flight: tasks are chunks of siluChunk elements.
type swiglu moeState

// SwiGLUOAI is ref's, element for element, in parallel chunks.
func (k *Kernels) SwiGLUOAI(gate, up *kernels.Buffer, n int, alpha, limit float32) {
	k.mu.Lock()
	defer k.mu.Unlock()
	m := &k.moe
	m.dst, m.src, m.alpha, m.limit = kernels.HostF32(gate)[:n], kernels.HostF32(up)[:n], alpha, limit
	k.pool.runSized((n+siluChunk-1)/siluChunk, n*16, (*swiglu)(m))
	m.dst, m.src = nil, nil
}

func (m *swiglu) task(_, i int) {
	g := m.dst[i*siluChunk : min(len(m.dst), (i+1)*siluChunk)]
	u := m.src[i*siluChunk:][:len(g)]
	for j, x := range g {
		g[j] = ref.SwiGLUOAI(x, u[j], m.alpha, m.limit)
	}
}
