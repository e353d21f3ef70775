package quant

import (
	"encoding/binary"
	"math"
)

// The encoders of the types codes.go reads. Like the others they pick
// scales by simple max and min rules, not llama.cpp's searches: good
// enough for synthetic models, and every code is chosen against the
// scales as stored (after their rounding to f16), so that decoding comes
// back within MaxError.

func quantMore(t Type, x []float32, blk []byte) {
	var u [QK_K]uint8
	switch t {
	case Q4_1, Q5_1:
		levels := float32(15)
		if t == Q5_1 {
			levels = 31
		}
		lo, hi := minMax(x)
		d := putF16(blk, (hi-lo)/levels)
		m := putF16(blk[2:], lo)
		for e, v := range x {
			u[e] = uint8(clampRound(div(v-m, d), 0, levels))
		}
		if t == Q4_1 {
			putNibbles32(blk[4:], u[:32])
		} else {
			putQ5(blk[4:], u[:32])
		}
	case Q5_0:
		d := putF16(blk, signedMax(x)/-16)
		for e, v := range x {
			u[e] = uint8(clampRound(div(v, d)+16, 0, 31))
		}
		putQ5(blk[2:], u[:32])
	case IQ4_NL:
		d := putF16(blk, signedMax(x)/-127)
		nearestCodes(x, d, KValuesIQ4NL[:], u[:])
		putNibbles32(blk[2:], u[:32])
	case MXFP4:
		var amax float32
		for _, v := range x {
			amax = max(amax, abs32(v))
		}
		e := uint8(0)
		if amax > 0 {
			// the smallest exponent whose largest value, 12·2^(e−128), holds amax
			e = uint8(min(max(128+math.Ceil(math.Log2(float64(amax)/12)), 1), 254))
		}
		blk[0] = e
		nearestMXFP4(x, E8M0Half(e), u[:])
		putNibbles32(blk[1:], u[:32])
	case Q2_K:
		quantQ2K(x, blk, u[:])
	case Q3_K:
		quantQ3K(x, blk, u[:])
	case Q5_K:
		quantQ5K(x, blk, u[:])
	case IQ4_XS:
		quantIQ4XS(x, blk, u[:])
	}
}

func div(a, d float32) float32 {
	if d == 0 {
		return 0
	}
	return a / d
}

func minMax(x []float32) (lo, hi float32) {
	lo, hi = x[0], x[0]
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}

// signedMax is the element of largest magnitude, with its sign.
func signedMax(x []float32) float32 {
	var amax, vmax float32
	for _, v := range x {
		if abs32(v) > amax {
			amax, vmax = abs32(v), v
		}
	}
	return vmax
}

// nearestCodes sets u[e] to the index of the grid value nearest x[e]/d.
func nearestCodes(x []float32, d float32, grid []int8, u []uint8) {
	for e, v := range x {
		best, bestErr := 0, float32(math.Inf(1))
		for c, g := range grid {
			if err := abs32(v - d*float32(g)); err < bestErr {
				best, bestErr = c, err
			}
		}
		u[e] = uint8(best)
	}
}

// nearestMXFP4 is nearestCodes over KValuesMXFP4, code for code, without
// the search: d is a power of two, so a = |v|/d is exact and |a − g| orders
// the grid as |v − d·g| does; near a midpoint of two neighbours both
// differences are exact (neither is more than twice the other), so the
// midpoint decides, a tie going to the smaller magnitude (the search's
// first). The midpoints are halves, so ⌈2a⌉ tells which side of each a
// lies: mxfp4Nearest maps it and the sign to the code. Elements past the
// table (a > 16, NaN: only clamped exponents make them) and scales far
// from 1 take the search.
func nearestMXFP4(x []float32, d float32, u []uint8) {
	if !(d >= 0x1p-100 && d <= 0x1p100) {
		nearestCodes(x, d, KValuesMXFP4[:], u)
		return
	}
	inv := 1 / d
	for e, v := range x {
		a := abs32(v) * inv
		if !(a <= 16) {
			nearestCodes(x[e:e+1], d, KValuesMXFP4[:], u[e:e+1])
			continue
		}
		u[e] = mxfp4Nearest[math.Float32bits(v)>>31][int(math.Ceil(float64(2*a)))]
	}
}

// mxfp4Nearest is the code nearest a magnitude a with ⌈2a⌉ = n, by sign
// (0 positive) and n: midpoints 0.5, 1.5, 2.5, 3.5, 5, 7 and 10 between
// 0, 1, 2, 3, 4, 6, 8 and 12.
var mxfp4Nearest = func() (t [2][33]uint8) {
	mids := []int{1, 3, 5, 7, 10, 14, 20} // 2 × the midpoints
	for n := range 33 {
		m := uint8(0)
		for _, h := range mids {
			if n > h {
				m++
			}
		}
		t[0][n] = m
		if m > 0 {
			t[1][n] = m + 8
		}
	}
	return t
}()

// putNibbles32 writes a 32-block's codes as nibbles (nibbles32's inverse).
func putNibbles32(q []byte, u []uint8) {
	for j := 0; j < 16; j++ {
		q[j] = u[j] | u[j+16]<<4
	}
}

// putQ5 writes a 32-block's 5-bit codes: 4 bytes of high bits, then nibbles.
func putQ5(q []byte, u []uint8) {
	var qh uint32
	for e := 0; e < 32; e++ {
		qh |= uint32(u[e]>>4) << e
	}
	binary.LittleEndian.PutUint32(q, qh)
	var lo [32]uint8
	for e := range lo {
		lo[e] = u[e] & 15
	}
	putNibbles32(q[4:], lo[:])
}

// putScalesK4 packs 8 six-bit scales and mins (ScalesK4's inverse).
func putScalesK4(q []byte, sc, m [8]uint8) {
	for j := 0; j < 4; j++ {
		q[j] = sc[j] | (sc[j+4]>>4)<<6
		q[j+4] = m[j] | (m[j+4]>>4)<<6
		q[j+8] = sc[j+4]&0xf | (m[j+4]&0xf)<<4
	}
}

// quantQ2K: 16 sub-blocks of 16 as d·sc·q − dmin·m, q in 0..3, sc and m
// four bits each.
func quantQ2K(x []float32, blk []byte, u []uint8) {
	var scales, mins [16]float32
	var maxScale, maxMin float32
	for s := 0; s < 16; s++ {
		lo, hi := minMax(x[16*s : 16*s+16])
		lo = min(lo, 0)
		scales[s], mins[s] = (hi-lo)/3, -lo
		maxScale, maxMin = max(maxScale, scales[s]), max(maxMin, mins[s])
	}
	d := putF16(blk[80:], maxScale/15)
	dmin := putF16(blk[82:], maxMin/15)
	for s := 0; s < 16; s++ {
		sc := uint8(clampRound(div(scales[s], d), 0, 15))
		m := uint8(clampRound(div(mins[s], dmin), 0, 15))
		blk[s] = sc | m<<4
		ds, ms := d*float32(sc), dmin*float32(m)
		for i := 16 * s; i < 16*s+16; i++ {
			u[i] = uint8(clampRound(div(x[i]+ms, ds), 0, 3))
		}
	}
	q := blk[16:80]
	clear(q)
	for e := 0; e < QK_K; e++ {
		n, j, l := e/128, e%128/32, e%32
		q[32*n+l] |= u[e] << (2 * j)
	}
}

// quantQ3K: 16 sub-blocks of 16 as d·sc·q, q in −4..3 and sc in −32..31.
func quantQ3K(x []float32, blk []byte, u []uint8) {
	var scales [16]float32
	var smax float32 // the sub-block scale of largest magnitude, signed
	for s := 0; s < 16; s++ {
		scales[s] = signedMax(x[16*s:16*s+16]) / -4
		if abs32(scales[s]) > abs32(smax) {
			smax = scales[s]
		}
	}
	d := putF16(blk[108:], smax/-32)
	sq := blk[96:108]
	clear(sq)
	for s := 0; s < 16; s++ {
		l := int8(clampRound(div(scales[s], d), -32, 31))
		c := uint8(l + 32)
		sq[s%8] |= (c & 15) << (4 * (s / 8))
		sq[8+s%4] |= (c >> 4) << (2 * (s / 4))
		ds := d * float32(l)
		for i := 16 * s; i < 16*s+16; i++ {
			u[i] = uint8(clampRound(div(x[i], ds), -4, 3) + 4)
		}
	}
	hm, q := blk[0:32], blk[32:96]
	clear(hm)
	clear(q)
	for e := 0; e < QK_K; e++ {
		n, j, l := e/128, e%128/32, e%32
		q[32*n+l] |= (u[e] & 3) << (2 * j)
		hm[l] |= (u[e] >> 2) << (4*n + j)
	}
}

// quantQ5K: as quantQ4K, with codes 0..31 (a fifth bit in qh).
func quantQ5K(x []float32, blk []byte, u []uint8) {
	var scales, mins [8]float32
	var maxScale, maxMin float32
	for s := 0; s < 8; s++ {
		lo, hi := minMax(x[32*s : 32*s+32])
		lo = min(lo, 0)
		scales[s], mins[s] = (hi-lo)/31, -lo
		maxScale, maxMin = max(maxScale, scales[s]), max(maxMin, mins[s])
	}
	d := putF16(blk[0:], maxScale/63)
	dmin := putF16(blk[2:], maxMin/63)
	var sc, m [8]uint8
	for s := 0; s < 8; s++ {
		sc[s] = uint8(clampRound(div(scales[s], d), 0, 63))
		m[s] = uint8(clampRound(div(mins[s], dmin), 0, 63))
		ds, ms := d*float32(sc[s]), dmin*float32(m[s])
		for i := 32 * s; i < 32*s+32; i++ {
			u[i] = uint8(clampRound(div(x[i]+ms, ds), 0, 31))
		}
	}
	putScalesK4(blk[4:16], sc, m)
	qh, qs := blk[16:48], blk[48:176]
	clear(qh)
	for e := 0; e < QK_K; e++ {
		qh[e%32] |= (u[e] >> 4) << (e / 32)
	}
	for p := 0; p < 4; p++ {
		for l := 0; l < 32; l++ {
			qs[32*p+l] = u[64*p+l]&15 | (u[64*p+32+l]&15)<<4
		}
	}
}

// quantIQ4XS: 8 sub-blocks of 32 as d·sc·grid[q], sc in −32..31.
func quantIQ4XS(x []float32, blk []byte, u []uint8) {
	var scales [8]float32
	var smax float32
	for s := 0; s < 8; s++ {
		scales[s] = signedMax(x[32*s:32*s+32]) / -127
		if abs32(scales[s]) > abs32(smax) {
			smax = scales[s]
		}
	}
	d := putF16(blk, smax/-32)
	var h uint16
	clear(blk[4:8])
	for s := 0; s < 8; s++ {
		l := int8(clampRound(div(scales[s], d), -32, 31))
		c := uint8(l + 32)
		blk[4+s/2] |= (c & 15) << (4 * (s % 2))
		h |= uint16(c>>4) << (2 * s)
		nearestCodes(x[32*s:32*s+32], d*float32(l), KValuesIQ4NL[:], u[32*s:])
		putNibbles32(blk[8+16*s:], u[32*s:32*s+32])
	}
	binary.LittleEndian.PutUint16(blk[2:], h)
}
