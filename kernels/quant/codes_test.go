package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// ggmlDequant decodes one block as ggml-quants.c's dequantize_row_* loops
// walk it, transliterated loop for loop (codes.go walks the layouts its own
// way): the two must agree on every block.
func ggmlDequant(t Type, x []byte) []float32 {
	f16 := func(b []byte) float32 { return F16ToF32(binary.LittleEndian.Uint16(b)) }
	y := make([]float32, t.BlockElems())
	switch t {
	case Q4_1:
		d, m := f16(x), f16(x[2:])
		for j := 0; j < 16; j++ {
			y[j] = float32(int(x[4+j]&0x0F))*d + m
			y[j+16] = float32(int(x[4+j]>>4))*d + m
		}
	case Q5_0, Q5_1:
		d, m, qh, qs := f16(x), float32(0), binary.LittleEndian.Uint32(x[2:]), x[6:]
		if t == Q5_1 {
			m, qh, qs = f16(x[2:]), binary.LittleEndian.Uint32(x[4:]), x[8:]
		}
		for j := 0; j < 16; j++ {
			xh0 := uint8((qh>>j)<<4) & 0x10
			xh1 := uint8(qh>>(j+12)) & 0x10
			x0, x1 := int32(qs[j]&0x0F|xh0), int32(qs[j]>>4|xh1)
			if t == Q5_0 {
				y[j], y[j+16] = float32(x0-16)*d, float32(x1-16)*d
			} else {
				y[j], y[j+16] = float32(x0)*d+m, float32(x1)*d+m
			}
		}
	case IQ4_NL:
		d := f16(x)
		for j := 0; j < 16; j++ {
			y[j] = d * float32(KValuesIQ4NL[x[2+j]&0xf])
			y[j+16] = d * float32(KValuesIQ4NL[x[2+j]>>4])
		}
	case MXFP4:
		// GGML_E8M0_TO_FP32_HALF
		var bits uint32
		switch e := x[0]; {
		case e >= 2:
			bits = uint32(e-1) << 23
		case e == 1:
			bits = 0x00400000
		default:
			bits = 0x00200000
		}
		d := math.Float32frombits(bits)
		for j := 0; j < 16; j++ {
			y[j] = d * float32(KValuesMXFP4[x[1+j]&0xf])
			y[j+16] = d * float32(KValuesMXFP4[x[1+j]>>4])
		}
	case Q2_K:
		d, dmin := f16(x[80:]), f16(x[82:])
		q, is, o := x[16:], 0, 0
		for n := 0; n < QK_K; n += 128 {
			shift := 0
			for j := 0; j < 4; j++ {
				for h := 0; h < 2; h++ {
					sc := x[is]
					is++
					dl, ml := d*float32(sc&0xF), dmin*float32(sc>>4)
					for l := 0; l < 16; l++ {
						y[o] = dl*float32(int8((q[l+16*h]>>shift)&3)) - ml
						o++
					}
				}
				shift += 2
			}
			q = q[32:]
		}
	case Q3_K:
		d := f16(x[108:])
		var aux [4]uint32
		for i := range 3 {
			aux[i] = binary.LittleEndian.Uint32(x[96+4*i:])
		}
		const kmask1, kmask2 = 0x03030303, 0x0f0f0f0f
		tmp := aux[2]
		aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4)
		aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4)
		aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4)
		aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4)
		var scales [16]int8
		for i := range scales {
			scales[i] = int8(aux[i/4] >> (8 * (i % 4)))
		}
		q, hm, m, is, o := x[32:], x[:32], uint8(1), 0, 0
		for n := 0; n < QK_K; n += 128 {
			shift := 0
			for j := 0; j < 4; j++ {
				for h := 0; h < 2; h++ {
					dl := d * float32(scales[is]-32)
					is++
					for l := 16 * h; l < 16*h+16; l++ {
						v := int8((q[l] >> shift) & 3)
						if hm[l]&m == 0 {
							v -= 4
						}
						y[o] = dl * float32(v)
						o++
					}
				}
				shift += 2
				m <<= 1
			}
			q = q[32:]
		}
	case Q5_K:
		d, dmin := f16(x), f16(x[2:])
		ql, qh, o := x[48:], x[16:48], 0
		u1, u2 := uint8(1), uint8(2)
		for j := 0; j < QK_K; j += 64 {
			sc, m := ScalesK4(x[4:16])
			is := j / 32
			d1, m1 := d*float32(sc[is]), dmin*float32(m[is])
			d2, m2 := d*float32(sc[is+1]), dmin*float32(m[is+1])
			for l := 0; l < 32; l++ {
				h := 0
				if qh[l]&u1 != 0 {
					h = 16
				}
				y[o] = d1*float32(int(ql[l]&0xF)+h) - m1
				o++
			}
			for l := 0; l < 32; l++ {
				h := 0
				if qh[l]&u2 != 0 {
					h = 16
				}
				y[o] = d2*float32(int(ql[l]>>4)+h) - m2
				o++
			}
			ql = ql[32:]
			u1 <<= 2
			u2 <<= 2
		}
	case IQ4_XS:
		d := f16(x)
		sh := binary.LittleEndian.Uint16(x[2:])
		qs := x[8:]
		for ib := 0; ib < 8; ib++ {
			ls := int(x[4+ib/2]>>(4*(ib%2)))&0xf | int((sh>>(2*ib))&3)<<4
			dl := d * float32(ls-32)
			for j := 0; j < 16; j++ {
				y[32*ib+j] = dl * float32(KValuesIQ4NL[qs[j]&0xf])
				y[32*ib+j+16] = dl * float32(KValuesIQ4NL[qs[j]>>4])
			}
			qs = qs[16:]
		}
	default:
		panic(t)
	}
	return y
}

var codeTypes = []Type{Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q5_K, IQ4_XS}

// randomBlock is a block of random bytes whose f16 scales are finite and
// modest (random halves would overflow into infinities and NaNs).
func randomBlock(r *rand.Rand, t Type) []byte {
	b := make([]byte, t.BlockBytes())
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	half := func(off int) {
		binary.LittleEndian.PutUint16(b[off:], F32ToF16((r.Float32()*2-1)*0.1))
	}
	switch t {
	case Q4_1, Q5_1, Q5_K:
		half(0)
		half(2)
	case Q5_0, IQ4_NL, IQ4_XS:
		half(0)
	case Q2_K:
		half(80)
		half(82)
	case Q3_K:
		half(108)
	case MXFP4:
		b[0] = byte(100 + r.IntN(40))
	}
	return b
}

// TestDequantMatchesGGML: every new type, on random blocks, decodes as
// ggml's loops decode it, bit for bit.
func TestDequantMatchesGGML(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, typ := range codeTypes {
		t.Run(typ.String(), func(t *testing.T) {
			for range 200 {
				blk := randomBlock(r, typ)
				want := ggmlDequant(typ, blk)
				got := make([]float32, typ.BlockElems())
				Dequantize(typ, blk, got)
				for e := range got {
					if math.Float32bits(got[e]) != math.Float32bits(want[e]) {
						t.Fatalf("element %d: %v, ggml's loop gives %v (block % x)", e, got[e], want[e], blk)
					}
				}
			}
		})
	}
}

// TestHandBuiltBlocks: blocks written byte by byte from ggml-common.h's
// structs, decoded to values worked out by hand.
func TestHandBuiltBlocks(t *testing.T) {
	const one, half, two = 0x3c00, 0x3800, 0x4000 // f16 1, 0.5, 2
	le16 := func(b []byte, v uint16) { binary.LittleEndian.PutUint16(b, v) }
	cases := []struct {
		typ   Type
		build func(b []byte)
		want  map[int]float32 // element → value
	}{
		{Q4_1, func(b []byte) { // d=2, m=0.5; qs[3] = 0x5a: elem 3 ← 0xa, elem 19 ← 0x5
			le16(b, two)
			le16(b[2:], half)
			b[4+3] = 0x5a
		}, map[int]float32{3: 20.5, 19: 10.5, 0: 0.5}},
		{Q5_0, func(b []byte) { // d=1; elem 2 nibble 3 with high bit → 19-16 = 3; elem 18 nibble 0, no high bit → -16
			le16(b, one)
			binary.LittleEndian.PutUint32(b[2:], 1<<2)
			b[6+2] = 0x03
		}, map[int]float32{2: 3, 18: -16, 31: -16}},
		{Q5_1, func(b []byte) { // d=0.5, m=-1; elem 20: high bit 20 set, nibble (byte 4 high) 1 → 17·0.5-1
			le16(b, half)
			le16(b[2:], 0xbc00)
			binary.LittleEndian.PutUint32(b[4:], 1<<20)
			b[8+4] = 0x10
		}, map[int]float32{20: 7.5, 4: -1}},
		{IQ4_NL, func(b []byte) { // d=1; elem 0 code 15 → 113, elem 16 code 0 → -127
			le16(b, one)
			b[2] = 0x0f
		}, map[int]float32{0: 113, 16: -127, 1: -127}},
		{MXFP4, func(b []byte) { // e=128: d = 2^(128-128) = 1 (the grid is doubled FP4)
			b[0] = 128
			b[1+5] = 0xf7 // elem 5 code 7 → 12, elem 21 code 15 → -12
		}, map[int]float32{5: 12, 21: -12, 0: 0}},
		{Q2_K, func(b []byte) { // d=1, dmin=0.5; sub-block 5 (elems 80-95): sc 3, m 2; elem 81: q[32·0+17] bits 4-5 (j=2) = 3
			le16(b[80:], one)
			le16(b[82:], half)
			b[5] = 0x23
			b[16+17] = 3 << 4
		}, map[int]float32{81: 3*3 - 1, 80: -1, 0: 0}},
		{Q3_K, func(b []byte) { // d=1; scale 9 = 40 (-32 → 8): low nibble in byte 1's high half, high bits (2) in byte 8+1 bits 4-5
			le16(b[108:], one)
			b[96+1] = 0x80
			b[96+9] = 2 << 4
			// elem 150 = n 1, j 0, l 22: q[32+22] bits 0-1 = 2, hm[22] bit 4 set → 2+4-4 = 2
			b[32+32+22] = 2
			b[22] = 1 << 4
		}, map[int]float32{150: 16, 151: -4 * 8, 0: 128}},
		{Q5_K, func(b []byte) { // d=1, dmin=1; sc[1]=2, m[1]=3: elem 40 (sub-block 1, l 8): high nibble 5, qh[8] bit 1 → 21·2-3
			le16(b, one)
			le16(b[2:], one)
			b[4+1] = 2
			b[4+5] = 3
			b[48+8] = 0x50
			b[16+8] = 1 << 1
		}, map[int]float32{40: 39, 41: -3, 0: 0}},
		{IQ4_XS, func(b []byte) { // d=0.5; sub-block 3: ls = 0x1 | (2<<4) = 33 → 1; elem 96+17: byte 8+48+1 high nibble 12 → 53
			le16(b, half)
			b[4+1] = 0x10
			le16(b[2:], 2<<6)
			b[8+48+1] = 0xc0
		}, map[int]float32{96 + 17: 26.5, 96 + 1: -63.5}},
	}
	for _, c := range cases {
		t.Run(c.typ.String(), func(t *testing.T) {
			blk := make([]byte, c.typ.BlockBytes())
			c.build(blk)
			got := make([]float32, c.typ.BlockElems())
			Dequantize(c.typ, blk, got)
			for e, want := range c.want {
				if got[e] != want {
					t.Errorf("element %d = %v, want %v", e, got[e], want)
				}
			}
		})
	}
}

// TestCodesValues: the codes of the types without a grid map to values in
// the ranges the packed kernels assume; ggml names types jspark refuses.
func TestCodesValues(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, typ := range codeTypes {
		blk := randomBlock(r, typ)
		u := make([]uint8, typ.BlockElems())
		Codes(typ, blk, u)
		if typ == IQ4_NL || typ == MXFP4 || typ == IQ4_XS {
			continue
		}
		for e, c := range u {
			if Value(typ, c) < -32 || Value(typ, c) > 63 {
				t.Fatalf("%v element %d: code %d", typ, e, c)
			}
		}
	}
	if got := fmt.Sprint(Type(16), " ", Type(99)); got != "IQ2_XXS (unsupported) type(99)" {
		t.Errorf("names: %q", got)
	}
}
