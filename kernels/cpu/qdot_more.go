package cpu

import "jspark/kernels/quant"

// The portable integer dots of the types quant/codes.go reads, in qdot.go's
// lane structure: a 32-element block gives 8 exact int32 lanes (lanes8),
// scaled to float and accumulated per lane in block order, summed by
// laneSum8 at the end. Types with a min term (Q4_1, Q5_1: +m; Q2_K, Q5_K:
// −dmin·m) carry it in a second accumulator, in block order: one float for
// Q4_1 and Q5_1, a lane per sub-block for Q5_K (as Q4_K), 8 lanes as the
// products' for Q2_K; added or subtracted at the end.

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

// qdot32Go: out = Σ_b lanes(Σ w·x)·(d·dx) + Σ_b m·(dx·Σx).
func qdot32Go(t quant.Type) qdotFn {
	size := t.BlockBytes()
	return func(w []byte, xq []int8, xd []float32, xs []int32) float32 {
		var acc [8]float32
		var msum float32
		var c [32]uint8
		var u [32]int32
		var l [8]int32
		for b := range xd {
			blk := w[b*size : (b+1)*size]
			quant.Codes(t, blk, c[:])
			values(t, c[:], u[:])
			lanes8(&l, &u, xq[b*32:])
			d, m := blockScale(t, blk)
			accLanes(&acc, &l, d*xd[b])
			msum += m * (xd[b] * float32(xs[b]))
		}
		return laneSum8(&acc) + msum
	}
}

// qdotQ2KGo: sub-blocks of 16 as d·sc·u − dmin·m, u in 0..3: a block's
// lanes 0-3 take its first sub-block's scale, 4-7 the second's (as Q6_K);
// the mins go to a second set of lanes, lane i the exact m·Σx of its 4
// activations, scaled by dmin·dx, subtracted at the end.
func qdotQ2KGo(w []byte, xq []int8, xd []float32, xs []int32) float32 {
	var acc, macc [8]float32
	var c [quant.QK_K]uint8
	var u [32]int32
	var l [8]int32
	for sb := 0; sb < len(xd)/8; sb++ {
		blk := w[sb*84 : sb*84+84]
		d, dmin := f16At(blk[80:]), f16At(blk[82:])
		quant.Codes(quant.Q2_K, blk, c[:])
		for b := 0; b < 8; b++ {
			x := xq[(sb*8+b)*32:]
			values(quant.Q2_K, c[32*b:], u[:])
			lanes8(&l, &u, x)
			var ml [8]int32
			for i := range l {
				sc := blk[2*b+i/4]
				l[i] *= int32(sc & 15)
				ml[i] = int32(sc>>4) * (int32(x[4*i]) + int32(x[4*i+1]) + int32(x[4*i+2]) + int32(x[4*i+3]))
			}
			accLanes(&acc, &l, d*xd[sb*8+b])
			accLanes(&macc, &ml, dmin*xd[sb*8+b])
		}
	}
	return laneSum8(&acc) - laneSum8(&macc)
}

// qdotQ3KGo: as Q6_K, with values −4..3 and six-bit signed scales.
func qdotQ3KGo(w []byte, xq []int8, xd []float32, xs []int32) float32 {
	var acc [8]float32
	var c [quant.QK_K]uint8
	var u [32]int32
	var l [8]int32
	for sb := 0; sb < len(xd)/8; sb++ {
		blk := w[sb*110 : sb*110+110]
		d := f16At(blk[108:])
		sc := quant.ScalesQ3K(blk[96:108])
		quant.Codes(quant.Q3_K, blk, c[:])
		for b := 0; b < 8; b++ {
			values(quant.Q3_K, c[32*b:], u[:])
			lanes8(&l, &u, xq[(sb*8+b)*32:])
			for i := range l {
				l[i] *= int32(sc[2*b+i/4])
			}
			accLanes(&acc, &l, d*xd[sb*8+b])
		}
	}
	return laneSum8(&acc)
}

// qdotQ5KGo: as qdotQ4KGo, with five-bit values.
func qdotQ5KGo(w []byte, xq []int8, xd []float32, xs []int32) float32 {
	var acc, macc [8]float32
	var c [quant.QK_K]uint8
	var u [32]int32
	var l [8]int32
	for sb := 0; sb < len(xd)/8; sb++ {
		blk := w[sb*176 : sb*176+176]
		d, dmin := f16At(blk), f16At(blk[2:])
		sc, m := quant.ScalesK4(blk[4:16])
		quant.Codes(quant.Q5_K, blk, c[:])
		for j := 0; j < 8; j++ {
			b := sb*8 + j
			values(quant.Q5_K, c[32*j:], u[:])
			lanes8(&l, &u, xq[b*32:])
			accLanes(&acc, &l, d*float32(sc[j])*xd[b])
			macc[j] += dmin * float32(m[j]) * (xd[b] * float32(xs[b]))
		}
	}
	return laneSum8(&acc) - laneSum8(&macc)
}

// qdotIQ4XSGo: sub-block j is d·sc_j·grid[code]: lanes scaled by
// (d·sc_j)·dx.
func qdotIQ4XSGo(w []byte, xq []int8, xd []float32, xs []int32) float32 {
	var acc [8]float32
	var c [quant.QK_K]uint8
	var u [32]int32
	var l [8]int32
	for sb := 0; sb < len(xd)/8; sb++ {
		blk := w[sb*136 : sb*136+136]
		d := f16At(blk)
		sc := quant.ScalesIQ4XS(blk)
		quant.Codes(quant.IQ4_XS, blk, c[:])
		for j := 0; j < 8; j++ {
			b := sb*8 + j
			values(quant.IQ4_XS, c[32*j:], u[:])
			lanes8(&l, &u, xq[b*32:])
			accLanes(&acc, &l, d*float32(sc[j])*xd[b])
		}
	}
	return laneSum8(&acc)
}
