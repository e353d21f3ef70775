package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Dequantize decodes len(dst) elements of type t from src into dst.
// len(dst) must be a whole number of blocks and src at least RowBytes(len(dst)).
func Dequantize(t Type, src []byte, dst []float32) {
	n := len(dst)
	switch t {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = f16(src[2*i:])
		}
	case BF16:
		for i := range dst {
			dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case Q8_0:
		for b := 0; b < n/32; b++ {
			blk := src[b*34 : b*34+34]
			d := f16(blk)
			out := dst[b*32 : b*32+32]
			for i := range out {
				out[i] = d * float32(int8(blk[2+i]))
			}
		}
	case Q4_0:
		for b := 0; b < n/32; b++ {
			blk := src[b*18 : b*18+18]
			d := f16(blk)
			qs := blk[2:]
			out := dst[b*32 : b*32+32]
			for j := 0; j < 16; j++ {
				out[j] = d * float32(int(qs[j]&0xf)-8)
				out[j+16] = d * float32(int(qs[j]>>4)-8)
			}
		}
	case Q4_K:
		for b := 0; b < n/QK_K; b++ {
			dequantQ4K(src[b*144:b*144+144], dst[b*QK_K:b*QK_K+QK_K])
		}
	case Q6_K:
		for b := 0; b < n/QK_K; b++ {
			dequantQ6K(src[b*210:b*210+210], dst[b*QK_K:b*QK_K+QK_K])
		}
	case Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q5_K, IQ4_XS:
		be, bb := t.BlockElems(), t.BlockBytes()
		for b := 0; b < n/be; b++ {
			dequantCodes(t, src[b*bb:(b+1)*bb], dst[b*be:(b+1)*be])
		}
	default:
		panic(fmt.Sprintf("quant: dequantize %v", t))
	}
}

// scaleMinK4 unpacks the j-th 6-bit scale and min of a Q4_K block.
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// Q4_K block: d f16, dmin f16, scales[12] (8 six-bit scale/min pairs), qs[128].
func dequantQ4K(blk []byte, out []float32) {
	d := f16(blk[0:])
	dmin := f16(blk[2:])
	scales := blk[4:16]
	q := blk[16:]
	is := 0
	for j := 0; j < QK_K; j += 64 {
		sc, m := scaleMinK4(is, scales)
		d1, m1 := d*float32(sc), dmin*float32(m)
		sc, m = scaleMinK4(is+1, scales)
		d2, m2 := d*float32(sc), dmin*float32(m)
		for l := 0; l < 32; l++ {
			out[j+l] = d1*float32(q[l]&0xf) - m1
			out[j+32+l] = d2*float32(q[l]>>4) - m2
		}
		q = q[32:]
		is += 2
	}
}

// Q6_K block: ql[128] low nibbles, qh[64] high 2-bit pairs, scales[16] int8, d f16.
func dequantQ6K(blk []byte, out []float32) {
	ql := blk[0:128]
	qh := blk[128:192]
	sc := blk[192:208]
	d := f16(blk[208:])
	for n := 0; n < QK_K; n += 128 {
		for l := 0; l < 32; l++ {
			is := l / 16
			q1 := int(ql[l]&0xf|(qh[l]>>0&3)<<4) - 32
			q2 := int(ql[l+32]&0xf|(qh[l]>>2&3)<<4) - 32
			q3 := int(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
			q4 := int(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
			out[n+l] = d * float32(int8(sc[is])) * float32(q1)
			out[n+l+32] = d * float32(int8(sc[is+2])) * float32(q2)
			out[n+l+64] = d * float32(int8(sc[is+4])) * float32(q3)
			out[n+l+96] = d * float32(int8(sc[is+6])) * float32(q4)
		}
		ql = ql[64:]
		qh = qh[32:]
		sc = sc[8:]
	}
}

// dequantCodes decodes one block of the types that codes.go reads, as
// ggml's dequantize_row_* computes each element: scale × value, minus the
// min term where the type has one.
func dequantCodes(t Type, blk []byte, out []float32) {
	var u [QK_K]uint8
	Codes(t, blk, u[:])
	val := func(e int) float32 { return float32(Value(t, u[e])) }
	switch t {
	case Q5_0, IQ4_NL:
		d := HalfAt(blk)
		for e := range out {
			out[e] = val(e) * d
		}
	case MXFP4:
		d := E8M0Half(blk[0])
		for e := range out {
			out[e] = d * val(e)
		}
	case Q4_1, Q5_1:
		d, m := HalfAt(blk), HalfAt(blk[2:])
		for e := range out {
			out[e] = val(e)*d + m
		}
	case Q2_K:
		d, dmin := HalfAt(blk[80:]), HalfAt(blk[82:])
		for e := range out {
			sc := blk[e/16]
			out[e] = d*float32(sc&15)*val(e) - dmin*float32(sc>>4)
		}
	case Q3_K:
		d := HalfAt(blk[108:])
		sc := ScalesQ3K(blk[96:108])
		for e := range out {
			out[e] = d * float32(sc[e/16]) * val(e)
		}
	case Q5_K:
		d, dmin := HalfAt(blk), HalfAt(blk[2:])
		sc, m := ScalesK4(blk[4:16])
		for e := range out {
			j := e / 32
			out[e] = d*float32(sc[j])*val(e) - dmin*float32(m[j])
		}
	case IQ4_XS:
		d := HalfAt(blk)
		sc := ScalesIQ4XS(blk)
		for e := range out {
			out[e] = d * float32(sc[e/32]) * val(e)
		}
	}
}
