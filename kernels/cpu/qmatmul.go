package cpu

import (
	"jspark/kernels"
	"jspark/kernels/quant"
)

// The unpacked quantized product (the portable path: AVX2 and AVX-512 run
// packed.go; its AVX2 tiles, qkernAVX2, are no longer chosen), llama.cpp's way: each token's activations are quantized
// once per call to 8-bit blocks of 32 (quant.QuantizeQ8), then every
// output is an integer dot product per block against the weight rows as
// the file encodes them, scaled to float and accumulated over K in one
// fixed order: the packed kernels' (qdot.go), so the portable path gives
// AVX-512's bits. (The unused qkernAVX2 tiles keep an older order, 8 lanes
// summed at the end.) Tasks are
// (row block × token block) as for the float product; inside one, groups
// of up to qRows weight rows stay in L1 while the block's tokens pass over
// them one at a time; a lone token runs the block's rows in one call.
//
// NOTE: every batch size takes this path for these types (decode and
// prefill alike), and an output's arithmetic depends only on K and the
// type, so results stay batch-invariant. Activations lose precision to 8
// bits, as in llama.cpp: against the float64 reference a product is now
// within about 1e-2 relative instead of 1e-6.

// qRows is the most weight rows a tile takes (decodeRows picks for one
// token), qTokens the most tokens (AVX2 has registers for one).
const (
	qRows   = 4
	qTokens = 1
)

// decodeRows is the rows of a one-token tile, by type (at most qRows),
// measured with the former VNNI tiles on an AVX-512 EPYC streaming
// weights from DRAM: fewer concurrent row streams suit the hardware
// prefetcher better than more, and Q8_0's light blocks ran fastest one
// row at a time (22 GB/s against 8 GB/s for 12 rows).
// The later types copy their nearest kin's (not measured yet: issue 28).
var decodeRows = map[quant.Type]int{quant.Q8_0: 1, quant.Q4_0: 1, quant.Q4_K: 4, quant.Q6_K: 1,
	quant.Q4_1: 1, quant.Q5_0: 1, quant.Q5_1: 1, quant.IQ4_NL: 1, quant.MXFP4: 1,
	quant.Q5_K: 4, quant.IQ4_XS: 4, quant.Q2_K: 1, quant.Q3_K: 1}

// qkernFn computes a tile of T tokens × R rows (the table's indices):
// dst[t·ds + r] = row r · token t, row r at w + r·ws bytes, token t's
// quants at x + t·xst, its nb scales and sums at xd, xs + t·xst/8 bytes.
// groups ≥ 1 such tiles run one after another down the rows (w and dst
// advance by R rows).
type qkernFn func(w *byte, ws int, x *int8, xd *float32, xs *int32, xst int, nb int, dst *float32, ds int, groups int)

// qtiles holds the kernels of one type and ISA by [tokens][rows].
type qtiles [qTokens + 1][qRows + 1]qkernFn

// qmm is one quantized product in flight.
type qmm struct {
	k       *Kernels
	dst, x  []float32
	w       *kernels.Matrix
	wb      []byte
	n       int
	rblocks int
	rows    int  // weight rows per task
	quant   bool // the tasks quantize x (phase 1) rather than multiply
}

// qscratch holds the quantized activations of one call, grown on demand.
type qscratch struct {
	q   []int8
	d   []float32
	s   []int32
	rec []byte // activation records of the packed kernels (packed.go)
}

func (q *qscratch) ensure(elems int) {
	if len(q.q) < elems {
		q.q = make([]int8, elems)
		q.d = make([]float32, elems/quant.Q8Block)
		q.s = make([]int32, elems/quant.Q8Block)
	}
}

func (k *Kernels) qmatmul(dst, x *kernels.Buffer, n int, w *kernels.Matrix) {
	K := w.Cols
	k.xq.ensure(n * K)
	mm := &k.qm
	rows := taskRows(w.Rows, n, k.pool.workers)
	*mm = qmm{k: k, dst: kernels.HostF32(dst), x: kernels.HostF32(x), w: w, wb: kernels.HostBytes(w.Buf), n: n,
		rows: rows, rblocks: (w.Rows + rows - 1) / rows, quant: true}
	k.pool.runSized(n, n*K*8, mm)
	mm.quant = false
	tblocks := (n + tokBlock - 1) / tokBlock
	k.pool.runSized(mm.rblocks*tblocks, n*w.Rows*K, mm)
	mm.dst, mm.x, mm.wb, mm.w = nil, nil, nil, nil
}

func (mm *qmm) task(worker, i int) {
	w, xq := mm.w, &mm.k.xq
	K := w.Cols
	nb := K / quant.Q8Block
	if mm.quant {
		quantizeQ8(mm.k.isa, mm.x[i*K:(i+1)*K], xq.q[i*K:(i+1)*K], xq.d[i*nb:(i+1)*nb], xq.s[i*nb:(i+1)*nb])
		return
	}
	rb, tb := i%mm.rblocks, i/mm.rblocks
	r0, r1 := rb*mm.rows, min(w.Rows, (rb+1)*mm.rows)
	t0, t1 := tb*tokBlock, min(mm.n, (tb+1)*tokBlock)
	rowBytes := w.Type.RowBytes(K)
	kern := qkernels(mm.k.isa, w.Type)
	if kern == nil {
		dot := qdotGo[w.Type]
		for r := r0; r < r1; r++ {
			wr := mm.wb[r*rowBytes : (r+1)*rowBytes]
			for t := t0; t < t1; t++ {
				mm.dst[t*w.Rows+r] = dot(wr, xq.q[t*K:(t+1)*K], xq.d[t*nb:(t+1)*nb], xq.s[t*nb:(t+1)*nb])
			}
		}
		return
	}
	call := func(r, rn, t, tn, groups int) {
		kern[tn][rn](&mm.wb[r*rowBytes], rowBytes, &xq.q[t*K], &xq.d[t*nb], &xq.s[t*nb], K, nb, &mm.dst[t*w.Rows+r], w.Rows, groups)
	}
	if t1-t0 == 1 {
		// One token: the block's rows in as few calls as the tile allows.
		rn := decodeRows[w.Type]
		if g := (r1 - r0) / rn; g > 0 {
			call(r0, rn, t0, 1, g)
		}
		if r := r0 + (r1-r0)/rn*rn; r < r1 {
			call(r, r1-r, t0, 1, 1)
		}
		return
	}
	for r := r0; r < r1; r += qRows {
		rn := min(qRows, r1-r)
		for t := t0; t < t1; t++ {
			call(r, rn, t, 1, 1)
		}
	}
}

// quantizeQ8 is quant.QuantizeQ8, in assembly on AVX-512 (the same bits).
func quantizeQ8(i isa, x []float32, q []int8, d []float32, s []int32) {
	if i != isaAVX512 || len(d) == 0 {
		quant.QuantizeQ8(x, q, d, s)
		return
	}
	_, _, _ = q[len(x)-1], d[len(x)/quant.Q8Block-1], s[len(x)/quant.Q8Block-1]
	quant512Q8(&x[0], &q[0], &d[0], &s[0], len(x)/quant.Q8Block)
}
