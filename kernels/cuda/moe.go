//go:build cuda || cudaemu

package cuda

import (
	"jspark/kernels"
)

// The mixture-of-experts operations (moe.cu, and matmul.cu's products over
// groups of rows).

// MatMulGroups runs one product per group that has rows, over the group's
// rows of x and dst in place: a row's bits are those of a product on it
// alone (MatMul's kernels reduce each element in one fixed order).
func (d *Device) MatMulGroups(dst, x *kernels.Buffer, ws []*kernels.Matrix, start []int) {
	for g, w := range ws {
		n := start[g+1] - start[g]
		if n <= 0 {
			continue
		}
		d.matmulAt(ptr(dst)+uint64(4*start[g]*w.Rows), ptr(x)+uint64(4*start[g]*w.Cols), n, w)
	}
}

func (d *Device) SwiGLUOAI(gate, up *kernels.Buffer, n int, alpha, limit float32) {
	d.launch("swiglu_oai", ceil(n, flat), 1, flat, ptr(gate), ptr(up), i64(n), f32(alpha), f32(limit))
}

func (d *Device) WeightedSum(dst, src, rows, weights *kernels.Buffer, n, k, width int) {
	d.launch("weighted_sum", ceil(n*width, flat), 1, flat, ptr(dst), ptr(src), ptr(rows), ptr(weights), i32(n), i32(k), i32(width))
}
