// Package cpu is the multi-threaded CPU implementation of kernels.Kernels.
// Matrix products split weight rows across goroutines and tile the tokens;
// attention splits (token, head) pairs. Each output element is computed by
// one goroutine in a fixed order, which keeps results batch-invariant.
package cpu

import (
	"math"
	"runtime"
	"sync"

	"jspark/kernels"
	"jspark/kernels/quant"
	"jspark/kernels/ref"
)

// Kernels is the CPU implementation. The zero value is not usable; call New.
type Kernels struct {
	ref.Kernels // element-wise ops: cheap, memory-bound, shared with ref
	pool        *pool
	scratch     []scratch
	mu          sync.Mutex // one parallel kernel at a time owns the scratch
}

type scratch struct {
	row    []float32
	scores []float32
}

var _ kernels.Kernels = (*Kernels)(nil)

// New returns CPU kernels on threads goroutines (0 means GOMAXPROCS).
func New(threads int) *Kernels {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	return &Kernels{pool: newPool(threads), scratch: make([]scratch, threads)}
}

// Threads is the number of goroutines used.
func (k *Kernels) Threads() int { return k.pool.workers }

const (
	tokenTile = 16 // tokens per tile: a tile of activations stays in L1/L2
	rowBlock  = 8  // weight rows per scheduled task
)

func (k *Kernels) MatMul(dst, x []float32, n int, w *kernels.Matrix) {
	k.mu.Lock()
	defer k.mu.Unlock()
	blocks := (w.Rows + rowBlock - 1) / rowBlock
	tiles := (n + tokenTile - 1) / tokenTile
	k.pool.runSized(blocks*tiles, n*w.Rows*w.Cols, func(worker, task int) {
		tile, blk := task/blocks, task%blocks
		t0, t1 := tile*tokenTile, min(n, (tile+1)*tokenTile)
		r0, r1 := blk*rowBlock, min(w.Rows, (blk+1)*rowBlock)
		s := &k.scratch[worker]
		for r := r0; r < r1; r++ {
			var row []float32
			if w.Type == quant.F32 {
				row = quant.F32s(w.Row(r))
			} else {
				if cap(s.row) < w.Cols {
					s.row = make([]float32, w.Cols)
				}
				row = s.row[:w.Cols]
				quant.Dequantize(w.Type, w.Row(r), row)
			}
			for t := t0; t < t1; t++ {
				dst[t*w.Rows+r] = quant.DotChunked(row, x[t*w.Cols:(t+1)*w.Cols])
			}
		}
	})
}

func (k *Kernels) Attend(a *kernels.Attention) {
	k.mu.Lock()
	defer k.mu.Unlock()
	dim := a.Heads * a.HeadDim
	kvDim := a.KVHeads * a.HeadDim
	group := a.Heads / a.KVHeads
	work := a.N * a.Heads * a.HeadDim * 2 * (a.Pos[a.N-1] + 1)
	k.pool.runSized(a.N*a.Heads, work, func(worker, task int) {
		i, h := task/a.Heads, task%a.Heads
		q := a.Q[i*dim+h*a.HeadDim:][:a.HeadDim]
		out := a.Out[i*dim+h*a.HeadDim:][:a.HeadDim]
		kvOff := (h / group) * a.HeadDim
		n := a.Pos[i] + 1
		s := &k.scratch[worker]
		if cap(s.scores) < n {
			s.scores = make([]float32, n+n/2)
		}
		scores := s.scores[:n]
		table := a.Table[i]
		bs := a.BlockSize
		maxS := float32(math.Inf(-1))
		for p := 0; p < n; p++ {
			slot := int(table[p/bs])*bs + p%bs
			sc := quant.DotF32(q, a.K[slot*kvDim+kvOff:][:a.HeadDim]) * a.Scale
			scores[p] = sc
			maxS = max(maxS, sc)
		}
		var sum float32
		for p := range scores {
			e := float32(math.Exp(float64(scores[p] - maxS)))
			scores[p] = e
			sum += e
		}
		clear(out)
		inv := 1 / sum
		for p := 0; p < n; p++ {
			slot := int(table[p/bs])*bs + p%bs
			wgt := scores[p] * inv
			v := a.V[slot*kvDim+kvOff:][:a.HeadDim]
			for d := range out {
				out[d] += wgt * v[d]
			}
		}
	})
}
