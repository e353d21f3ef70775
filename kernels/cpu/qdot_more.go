package cpu

import "jspark/kernels/quant"

// The portable integer dots of the types quant/codes.go reads, in qdot.go's
// arithmetic (packed.go's per type): a block's exact integer sum, one
// fused step with its float scale; a min term (Q4_1, Q5_1: +m; Q2_K,
// Q5_K: −dmin·m) a second fused step after it.

// blockScale is a 32-block's scale (d, or MXFP4's power of two) and min
// (Q4_1 and Q5_1's m, else 0).
func blockScale(t quant.Type, blk []byte) (d, m float32) {
	switch t {
	case quant.MXFP4:
		return quant.E8M0Half(blk[0]), 0
	case quant.Q4_1, quant.Q5_1:
		return f16At(blk), f16At(blk[2:])
	}
	return f16At(blk), 0
}

// values sets u to the integer weights of codes c.
func values(t quant.Type, c []uint8, u []int32) {
	for i := range u {
		u[i] = quant.Value(t, c[i])
	}
}

// qdot32Go: out = Σ_b (Σ w·x)·(d·dx) [+ m·(dx·Σx)].
func qdot32Go(t quant.Type) qdotFn {
	size := t.BlockBytes()
	withMin := t == quant.Q4_1 || t == quant.Q5_1
	return func(w []byte, xq []int8, xd []float32, xs []int32) float32 {
		var out float32
		var c [32]uint8
		var u [32]int32
		for b := range xd {
			blk := w[b*size : (b+1)*size]
			quant.Codes(t, blk, c[:])
			values(t, c[:], u[:])
			d, m := blockScale(t, blk)
			out = fma32(float32(dot32(&u, xq[b*32:])), d*xd[b], out)
			if withMin {
				out = fma32(m, xd[b]*float32(xs[b]), out)
			}
		}
		return out
	}
}

// qdotQ2KGo: sub-blocks of 16 as d·sc·u − dmin·m, u in 0..3: a block's
// halves times their scales, and its halves' activation sums times their
// mins, each summed as integers.
func qdotQ2KGo(w []byte, xq []int8, xd []float32, xs []int32) float32 {
	var out float32
	var c [quant.QK_K]uint8
	var u [32]int32
	for sb := 0; sb < len(xd)/8; sb++ {
		blk := w[sb*84 : sb*84+84]
		d, dmin := f16At(blk[80:]), f16At(blk[82:])
		quant.Codes(quant.Q2_K, blk, c[:])
		for b := 0; b < 8; b++ {
			x := xq[(sb*8+b)*32:]
			values(quant.Q2_K, c[32*b:], u[:])
			sa, sb2 := blk[2*b], blk[2*b+1]
			s := int32(sa&15)*dot16(u[:16], x) + int32(sb2&15)*dot16(u[16:], x[16:])
			m := int32(sa>>4)*sum16(x) + int32(sb2>>4)*sum16(x[16:])
			dx := xd[sb*8+b]
			out = fma32(float32(s), d*dx, out)
			out = fma32(float32(m), -(dmin * dx), out)
		}
	}
	return out
}

// qdotQ3KGo: as Q6_K, with values −4..3 and six-bit signed scales.
func qdotQ3KGo(w []byte, xq []int8, xd []float32, xs []int32) float32 {
	var out float32
	var c [quant.QK_K]uint8
	var u [32]int32
	for sb := 0; sb < len(xd)/8; sb++ {
		blk := w[sb*110 : sb*110+110]
		d := f16At(blk[108:])
		sc := quant.ScalesQ3K(blk[96:108])
		quant.Codes(quant.Q3_K, blk, c[:])
		for b := 0; b < 8; b++ {
			x := xq[(sb*8+b)*32:]
			values(quant.Q3_K, c[32*b:], u[:])
			s := int32(sc[2*b])*dot16(u[:16], x) + int32(sc[2*b+1])*dot16(u[16:], x[16:])
			out = fma32(float32(s), d*xd[sb*8+b], out)
		}
	}
	return out
}

// qdotQ5KGo: as qdotQ4KGo, with five-bit values.
func qdotQ5KGo(w []byte, xq []int8, xd []float32, xs []int32) float32 {
	var out float32
	var c [quant.QK_K]uint8
	var u [32]int32
	for sb := 0; sb < len(xd)/8; sb++ {
		blk := w[sb*176 : sb*176+176]
		d, dmin := f16At(blk), f16At(blk[2:])
		sc, m := quant.ScalesK4(blk[4:16])
		quant.Codes(quant.Q5_K, blk, c[:])
		for j := 0; j < 8; j++ {
			b := sb*8 + j
			values(quant.Q5_K, c[32*j:], u[:])
			out = fma32(float32(dot32(&u, xq[b*32:])), d*float32(sc[j])*xd[b], out)
			out = fma32(-(dmin * float32(m[j])), xd[b]*float32(xs[b]), out)
		}
	}
	return out
}

// qdotIQ4XSGo: sub-block j is d·sc_j·grid[code]: its sum scaled by
// (d·sc_j)·dx.
func qdotIQ4XSGo(w []byte, xq []int8, xd []float32, xs []int32) float32 {
	var out float32
	var c [quant.QK_K]uint8
	var u [32]int32
	for sb := 0; sb < len(xd)/8; sb++ {
		blk := w[sb*136 : sb*136+136]
		d := f16At(blk)
		sc := quant.ScalesIQ4XS(blk)
		quant.Codes(quant.IQ4_XS, blk, c[:])
		for j := 0; j < 8; j++ {
			b := sb*8 + j
			values(quant.IQ4_XS, c[32*j:], u[:])
			out = fma32(float32(dot32(&u, xq[b*32:])), d*float32(sc[j])*xd[b], out)
		}
	}
	return out
}
