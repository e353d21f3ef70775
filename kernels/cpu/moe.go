package cpu

import (
	"sort"

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
	grouped        grouped
}

// MatMulGroups multiplies each group's rows by its matrix. A product's
// arithmetic for a row does not depend on the rows beside it, so a
// token's bits are those of a product on it alone. Packed weights run as
// one parallel call for all groups (a decode step's 8 experts were 16
// calls: each product's quantizing and tiles), their activations
// quantized together first; other paths run a product per group.
func (k *Kernels) MatMulGroups(dst, x *kernels.Buffer, ws []*kernels.Matrix, start []int) {
	if len(ws) > 0 && k.usePacked(ws[0].Type) && k.matMulGrouped(dst, x, ws, start) {
		return
	}
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

// grouped is a grouped packed product in flight: task i belongs to the
// product of the last entry whose first task is at most i.
type grouped struct {
	mms   []pmm
	first []int // each product's first task
}

// matMulGrouped runs MatMulGroups as one call when every matrix is
// packed, of one type; false (nothing done) otherwise.
func (k *Kernels) matMulGrouped(dst, x *kernels.Buffer, ws []*kernels.Matrix, start []int) bool {
	typ := ws[0].Type
	for _, w := range ws {
		if w.Type != typ || w.Cols != ws[0].Cols || w.Rows != ws[0].Rows {
			return false
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	gm := &k.moe.grouped
	gm.mms, gm.first = gm.mms[:0], gm.first[:0]
	R, K := ws[0].Rows, ws[0].Cols
	d, xs := kernels.HostF32(dst), kernels.HostF32(x)
	n := start[len(ws)]
	var rec []byte
	tasks := 0
	for g, w := range ws {
		m := start[g+1] - start[g]
		if m <= 0 {
			continue
		}
		p, err := k.packedOf(w)
		if err != nil {
			panic("cpu: packing " + w.Name + ": " + err.Error())
		}
		if rec == nil && k.pk().ints[typ] != nil {
			rec = k.quantRecords(xs[:n*K], n, p)
		}
		var r []byte
		if rec != nil {
			rs := len(rec) / n
			r = rec[start[g]*rs : start[g+1]*rs]
		}
		gm.mms = append(gm.mms, pmm{k: k})
		gm.first = append(gm.first, tasks)
		tasks += gm.mms[len(gm.mms)-1].plan(p, d[start[g]*R:start[g+1]*R], xs[start[g]*K:start[g+1]*K], r, m, k.pool.workers)
	}
	k.pool.runSized(tasks, n*R*K, gm)
	clear(gm.mms)
	return true
}

func (gm *grouped) task(worker, i int) {
	e := sort.SearchInts(gm.first, i+1) - 1
	gm.mms[e].task(worker, i-gm.first[e])
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
