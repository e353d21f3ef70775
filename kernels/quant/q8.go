package quant

import "math"

// Q8Block is the block length of quantized activations (Q8_0's layout):
// every weight type's blocks and sub-blocks are whole numbers of it.
const Q8Block = 32

// QuantizeQ8 quantizes activations for integer dot products, as llama.cpp's
// quantize_row_q8_0 does: each block of 32 becomes q = x·(1/d) rounded to
// nearest even (what VCVTPS2DQ does) in -127..127, with d = amax/127 (q[i] for x[i], d[b] for block b), and s[b]
// is the block's Σq, which the kernels use for the weights' offsets (Q4_0's
// -8, Q6_K's -32, Q4_K's mins). len(x) must be a multiple of 32.
func QuantizeQ8(x []float32, q []int8, d []float32, s []int32) {
	nb := len(x) / Q8Block
	q, d, s = q[:nb*Q8Block], d[:nb], s[:nb]
	for b := range nb {
		xb := x[b*Q8Block : (b+1)*Q8Block]
		var amax float32
		for _, v := range xb {
			amax = max(amax, abs32(v))
		}
		db := amax / 127
		var id float32
		if db != 0 {
			id = 1 / db
		}
		var sum int32
		qb := q[b*Q8Block : (b+1)*Q8Block]
		for i, v := range xb {
			r := int8(math.RoundToEven(float64(v * id)))
			qb[i] = r
			sum += int32(r)
		}
		d[b], s[b] = db, sum
	}
}

// Q8Error bounds the error QuantizeQ8 makes on one element of a block whose
// largest magnitude is amax: half a step.
func Q8Error(amax float32) float32 { return amax / 254 }
