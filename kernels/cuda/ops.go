//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"

	"jspark/kernels"
	"jspark/kernels/quant"
)

// Launch shapes; they match the #defines of the .cu files.
const (
	mmWarps  = 4   // matmul.cu WARPS: warps per block (an embedded token a warp)
	mmRows1  = 4   // rows a warp of matmul_*_1
	mmRows8  = 2   // rows a warp of matmul_*_8
	mmTile   = 8   // the token tile of matmul_*_8
	rowWarps = 4   // rmsnorm: rows per block
	attWarps = 4   // attention.cu AW: (token, head) pairs per block
	maxHead  = 256 // attention.cu MAXD
	attSeg   = 256 // attention.cu SEG: positions a segment
	flat     = 256 // threads per block of the element-wise kernels
	rowBlock = 256 // elementwise.cu RB: argmax and softmax
)

// MatMul sets dst (n, w.Rows) = x (n, w.Cols) · wᵀ. One token runs the
// single-token kernel (4 rows a warp); more run in tiles of 8 tokens (2 rows
// a warp). Both reduce each element in the same order, so a token's row has
// the same bits either way.
func (d *Device) MatMul(dst, x *kernels.Buffer, n int, w *kernels.Matrix) {
	if n == 0 {
		return
	}
	if x.Type != quant.F32 || dst.Type != quant.F32 {
		panic(fmt.Sprintf("cuda: MatMul of %v into %v: want F32", x.Type, dst.Type))
	}
	d.matmulAt(ptr(dst), ptr(x), n, w)
}

// matmulAt is MatMul of the n rows of x at device address x into those at
// dst (a product over some rows of a buffer: MatMulGroups).
func (d *Device) matmulAt(dst, x uint64, n int, w *kernels.Matrix) {
	fns := d.weightFns("MatMul", w)
	f, tile, rows, name := fns.matmul8, mmTile, mmRows8, "matmul_8"
	if n == 1 {
		f, tile, rows, name = fns.matmul1, 1, mmRows1, "matmul_1"
	}
	d.launchFn(name, f, ceil(w.Rows, mmWarps*rows), ceil(n, tile), 32*mmWarps,
		dst, x, ptr(w.Buf), i32(n), i32(w.Rows), i32(w.Cols), i32(w.Type.RowBytes(w.Cols)))
}

// weightFns returns w's kernels, or panics naming the op and the type.
func (d *Device) weightFns(op string, w *kernels.Matrix) weightFns {
	fns, ok := d.weight[w.Type]
	if !ok {
		panic(fmt.Sprintf("cuda: %s of %s: no kernels for %v", op, w.Name, w.Type))
	}
	if w.Buf == nil || w.Buf.Type != w.Type {
		panic(fmt.Sprintf("cuda: %s of %s: weights not uploaded as %v", op, w.Name, w.Type))
	}
	if w.Type.BlockElems() > 1 && w.Cols%32 != 0 {
		panic(fmt.Sprintf("cuda: %s of %s: %d columns of %v", op, w.Name, w.Cols, w.Type))
	}
	return fns
}

func (d *Device) Embed(dst *kernels.Buffer, w *kernels.Matrix, ids *kernels.Buffer, n int) {
	fns := d.weightFns("Embed", w)
	d.launchFn("embed", fns.embed, ceil(n, mmWarps), 1, 32*mmWarps,
		ptr(dst), ptr(w.Buf), ptr(ids), i32(n), i32(w.Cols), i32(w.Type.RowBytes(w.Cols)))
}

func (d *Device) RMSNorm(dst, x, weight *kernels.Buffer, n, dim int, eps float32) {
	d.launch("rmsnorm", ceil(n, rowWarps), 1, 32*rowWarps, ptr(dst), ptr(x), ptr(weight), i32(n), i32(dim), f32(eps))
}

// RoPE: the per-pair factor is computed here exactly as ref computes it, in
// float64 rounded to float32, so the kernel's theta has ref's bits.
func (d *Device) RoPE(x, pos *kernels.Buffer, n, heads, headDim int, r kernels.Rope) {
	scale := float32(math.Pow(float64(r.Base), -2/float64(r.Dim)))
	nx := 0
	if r.Neox {
		nx = 1
	}
	d.launch("rope", ceil(n*heads*(r.Dim/2), flat), 1, flat,
		ptr(x), ptr(pos), i32(n), i32(heads), i32(headDim), i32(r.Dim), f32(scale), i32(nx),
		f32(r.FreqScale), f32(r.ExtFactor), f32(r.Mscale), f32(r.Corr[0]), f32(r.Corr[1]))
}

// Attend runs attention in two kernels: one warp per (token, head, segment
// of attSeg positions) writes partial softmax sums into the device's
// scratch, then one warp per (token, head) merges them in segment order.
// Pairs go in groups that fit attScratch floats; grouping changes no bit.
func (d *Device) Attend(a *kernels.Attention) {
	name := "attend_f32"
	switch {
	case a.K.Type == quant.F16 && a.V.Type == quant.F16:
		name = "attend_f16"
	case a.K.Type != quant.F32 || a.V.Type != quant.F32:
		panic(fmt.Sprintf("cuda: Attend over a %v/%v pool: want F32 or F16", a.K.Type, a.V.Type))
	}
	if a.HeadDim > maxHead {
		panic(fmt.Sprintf("cuda: Attend with head dim %d: the kernel holds at most %d", a.HeadDim, maxHead))
	}
	if a.KVHeads <= 0 || a.Heads%a.KVHeads != 0 {
		panic(fmt.Sprintf("cuda: Attend with %d heads over %d KV heads", a.Heads, a.KVHeads))
	}
	pairs := a.N * a.Heads
	if pairs == 0 {
		return
	}
	var sinks uint64 // none: a null pointer
	if a.Sinks != nil {
		sinks = ptr(a.Sinks)
	}
	segs := a.MaxPos/attSeg + 1
	per := segs * (a.HeadDim + 2) // scratch floats a pair
	group := min(pairs, max(1, attScratch/per))
	part := d.scratch(group * per)
	for p0 := 0; p0 < pairs; p0 += group {
		n := min(group, pairs-p0)
		d.launch(name, ceil(n, attWarps), segs, 32*attWarps,
			part, ptr(a.Q), ptr(a.K), ptr(a.V), ptr(a.Pos), ptr(a.Seq), ptr(a.Table),
			i32(a.TableStride), i32(a.BlockSize), i32(a.Heads), i32(a.KVHeads), i32(a.HeadDim), f32(a.Scale),
			i32(p0), i32(n), i32(segs), i32(a.Window))
		d.launch("attend_merge", ceil(n, attWarps), 1, 32*attWarps,
			ptr(a.Out), part, ptr(a.Pos), i32(a.Heads), i32(a.HeadDim), i32(p0), i32(n), i32(segs), i32(a.Window), sinks)
	}
}

// attScratch bounds the attention scratch (floats; 64 MiB): a long prefill
// runs its (token, head) pairs in groups that fit. A variable so that tests
// can force small groups.
var attScratch = 16 << 20

// scratch returns the device's attention scratch, grown to n floats. Out
// of memory is the device's failure (Err): the launches that would use the
// scratch then do nothing.
func (d *Device) scratch(n int) uint64 {
	if n > d.scratchLen {
		if d.scratchLen > 0 {
			d.rt.free(d.scratchPtr)
			d.scratchPtr, d.scratchLen = 0, 0
		}
		p, err := d.rt.alloc(4 * n)
		if err != nil {
			d.fail(fmt.Errorf("cuda: %s: attention scratch of %d floats: %w", d.rt.name(), n, err))
			return 0
		}
		d.scratchPtr, d.scratchLen = p, n
	}
	return d.scratchPtr
}

func (d *Device) SiLUMul(gate, up *kernels.Buffer, n int) {
	d.launch("silu_mul", ceil(n, flat), 1, flat, ptr(gate), ptr(up), i64(n))
}

func (d *Device) Add(dst, src *kernels.Buffer, n int) {
	d.launch("add", ceil(n, flat), 1, flat, ptr(dst), ptr(src), i64(n))
}

func (d *Device) AddBias(x, bias *kernels.Buffer, n, dim int) {
	d.launch("add_bias", ceil(n*dim, flat), 1, flat, ptr(x), ptr(bias), i64(n*dim), i32(dim))
}

func (d *Device) Gather(dst, src, rows *kernels.Buffer, n, width int) {
	d.launch("gather", ceil(n*width, flat), 1, flat, ptr(dst), ptr(src), ptr(rows), i32(n), i32(width))
}

func (d *Device) Scatter(dst, src, slots *kernels.Buffer, n, width int) {
	name := "scatter_f32"
	switch dst.Type {
	case quant.F32:
	case quant.F16:
		name = "scatter_f16"
	default:
		panic(fmt.Sprintf("cuda: Scatter into %v: want F32 or F16", dst.Type))
	}
	d.launch(name, ceil(n*width, flat), 1, flat, ptr(dst), ptr(src), ptr(slots), i32(n), i32(width))
}

// Argmax sets ids[i] (I32, n) to the index of the largest of row i of
// logits (F32, n × width), the lowest index on a tie: greedy sampling on the
// device, so that only n ids come back instead of n × width logits.
func (d *Device) Argmax(ids, logits *kernels.Buffer, n, width int) {
	d.launch("argmax", n, 1, rowBlock, ptr(ids), ptr(logits), i32(width))
}

// Softmax turns each of the n width-long rows of x into probabilities in
// place (exp(x-max), summed in float64).
func (d *Device) Softmax(x *kernels.Buffer, n, width int) {
	d.launch("softmax", n, 1, rowBlock, ptr(x), i32(width))
}
