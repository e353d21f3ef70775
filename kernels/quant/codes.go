package quant

import (
	"encoding/binary"
	"math"
)

// Each quantized block holds, per element, an unsigned code of a few bits
// (Codes) whose integer weight is Value(t, code), and per block or
// sub-block scales (the accessors below). Dequantize, the portable integer
// dots and the packers of kernels/cpu all read a layout through these, so
// a layout is walked in one place: ggml-common.h's structs and
// ggml-quants.c's dequantize_row_* loops, written out again here.

// KValuesIQ4NL is the non-linear 4-bit grid of IQ4_NL and IQ4_XS.
var KValuesIQ4NL = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// KValuesMXFP4 is FP4 (E2M1) doubled, so that it is integral; MXFP4's
// block scale is halved to match (E8M0Half).
var KValuesMXFP4 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// Value is the integer weight of code c in type t: the block's element is
// scale × Value (minus the min term for Q4_1, Q5_1, Q2_K, Q4_K and Q5_K,
// whose values are the codes themselves).
func Value(t Type, c uint8) int32 {
	switch t {
	case Q8_0:
		return int32(int8(c))
	case Q4_0:
		return int32(c) - 8
	case Q5_0:
		return int32(c) - 16
	case Q3_K:
		return int32(c) - 4
	case Q6_K:
		return int32(c) - 32
	case IQ4_NL, IQ4_XS:
		return int32(KValuesIQ4NL[c&15])
	case MXFP4:
		return int32(KValuesMXFP4[c&15])
	}
	return int32(c)
}

// Codes sets u[e] to the code of element e of one block of type t
// (BlockElems elements, in element order).
func Codes(t Type, blk []byte, u []uint8) {
	switch t {
	case Q8_0:
		copy(u[:32], blk[2:34])
	case Q4_0, IQ4_NL:
		nibbles32(blk[2:18], u)
	case MXFP4:
		nibbles32(blk[1:17], u)
	case Q4_1:
		nibbles32(blk[4:20], u)
	case Q5_0, Q5_1:
		off := 2
		if t == Q5_1 {
			off = 4
		}
		qh := binary.LittleEndian.Uint32(blk[off:])
		nibbles32(blk[off+4:off+20], u)
		for e := 0; e < 32; e++ {
			u[e] |= uint8(qh>>e&1) << 4
		}
	case Q2_K:
		q := blk[16:80]
		for e := 0; e < QK_K; e++ {
			n, j, l := e/128, e%128/32, e%32
			u[e] = q[32*n+l] >> (2 * j) & 3
		}
	case Q3_K:
		hm, q := blk[0:32], blk[32:96]
		for e := 0; e < QK_K; e++ {
			n, j, l := e/128, e%128/32, e%32
			u[e] = q[32*n+l]>>(2*j)&3 | (hm[l]>>(4*n+j)&1)<<2
		}
	case Q4_K:
		nibblesK(blk[16:144], u)
	case Q5_K:
		qh := blk[16:48]
		nibblesK(blk[48:176], u)
		for e := 0; e < QK_K; e++ {
			u[e] |= (qh[e%32] >> (e / 32) & 1) << 4
		}
	case Q6_K:
		ql, qh := blk[:128], blk[128:192]
		for n := 0; n < 2; n++ {
			l0, h0, y := ql[64*n:], qh[32*n:], u[128*n:]
			for l := 0; l < 32; l++ {
				y[l] = l0[l]&15 | (h0[l]&3)<<4
				y[l+32] = l0[l+32]&15 | (h0[l]>>2&3)<<4
				y[l+64] = l0[l]>>4 | (h0[l]>>4&3)<<4
				y[l+96] = l0[l+32]>>4 | (h0[l]>>6&3)<<4
			}
		}
	case IQ4_XS:
		q := blk[8:136]
		for ib := 0; ib < 8; ib++ {
			nibbles32(q[16*ib:16*ib+16], u[32*ib:])
		}
	default:
		panic("quant: no codes for " + t.String())
	}
}

// nibbles32 reads a 32-block's 16 bytes: byte j holds element j (low
// nibble) and element j+16 (high).
func nibbles32(q []byte, u []uint8) {
	for j := 0; j < 16; j++ {
		u[j], u[j+16] = q[j]&15, q[j]>>4
	}
}

// nibblesK reads a K-quant's 128 bytes of nibbles: byte 32p+l holds
// element 64p+l (low) and 64p+32+l (high).
func nibblesK(q []byte, u []uint8) {
	for p := 0; p < 4; p++ {
		for l := 0; l < 32; l++ {
			b := q[32*p+l]
			u[64*p+l], u[64*p+32+l] = b&15, b>>4
		}
	}
}

// HalfAt reads the f16 at b.
func HalfAt(b []byte) float32 { return F16ToF32(binary.LittleEndian.Uint16(b)) }

// ScalesK4 unpacks the 8 six-bit scales and mins of a Q4_K or Q5_K block's
// 12 scale bytes (blk[4:16]).
func ScalesK4(q []byte) (sc, m [8]uint8) {
	for j := 0; j < 4; j++ {
		sc[j], m[j] = q[j]&63, q[j+4]&63
		sc[j+4] = q[j+8]&15 | (q[j]>>6)<<4
		m[j+4] = q[j+8]>>4 | (q[j+4]>>6)<<4
	}
	return sc, m
}

// ScalesQ3K unpacks a Q3_K block's 16 six-bit scales (blk[96:108]) as
// signed values, scale − 32: sub-block j's low four bits are byte j's low
// nibble (j < 8) or byte j−8's high nibble, its high two bits are bits
// 2(j/4) of byte 8 + j%4.
func ScalesQ3K(q []byte) [16]int8 {
	var s [16]int8
	for j := 0; j < 16; j++ {
		lo := q[j%8] >> (4 * (j / 8)) & 15
		hi := q[8+j%4] >> (2 * (j / 4)) & 3
		s[j] = int8(lo|hi<<4) - 32
	}
	return s
}

// ScalesIQ4XS unpacks an IQ4_XS block's 8 six-bit scales as signed values,
// scale − 32: low four bits from scales_l (blk[4:8]), high two from
// scales_h (blk[2:4]).
func ScalesIQ4XS(blk []byte) [8]int8 {
	h := binary.LittleEndian.Uint16(blk[2:])
	var s [8]int8
	for ib := 0; ib < 8; ib++ {
		lo := blk[4+ib/2] >> (4 * (ib % 2)) & 15
		hi := uint8(h>>(2*ib)) & 3
		s[ib] = int8(lo|hi<<4) - 32
	}
	return s
}

// E8M0Half is half of the power of two an MXFP4 block's exponent byte e
// encodes, 2^(e−128), exactly (ggml_e8m0_to_fp32_half: e = 0 and 1 are
// subnormal).
func E8M0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}
