package cpu

import (
	"encoding/binary"
	"math"
	"unsafe"

	"jspark/kernels/quant"
)

// The packed layouts of the types quant/codes.go reads (packed.go states
// their arithmetic). Every piece is 16 rows side by side, row i's 4 bytes
// of a step at 4i: nibbles (putNibbles), one load of single bits
// (putBits: lane byte e bit c for step c, element 4c+e) and two loads of
// 2-bit codes (putPairs: load h, step 4h+f at bits 2f). Scales are 16
// halves (or bytes) a row's worth side by side.

// pkGroupBytes is the bytes of one group (16 rows) per block of the type:
// 32 elements, or a 256-element super-block for the K-quants and IQ4_XS.
var pkGroupBytes = map[quant.Type]int{
	quant.Q8_0: 544, quant.Q4_0: 288, quant.Q4_K: 2368, quant.Q6_K: 3360,
	quant.Q4_1: 320, quant.Q5_0: 352, quant.Q5_1: 384, quant.IQ4_NL: 288, quant.MXFP4: 272,
	quant.Q2_K: 1344, quant.Q3_K: 1824, quant.Q5_K: 2880, quant.IQ4_XS: 2208,
}

// putBits writes bit `bit` of a block's 32 codes for row i.
func putBits(out []byte, i int, u []uint8, bit uint) {
	var v uint32 // four lanes (elements 4c+e, e = 0…3) a word
	for c := 0; c < 8; c++ {
		v |= (le32(u[4*c:]) >> bit & 0x01010101) << c
	}
	binary.LittleEndian.PutUint32(out[4*i:], v)
}

// putPairs writes the low two bits of a block's 32 codes for row i.
func putPairs(out []byte, i int, u []uint8) {
	for h := 0; h < 2; h++ {
		var v uint32
		for f := 0; f < 4; f++ {
			v |= (le32(u[4*(4*h+f):]) & 0x03030303) << (2 * f)
		}
		binary.LittleEndian.PutUint32(out[64*h+4*i:], v)
	}
}

// low4 is a block's codes' low nibbles.
func low4(u []uint8) [32]uint8 {
	var q [32]uint8
	for e := range q {
		q[e] = u[e] & 15
	}
	return q
}

// packRowMore writes row i of a group for the types of this file.
func packRowMore(t quant.Type, dst []byte, i int, src []byte, K int) {
	var u [quant.QK_K]uint8
	be, bb, gb := t.BlockElems(), t.BlockBytes(), pkGroupBytes[t]
	for b := 0; b < K/be; b++ {
		blk, out := src[bb*b:bb*(b+1)], dst[gb*b:gb*(b+1)]
		quant.Codes(t, blk, u[:])
		switch t {
		case quant.Q4_1, quant.IQ4_NL, quant.MXFP4:
			putNibbles(out, i, u[:32])
		case quant.Q5_0, quant.Q5_1:
			q := low4(u[:32])
			putNibbles(out, i, q[:])
			putBits(out[256:], i, u[:32], 4)
		}
		switch t {
		case quant.Q4_1:
			copy(out[256+2*i:][:2], blk[0:2])
			copy(out[288+2*i:][:2], blk[2:4])
		case quant.IQ4_NL:
			copy(out[256+2*i:][:2], blk[0:2])
		case quant.Q5_0:
			copy(out[320+2*i:][:2], blk[0:2])
		case quant.Q5_1:
			copy(out[320+2*i:][:2], blk[0:2])
			copy(out[352+2*i:][:2], blk[2:4])
		case quant.MXFP4:
			out[256+i] = blk[0]
		case quant.Q2_K:
			copy(out[2*i:][:2], blk[80:82])
			copy(out[32+2*i:][:2], blk[82:84])
			for s := 0; s < 16; s++ {
				out[64+16*s+i] = blk[s]
			}
			for k := 0; k < 8; k++ {
				putPairs(out[320+128*k:], i, u[32*k:32*k+32])
			}
		case quant.Q3_K:
			copy(out[2*i:][:2], blk[108:110])
			for s, v := range quant.ScalesQ3K(blk[96:108]) {
				out[32+16*s+i] = byte(v)
			}
			for k := 0; k < 8; k++ {
				putPairs(out[288+192*k:], i, u[32*k:32*k+32])
				putBits(out[288+192*k+128:], i, u[32*k:32*k+32], 2)
			}
		case quant.Q5_K:
			copy(out[2*i:][:2], blk[0:2])
			copy(out[32+2*i:][:2], blk[2:4])
			sc, m := quant.ScalesK4(blk[4:16])
			for j := 0; j < 8; j++ {
				out[64+16*j+i], out[192+16*j+i] = sc[j], m[j]
				q := low4(u[32*j : 32*j+32])
				putNibbles(out[320+320*j:], i, q[:])
				putBits(out[320+320*j+256:], i, u[32*j:32*j+32], 4)
			}
		case quant.IQ4_XS:
			copy(out[2*i:][:2], blk[0:2])
			for j, v := range quant.ScalesIQ4XS(blk) {
				out[32+16*j+i] = byte(v)
				putNibbles(out[160+256*j:], i, u[32*j:32*j+32])
			}
		}
	}
}

// The fields of an activation record (asm/packed.go): 32 quants, then
// these.
const (
	recD  = 32 // float32: the block's scale
	recO0 = 36 // int32: the type's offset term (first half when halves)
	recO1 = 40 // int32: the second half's offset term
	recA  = 44 // float32: scale · Σq
)

// recordsGo writes the activation records quant512Q8R and quant256Q8R do,
// in Go (their reference): per block the 32 quants of
// quant.QuantizeQ8, its scale, the offset terms and d·Σq.
func recordsGo(x *float32, r *byte, nb int, c int32, halves bool) {
	xs := unsafe.Slice(x, nb*quant.Q8Block)
	rs := unsafe.Slice(r, nb*recBytes)
	var q [quant.Q8Block]int8
	var d [1]float32
	var s [1]int32
	for b := range nb {
		quant.QuantizeQ8(xs[b*quant.Q8Block:(b+1)*quant.Q8Block], q[:], d[:], s[:])
		rec := rs[b*recBytes : (b+1)*recBytes]
		var s0, s1 int32
		for e, v := range q {
			rec[e] = byte(v)
			if e < quant.Q8Block/2 {
				s0 += int32(v)
			} else {
				s1 += int32(v)
			}
		}
		o0, o1 := c*(s0+s1), int32(0)
		if halves {
			o0, o1 = c*s0, c*s1
		}
		binary.LittleEndian.PutUint32(rec[recD:], math.Float32bits(d[0]))
		binary.LittleEndian.PutUint32(rec[recO0:], uint32(o0))
		binary.LittleEndian.PutUint32(rec[recO1:], uint32(o1))
		binary.LittleEndian.PutUint32(rec[recA:], math.Float32bits(float32(s0+s1)*d[0]))
	}
}
