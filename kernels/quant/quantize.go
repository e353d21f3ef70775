package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Quantize encodes src as type t. len(src) must be a whole number of blocks.
// The K-quant encoders pick scales by a simple max rule rather than
// llama.cpp's search: the decoders are exact, the encoders only need to be
// reasonable for synthetic models and tests.
func Quantize(t Type, src []float32) []byte {
	if !t.FitsRow(len(src)) {
		panic(fmt.Sprintf("quant: %d elements is not a whole number of %v blocks", len(src), t))
	}
	out := make([]byte, t.RowBytes(len(src)))
	switch t {
	case F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		}
	case F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(out[2*i:], F32ToF16(v))
		}
	case BF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(out[2*i:], F32ToBF16(v))
		}
	case Q8_0:
		for b := 0; b < len(src)/32; b++ {
			quantQ8_0(src[b*32:b*32+32], out[b*34:b*34+34])
		}
	case Q4_0:
		for b := 0; b < len(src)/32; b++ {
			quantQ4_0(src[b*32:b*32+32], out[b*18:b*18+18])
		}
	case Q4_K:
		for b := 0; b < len(src)/QK_K; b++ {
			quantQ4K(src[b*QK_K:b*QK_K+QK_K], out[b*144:b*144+144])
		}
	case Q6_K:
		for b := 0; b < len(src)/QK_K; b++ {
			quantQ6K(src[b*QK_K:b*QK_K+QK_K], out[b*210:b*210+210])
		}
	case Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q5_K, IQ4_XS:
		be, bb := t.BlockElems(), t.BlockBytes()
		for b := 0; b < len(src)/be; b++ {
			quantMore(t, src[b*be:(b+1)*be], out[b*bb:(b+1)*bb])
		}
	default:
		panic(fmt.Sprintf("quant: quantize %v", t))
	}
	return out
}

func putF16(b []byte, v float32) float32 {
	h := F32ToF16(v)
	binary.LittleEndian.PutUint16(b, h)
	return F16ToF32(h)
}

func quantQ8_0(x []float32, blk []byte) {
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	d := putF16(blk, amax/127)
	var id float32
	if d != 0 {
		id = 1 / d
	}
	for i, v := range x {
		blk[2+i] = byte(int8(clampRound(v*id, -127, 127)))
	}
}

func quantQ4_0(x []float32, blk []byte) {
	var amax, vmax float32
	for _, v := range x {
		if abs32(v) > amax {
			amax, vmax = abs32(v), v
		}
	}
	d := putF16(blk, vmax/-8)
	var id float32
	if d != 0 {
		id = 1 / d
	}
	for j := 0; j < 16; j++ {
		lo := clampRound(x[j]*id+8, 0, 15)
		hi := clampRound(x[j+16]*id+8, 0, 15)
		blk[2+j] = byte(lo) | byte(hi)<<4
	}
}

// quantQ4K encodes 8 sub-blocks of 32 as x ≈ d*sc*q - dmin*m, q in 0..15.
func quantQ4K(x []float32, blk []byte) {
	var scales, mins [8]float32
	for s := 0; s < 8; s++ {
		lo, hi := x[s*32], x[s*32]
		for _, v := range x[s*32 : s*32+32] {
			lo, hi = min(lo, v), max(hi, v)
		}
		lo = min(lo, 0)
		scales[s] = (hi - lo) / 15
		mins[s] = -lo
	}
	var maxScale, maxMin float32
	for s := 0; s < 8; s++ {
		maxScale, maxMin = max(maxScale, scales[s]), max(maxMin, mins[s])
	}
	d := putF16(blk[0:], maxScale/63)
	dmin := putF16(blk[2:], maxMin/63)
	var sc, m [8]uint8
	for s := 0; s < 8; s++ {
		if d > 0 {
			sc[s] = uint8(clampRound(scales[s]/d, 0, 63))
		}
		if dmin > 0 {
			m[s] = uint8(clampRound(mins[s]/dmin, 0, 63))
		}
	}
	q := blk[4:16]
	for j := 0; j < 4; j++ {
		q[j] = sc[j] | (sc[j+4]>>4)<<6
		q[j+4] = m[j] | (m[j+4]>>4)<<6
		q[j+8] = sc[j+4]&0xf | (m[j+4]&0xf)<<4
	}
	var l [QK_K]uint8
	for s := 0; s < 8; s++ {
		ds := d * float32(sc[s])
		ms := dmin * float32(m[s])
		for i := 0; i < 32; i++ {
			if ds > 0 {
				l[s*32+i] = uint8(clampRound((x[s*32+i]+ms)/ds, 0, 15))
			}
		}
	}
	qs := blk[16:]
	for j := 0; j < QK_K; j += 64 {
		for i := 0; i < 32; i++ {
			qs[j/2+i] = l[j+i] | l[j+32+i]<<4
		}
	}
}

// quantQ6K encodes 16 sub-blocks of 16 as x ≈ d*sc*q, q in -32..31.
func quantQ6K(x []float32, blk []byte) {
	var scales [16]float32
	var maxScale float32
	for s := 0; s < 16; s++ {
		var amax float32
		for _, v := range x[s*16 : s*16+16] {
			amax = max(amax, abs32(v))
		}
		scales[s] = amax / 31
		maxScale = max(maxScale, scales[s])
	}
	d := putF16(blk[208:], maxScale/127)
	sc := blk[192:208]
	var l [QK_K]uint8
	for s := 0; s < 16; s++ {
		var isc int8
		if d > 0 {
			isc = int8(clampRound(scales[s]/d, -128, 127))
		}
		sc[s] = byte(isc)
		ds := d * float32(isc)
		for i := 0; i < 16; i++ {
			q := float32(0)
			if ds != 0 {
				q = clampRound(x[s*16+i]/ds, -32, 31)
			}
			l[s*16+i] = uint8(int(q) + 32)
		}
	}
	ql := blk[0:128]
	qh := blk[128:192]
	for n := 0; n < QK_K; n += 128 {
		for i := 0; i < 32; i++ {
			q1, q2, q3, q4 := l[n+i], l[n+i+32], l[n+i+64], l[n+i+96]
			ql[n/2+i] = q1&0xf | (q3&0xf)<<4
			ql[n/2+i+32] = q2&0xf | (q4&0xf)<<4
			qh[n/4+i] = q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6
		}
	}
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

func clampRound(v, lo, hi float32) float32 {
	r := float32(math.Round(float64(v)))
	return min(max(r, lo), hi)
}
