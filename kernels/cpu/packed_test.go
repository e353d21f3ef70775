package cpu

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"jspark/kernels"
	"jspark/kernels/quant"
)

func f16At2(b []byte) float32 { return quant.F16ToF32(binary.LittleEndian.Uint16(b)) }

// packedSpec computes one output of a packed product by the arithmetic
// packed.go's doc states, from the row as the file encodes it and the
// token's activations: x for float types, else x quantized by QuantizeQ8.
func packedSpec(t quant.Type, row []byte, x []float32) float32 {
	K := len(x)
	var out float32
	switch t {
	case quant.F32, quant.F16, quant.BF16:
		w := make([]float32, K)
		quant.Dequantize(t, row, w)
		for k := range x {
			out = fma32(x[k], w[k], out)
		}
		return out
	}
	q := make([]int8, K)
	d := make([]float32, K/32)
	s := make([]int32, K/32)
	quant.QuantizeQ8(x, q, d, s)
	dot := func(w []int32, from, to int) int32 { // Σ w·q over elements [from, to)
		var i int32
		for e := from; e < to; e++ {
			i += w[e-from] * int32(q[e])
		}
		return i
	}
	switch t {
	case quant.Q8_0, quant.Q4_0:
		size := map[quant.Type]int{quant.Q8_0: 34, quant.Q4_0: 18}[t]
		for b := 0; b < K/32; b++ {
			blk := row[size*b:]
			w := make([]int32, 32)
			for e := range w {
				if t == quant.Q8_0 {
					w[e] = int32(int8(blk[2+e]))
				} else {
					w[e] = int32(blk[2+e%16]>>(4*(e/16))&15) - 8
				}
			}
			out = fma32(float32(dot(w, 32*b, 32*b+32)), f16At2(blk)*d[b], out)
		}
	case quant.Q4_K:
		for sb := 0; sb < K/256; sb++ {
			blk := row[144*sb:]
			dd, dmin := f16At2(blk), f16At2(blk[2:])
			sc, m := scalesK4(blk[4:16])
			for j := 0; j < 8; j++ {
				b := 8*sb + j
				w := make([]int32, 32)
				for e := range w {
					w[e] = int32(blk[16+32*(j/2)+e] >> (4 * (j % 2)) & 15)
				}
				out = fma32(float32(dot(w, 32*b, 32*b+32)), dd*float32(sc[j])*d[b], out)
				out = fma32(-(dmin * float32(m[j])), d[b]*float32(s[b]), out)
			}
		}
	case quant.Q6_K:
		for sb := 0; sb < K/256; sb++ {
			blk := row[210*sb:]
			u := q6Values(blk)
			dd := f16At2(blk[208:])
			for b := 0; b < 8; b++ {
				var i int32
				for h := 0; h < 2; h++ {
					from := 256*sb + 32*b + 16*h
					w := make([]int32, 16)
					var sum int32
					for e := range w {
						w[e] = int32(u[32*b+16*h+e])
						sum += int32(q[from+e])
					}
					i += int32(int8(blk[192+2*b+h])) * (dot(w, from, from+16) - 32*sum)
				}
				out = fma32(float32(i), dd*d[8*sb+b], out)
			}
		}
	default:
		return packedSpecMore(t, row, q, d, s)
	}
	return out
}

// packedSpecMore is packedSpec for the types of packed_more.go, from the
// codes and scales quant reads; v is a code's integer value.
func packedSpecMore(t quant.Type, row []byte, q []int8, d []float32, s []int32) float32 {
	var out float32
	var u [256]uint8
	be, bb := t.BlockElems(), t.BlockBytes()
	dot := func(b, from, to int) int32 { // Σ value·q over [from, to) of block b
		var i int32
		for e := from; e < to; e++ {
			i += quant.Value(t, u[32*b%be+e]) * int32(q[32*b+e])
		}
		return i
	}
	half := func(b, h int) int32 { // Σq over a block's half
		var i int32
		for e := 16 * h; e < 16*h+16; e++ {
			i += int32(q[32*b+e])
		}
		return i
	}
	for k := 0; k < len(q)/be; k++ {
		blk := row[bb*k : bb*(k+1)]
		quant.Codes(t, blk, u[:])
		switch t {
		case quant.Q4_1, quant.Q5_1, quant.Q5_0, quant.IQ4_NL, quant.MXFP4:
			sc := f16At2(blk)
			if t == quant.MXFP4 {
				sc = quant.E8M0Half(blk[0])
			}
			out = fma32(float32(dot(k, 0, 32)), sc*d[k], out)
			if t == quant.Q4_1 || t == quant.Q5_1 {
				out = fma32(f16At2(blk[2:]), d[k]*float32(s[k]), out)
			}
		case quant.Q5_K:
			dd, dmin := f16At2(blk), f16At2(blk[2:])
			sc, m := quant.ScalesK4(blk[4:16])
			for j := 0; j < 8; j++ {
				b := 8*k + j
				out = fma32(float32(dot(b, 0, 32)), dd*float32(sc[j])*d[b], out)
				out = fma32(-(dmin * float32(m[j])), d[b]*float32(s[b]), out)
			}
		case quant.IQ4_XS:
			dd := f16At2(blk)
			sc := quant.ScalesIQ4XS(blk)
			for j := 0; j < 8; j++ {
				b := 8*k + j
				out = fma32(float32(dot(b, 0, 32)), dd*float32(sc[j])*d[b], out)
			}
		case quant.Q3_K:
			dd := f16At2(blk[108:])
			sc := quant.ScalesQ3K(blk[96:108])
			for j := 0; j < 8; j++ {
				b := 8*k + j
				i := int32(sc[2*j])*dot(b, 0, 16) + int32(sc[2*j+1])*dot(b, 16, 32)
				out = fma32(float32(i), dd*d[b], out)
			}
		case quant.Q2_K:
			dd, dmin := f16At2(blk[80:]), f16At2(blk[82:])
			for j := 0; j < 8; j++ {
				b := 8*k + j
				a, c := blk[2*j], blk[2*j+1]
				i := int32(a&15)*dot(b, 0, 16) + int32(c&15)*dot(b, 16, 32)
				out = fma32(float32(i), dd*d[b], out)
				im := int32(a>>4)*half(b, 0) + int32(c>>4)*half(b, 1)
				out = fma32(float32(im), -(dmin * d[b]), out)
			}
		}
	}
	return out
}

// TestPackedMatchesSpec: the packed kernels compute, bit for bit, what
// packed.go's doc says, in every tile shape: one token (tiles of up to 8
// groups, and the streams tiles' runs of groups) and batches (full and
// partial tiles), with a partial last group.
func TestPackedMatchesSpec(t *testing.T) {
	ran := false
	for _, is := range isas() {
		k := newISA(3, is)
		r := rand.New(rand.NewPCG(9, 9))
		for _, typ := range quant.WeightTypes() {
			if !k.usePacked(typ) {
				continue
			}
			ran = true
			cols := []int{512}
			if typ.BlockElems() == 1 {
				cols = append(cols, 7, 37)
			}
			for _, c := range cols {
				// batches of stripMin tokens and more run over strips
				// (strip.go) where the type has them: a task's blocks of
				// tokens and tiles, several tasks
				shapes := []struct{ rows, n int }{{45, 1}, {45, 2}, {45, 7}, {45, 13}, {1000, 1}, {300, 9}, {45, 67}, {300, 20}}
				if k.pk().streams[typ] != nil {
					// tasks of 2 runs of streamGroups groups, and a tail
					shapes = append(shapes, struct{ rows, n int }{(3*8*2*k.pk().streamGroups+3)*groupRows - 5, 1})
				}
				for _, shape := range shapes {
					t.Run(fmt.Sprintf("%v/%v/k%d/r%d/n%d", is, typ, c, shape.rows, shape.n), func(t *testing.T) {
						w := matrix(r, typ, shape.rows, c)
						x := randVec(r, shape.n*c)
						got := make([]float32, shape.n*w.Rows)
						k.MatMul(f32(got), f32(x), shape.n, w)
						rb := typ.RowBytes(c)
						for tok := 0; tok < shape.n; tok++ {
							for row := 0; row < w.Rows; row++ {
								want := packedSpec(typ, w.Data[row*rb:(row+1)*rb], x[tok*c:(tok+1)*c])
								if g := got[tok*w.Rows+row]; g != want {
									t.Fatalf("token %d row %d: %v, the spec says %v", tok, row, g, want)
								}
							}
						}
					})
				}
			}
		}
	}
	if !ran {
		t.Skip("no AVX2 or AVX-512 here: the packed kernels do not run")
	}
}

// TestPackedLeavesOtherRowsAlone: a product writes its rows and no others
// (the last group's absent rows are masked), with outputs laid out in a
// wider buffer than the product needs.
func TestPackedLeavesOtherRowsAlone(t *testing.T) {
	k := New(2)
	r := rand.New(rand.NewPCG(10, 10))
	for _, typ := range []quant.Type{quant.F32, quant.Q8_0} {
		w := matrix(r, typ, 21, 64)
		const n = 3
		x := randVec(r, n*64)
		dst := make([]float32, n*w.Rows+40)
		for i := range dst {
			dst[i] = 7
		}
		k.MatMul(kernels.NewHostBuffer(quant.F32, len(dst), kernels.F32Bytes(dst)), f32(x), n, w)
		for i := n * w.Rows; i < len(dst); i++ {
			if dst[i] != 7 {
				t.Fatalf("%v: element %d past the product's %d outputs was written (%v)", typ, i, n*w.Rows, dst[i])
			}
		}
	}
}
