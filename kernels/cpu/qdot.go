package cpu

import (
	"encoding/binary"

	"jspark/kernels/quant"
)

// The integer dot products of one quantized weight row with activations
// quantized by quant.QuantizeQ8, in plain Go: the portable path and the
// specification of the assembly (qdot_amd64.go), which does the same
// arithmetic with the same lane structure.
//
// A 32-element block gives 8 int32 lanes, lane l the exact sum of the
// products of elements 4l..4l+3 (what VPDPBUSD and VPMADDUBSW+VPMADDWD
// give). Lanes are scaled to float and accumulated per lane, block after
// block; one fixed tree sums the 8 lanes at the end (laneSum8). The float
// arithmetic of an output depends only on K and the weight type.

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

// lanes8 sets l to the 8 lane sums of u·x over one block.
func lanes8(l *[8]int32, u *[32]int32, x []int8) {
	for i := range l {
		var s int32
		for j := 4 * i; j < 4*i+4; j++ {
			s += u[j] * int32(x[j])
		}
		l[i] = s
	}
}

func accLanes(acc *[8]float32, l *[8]int32, s float32) {
	for i := range acc {
		acc[i] += float32(l[i]) * s
	}
}

// laneSum8 adds 8 lanes by the assembly's tree: halves, then pairs.
func laneSum8(a *[8]float32) float32 {
	var h [4]float32
	for i := range h {
		h[i] = a[i] + a[i+4]
	}
	p0, p1 := h[0]+h[2], h[1]+h[3]
	return p0 + p1
}

func qdotQ8_0Go(w []byte, xq []int8, xd []float32, xs []int32) float32 {
	var acc [8]float32
	var u [32]int32
	var l [8]int32
	for b := range xd {
		blk := w[b*34 : b*34+34]
		for i := range u {
			u[i] = int32(int8(blk[2+i]))
		}
		lanes8(&l, &u, xq[b*32:])
		accLanes(&acc, &l, f16At(blk)*xd[b])
	}
	return laneSum8(&acc)
}

func qdotQ4_0Go(w []byte, xq []int8, xd []float32, xs []int32) float32 {
	var acc [8]float32
	var u [32]int32
	var l [8]int32
	for b := range xd {
		blk := w[b*18 : b*18+18]
		for j := 0; j < 16; j++ {
			u[j] = int32(blk[2+j]&15) - 8
			u[j+16] = int32(blk[2+j]>>4) - 8
		}
		lanes8(&l, &u, xq[b*32:])
		accLanes(&acc, &l, f16At(blk)*xd[b])
	}
	return laneSum8(&acc)
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

// qdotQ4KGo: sub-block j of a super-block is d·sc_j·q - dmin·m_j with q in
// 0..15, so its dot is d·sc_j·dx·Σq·x - dmin·m_j·dx·Σx. The scale terms
// accumulate in lanes over K; the min terms accumulate in a second set of
// 8 lanes, lane j for sub-block j, and are subtracted at the end.
func qdotQ4KGo(w []byte, xq []int8, xd []float32, xs []int32) float32 {
	var acc, macc [8]float32
	var u [32]int32
	var l [8]int32
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
			lanes8(&l, &u, xq[b*32:])
			accLanes(&acc, &l, d*float32(sc[j])*xd[b])
			macc[j] += dmin * float32(m[j]) * (xd[b] * float32(xs[b]))
		}
	}
	return laneSum8(&acc) - laneSum8(&macc)
}

// qdotQ6KGo: 16 sub-blocks of 16 as d·sc·(q-32), q in 0..63; a 32-block's
// lanes 0-3 take its first sub-block's scale, lanes 4-7 the second's.
func qdotQ6KGo(w []byte, xq []int8, xd []float32, xs []int32) float32 {
	var acc [8]float32
	var u [32]int32
	var l [8]int32
	for sb := 0; sb < len(xd)/8; sb++ {
		blk := w[sb*210 : sb*210+210]
		d := f16At(blk[208:])
		q := q6Values(blk)
		for b := 0; b < 8; b++ {
			for i := range u {
				u[i] = int32(q[32*b+i]) - 32
			}
			lanes8(&l, &u, xq[(sb*8+b)*32:])
			for i := range l {
				l[i] *= int32(int8(blk[192+2*b+i/4]))
			}
			accLanes(&acc, &l, d*xd[sb*8+b])
		}
	}
	return laneSum8(&acc)
}
