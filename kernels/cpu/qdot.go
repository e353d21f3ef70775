package cpu

import (
	"encoding/binary"
	"math"

	"jspark/kernels/quant"
)

// The integer dot products of one quantized weight row with activations
// quantized by quant.QuantizeQ8, in plain Go: the portable path, which
// computes the packed assembly's arithmetic (packed.go states it per type)
// bit for bit, so that a machine without the assembly (arm64) gives the
// bits AVX-512 and AVX2 give.
//
// A 32-element block's products are summed exactly as integers (each
// 16-element half times its scale first where the type has two), the sum
// converted to float once and added to the output by one fused
// multiply-add with the block's float scale (fma32), block after block
// over K; min terms take a second fused step after their block's. The
// float arithmetic of an output depends only on K and the weight type.

type qdotFn func(w []byte, xq []int8, xd []float32, xs []int32) float32

var qdotGo = map[quant.Type]qdotFn{
	quant.Q8_0: qdotQ8_0Go,
	quant.Q4_0: qdotQ4_0Go,
	quant.Q4_K: qdotQ4KGo,
	quant.Q6_K: qdotQ6KGo,
	// qdot_more.go
	quant.Q4_1:   qdot32Go(quant.Q4_1),
	quant.Q5_0:   qdot32Go(quant.Q5_0),
	quant.Q5_1:   qdot32Go(quant.Q5_1),
	quant.IQ4_NL: qdot32Go(quant.IQ4_NL),
	quant.MXFP4:  qdot32Go(quant.MXFP4),
	quant.Q2_K:   qdotQ2KGo,
	quant.Q3_K:   qdotQ3KGo,
	quant.Q5_K:   qdotQ5KGo,
	quant.IQ4_XS: qdotIQ4XSGo,
}

// intPath reports whether weights of type t multiply as integers against
// quantized activations (for every batch size: batch invariance).
func intPath(t quant.Type) bool { _, ok := qdotGo[t]; return ok }

func f16At(b []byte) float32 { return quant.F16ToF32(binary.LittleEndian.Uint16(b)) }

// fma32 is x·y+z rounded once to float32, as VFMADD231PS gives it. The
// product is exact in float64 and the sum exact as a float64 pair (s, e);
// s rounded to odd by e's sign keeps the bit the final rounding needs
// (53 ≥ 24+2 bits), so rounding it to float32 rounds x·y+z correctly.
// The explicit conversions keep the compiler from fusing (arm64 would).
func fma32(x, y, z float32) float32 {
	p := float64(float64(x) * float64(y))
	zz := float64(z)
	s := p + zz
	b := s - p
	e := (p - (s - b)) + (zz - b)
	if e != 0 {
		if bits := math.Float64bits(s); bits&1 == 0 {
			if (e > 0) == (s > 0) {
				bits++ // s's magnitude is below the sum's: the odd neighbour above
			} else {
				bits--
			}
			s = math.Float64frombits(bits)
		}
	}
	return float32(s)
}

// dot16 is the exact sum of u·x over 16 elements.
func dot16(u []int32, x []int8) int32 {
	u, x = u[:16], x[:16]
	var s int32
	for i, v := range u {
		s += v * int32(x[i])
	}
	return s
}

// dot32 is the exact sum of u·x over a 32-element block.
func dot32(u *[32]int32, x []int8) int32 { return dot16(u[:16], x) + dot16(u[16:], x[16:]) }

// sum16 is the exact sum of 16 activations.
func sum16(x []int8) int32 {
	var s int32
	for _, v := range x[:16] {
		s += int32(v)
	}
	return s
}

func qdotQ8_0Go(w []byte, xq []int8, xd []float32, xs []int32) float32 {
	var out float32
	var u [32]int32
	for b := range xd {
		blk := w[b*34 : b*34+34]
		for i := range u {
			u[i] = int32(int8(blk[2+i]))
		}
		out = fma32(float32(dot32(&u, xq[b*32:])), f16At(blk)*xd[b], out)
	}
	return out
}

func qdotQ4_0Go(w []byte, xq []int8, xd []float32, xs []int32) float32 {
	var out float32
	var u [32]int32
	for b := range xd {
		blk := w[b*18 : b*18+18]
		for j := 0; j < 16; j++ {
			u[j] = int32(blk[2+j]&15) - 8
			u[j+16] = int32(blk[2+j]>>4) - 8
		}
		out = fma32(float32(dot32(&u, xq[b*32:])), f16At(blk)*xd[b], out)
	}
	return out
}

// scalesK4 unpacks a Q4_K block's 8 six-bit scales and mins.
func scalesK4(q []byte) (sc, m [8]uint8) {
	for j := 0; j < 4; j++ {
		sc[j], m[j] = q[j]&63, q[j+4]&63
		sc[j+4] = q[j+8]&15 | (q[j]>>6)<<4
		m[j+4] = q[j+8]>>4 | (q[j+4]>>6)<<4
	}
	return sc, m
}

// qdotQ4KGo: sub-block j of a super-block is d·sc_j·q − dmin·m_j with q
// in 0..15, so its dot is d·sc_j·dx·Σq·x − dmin·m_j·dx·Σx: a fused step
// for each term.
func qdotQ4KGo(w []byte, xq []int8, xd []float32, xs []int32) float32 {
	var out float32
	var u [32]int32
	for sb := 0; sb < len(xd)/8; sb++ {
		blk := w[sb*144 : sb*144+144]
		d, dmin := f16At(blk), f16At(blk[2:])
		sc, m := scalesK4(blk[4:16])
		q := blk[16:]
		for j := 0; j < 8; j++ {
			b := sb*8 + j
			qs := q[32*(j/2):]
			for i := range u {
				if j%2 == 0 {
					u[i] = int32(qs[i] & 15)
				} else {
					u[i] = int32(qs[i] >> 4)
				}
			}
			out = fma32(float32(dot32(&u, xq[b*32:])), d*float32(sc[j])*xd[b], out)
			out = fma32(-(dmin * float32(m[j])), xd[b]*float32(xs[b]), out)
		}
	}
	return out
}

// qdotQ6KGo: 16 sub-blocks of 16 as d·sc·(q−32), q in 0..63: a 32-block's
// halves times their scales, summed as integers.
func qdotQ6KGo(w []byte, xq []int8, xd []float32, xs []int32) float32 {
	var out float32
	var u [32]int32
	for sb := 0; sb < len(xd)/8; sb++ {
		blk := w[sb*210 : sb*210+210]
		d := f16At(blk[208:])
		q := q6Values(blk)
		for b := 0; b < 8; b++ {
			for i := range u {
				u[i] = int32(q[32*b+i]) - 32
			}
			x := xq[(sb*8+b)*32:]
			s := int32(int8(blk[192+2*b]))*dot16(u[:16], x) + int32(int8(blk[193+2*b]))*dot16(u[16:], x[16:])
			out = fma32(float32(s), d*xd[sb*8+b], out)
		}
	}
	return out
}
