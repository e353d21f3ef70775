package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The AVX2 integer dots of the types K-quant files mix in, lane for lane
// as kernels/cpu/qdot_more.go states them. Values whose pair products
// could saturate VPMADDUBSW's 16 bits (the grids, up to ±127) move their
// sign onto the activations as Q8_0 does; the others are small unsigned
// codes with the offset subtracted exactly (negDot). Constants live in
// memory where registers run short (16 ymm).

// finish adjusts a row's sum (in a's lowest lane, after hsum8) by its
// second accumulator: the min terms.
type finish func(t, r int, a VecVirtual)

var (
	bytes16 = constBytes("qbytes16", func(i int) uint8 { return 0x10 })
	bytes04 = constBytes("qbytes04", func(i int) uint8 { return 0x04 })
	bytes03 = constBytes("qbytes03", func(i int) uint8 { return 0x03 })
	bytes0f = constBytes("qbytes0f", func(i int) uint8 { return 0x0f })
	// expand32 broadcasts byte i/8 of a dword to byte i, then tests bit i%8.
	bitIdx  = constBytes("qbitidx", func(i int) uint8 { return uint8(i / 8) })
	bitMask = constBytes("qbitmask", func(i int) uint8 { return 1 << (i % 8) })
	ones8   = constBytes("qones8", func(i int) uint8 { return 1 })
	// dword 0x0000000f, for scale bytes widened to dwords
	dword0f = constBytes("qdword0f", func(i int) uint8 {
		if i%4 == 0 {
			return 0x0f
		}
		return 0
	})
	gridIQ4NL = constBytes("qgridiq4nl", func(i int) uint8 {
		return uint8([16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}[i%16])
	})
	gridMXFP4 = constBytes("qgridmxfp4", func(i int) uint8 {
		return uint8([16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}[i%16])
	})
)

// constBytes is a 32-byte constant, byte i = f(i).
func constBytes(name string, f func(i int) uint8) Mem {
	m := GLOBL(name, RODATA|NOPTR)
	for i := 0; i < 32; i++ {
		DATA(i, U8(f(i)))
	}
	return m
}

// nib32 sets u to a 32-block's 32 four-bit codes from its 16 bytes at m
// (byte j: code j low, code j+16 high).
func nib32(c *qctx, m Mem, u VecVirtual) {
	hi := XMM()
	c.movdqu(m, u.AsX())
	VPSRLW(U8(4), u.AsX(), hi)
	VINSERTI128(U8(1), hi, u, u)
	VPAND(bytes0f, u, u)
}

// bits32 ors into u the 32 bits of the dword at m, bit e to byte e as 0x10.
func bits32(m Mem, u VecVirtual) {
	b := YMM()
	VPBROADCASTD(m, b)
	VPSHUFB(bitIdx, b, b)
	VPAND(bitMask, b, b)
	VPCMPEQB(bitMask, b, b)
	VPAND(bytes16, b, b)
	VPOR(b, u, u)
}

// signedDot sets iv to the lanes of w·x for signed bytes w (|w| ≤ 127).
func signedDot(c *qctx, iv, w, x VecVirtual) {
	sx, aw := YMM(), YMM()
	VPSIGNB(w, x, sx)
	VPABSB(w, aw)
	c.idot(iv, nil, aw, sx)
}

// q32More: Q4_1 (20 bytes: d, m, nibbles), Q5_0 (22: d, qh, nibbles),
// Q5_1 (24: d, m, qh, nibbles), IQ4_NL (18: d, nibbles of the grid) and
// MXFP4 (17: e, nibbles of the grid). acc += lanes·(d·dx); Q4_1 and Q5_1
// add m·(dx·Σx) to one float a block (their finish).
func q32More(c *qctx, typ string, nb Register, acc [][]VecVirtual, name string) finish {
	l := map[string]struct{ size, d, m, qh, qs int }{
		"Q4_1": {20, 0, 2, -1, 4}, "Q5_0": {22, 0, -1, 2, 6}, "Q5_1": {24, 0, 2, 4, 8},
		"IQ4_NL": {18, 0, -1, -1, 2}, "MXFP4": {17, -1, -1, -1, 1},
	}[typ]
	var grid VecVirtual
	hasGrid := typ == "IQ4_NL" || typ == "MXFP4"
	if hasGrid {
		grid = YMM()
		VMOVDQU(map[string]Mem{"IQ4_NL": gridIQ4NL, "MXFP4": gridMXFP4}[typ], grid)
	}
	var msum [][]VecVirtual
	if l.m >= 0 {
		msum = grid2(c.T, c.R, XMM)
	}
	xv, dx, neg, sx := make([]VecVirtual, c.T), make([]VecVirtual, c.T), make([]VecVirtual, c.T), make([]VecVirtual, c.T)
	for t := range xv {
		xv[t], dx[t] = YMM(), YMM()
		if typ == "Q5_0" {
			neg[t] = YMM()
		}
		if l.m >= 0 {
			sx[t] = XMM()
		}
	}
	u, iv, s := YMM(), YMM(), YMM()
	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	for t := range xv {
		c.movdqu(c.xq(t, 0), xv[t])
		VBROADCASTSS(c.xd(t, 0), dx[t])
		if typ == "Q5_0" {
			off := YMM()
			VMOVDQU(bytes16, off)
			c.negDot(neg[t], off, xv[t])
		}
		if l.m >= 0 {
			VCVTSI2SSL(c.xs(t, 0), sx[t], sx[t])
			VMULSS(c.xd(t, 0), sx[t], sx[t]) // dx·Σx
		}
	}
	for r := 0; r < c.R; r++ {
		nib32(c, c.row(r, l.qs), u)
		if l.qh >= 0 {
			bits32(c.row(r, l.qh), u)
		}
		if hasGrid {
			VPSHUFB(u, grid, u)
		}
		c.prefetch(r, 0)
		var dw VecVirtual
		if typ == "MXFP4" {
			dw = e8m0Half(c.row(r, 0))
		} else {
			dw = bcastF16(c.row(r, l.d))
		}
		for t := range xv {
			if hasGrid {
				signedDot(c, iv, u, xv[t])
			} else {
				var init VecVirtual
				if typ == "Q5_0" {
					init = neg[t]
				}
				c.idot(iv, init, u, xv[t])
			}
			VCVTDQ2PS(iv, iv)
			VMULPS(dw, dx[t], s)
			VFMADD231PS(s, iv, acc[t][r])
			if l.m >= 0 {
				m := bcastF16(c.row(r, l.m))
				VMULSS(sx[t], m.AsX(), m.AsX())
				VADDSS(m.AsX(), msum[t][r], msum[t][r])
			}
		}
	}
	c.advance(l.size, 32, 4)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
	if msum == nil {
		return nil
	}
	return func(t, r int, a VecVirtual) { VADDSS(msum[t][r], a.AsX(), a.AsX()) }
}

func grid2(T, R int, alloc func() VecVirtual) [][]VecVirtual {
	g := make([][]VecVirtual, T)
	for t := range g {
		g[t] = make([]VecVirtual, R)
		for r := range g[t] {
			g[t][r] = alloc()
			VXORPS(g[t][r], g[t][r], g[t][r])
		}
	}
	return g
}

// e8m0Half broadcasts 2^(e−128) for the exponent byte at m (quant.E8M0Half):
// e<<23 as float bits, raised to the subnormal 2^−127 for e = 0, halved.
func e8m0Half(m Mem) VecVirtual {
	e, lo := GP32(), GP32()
	MOVBLZX(m, e)
	SHLL(U8(23), e)
	MOVL(U32(0x00400000), lo)
	CMPL(e, lo)
	CMOVLCS(lo, e) // e < 2^−127's bits (unsigned): take them
	v, h := YMM(), XMM()
	VMOVD(e, v.AsX())
	MOVL(U32(0x3f000000), lo)
	VMOVD(lo, h)
	VMULSS(h, v.AsX(), v.AsX())
	VBROADCASTSS(v.AsX(), v)
	return v
}

var dword32 = constBytes("qdword32", func(i int) uint8 {
	if i%4 == 0 {
		return 32
	}
	return 0
})

// iq4xs: 136-byte super-blocks: d, scales_h (2 bits a sub-block), scales_l
// (4 bits a sub-block), 8 sub-blocks of 16 bytes of grid nibbles (as
// IQ4_NL). Sub-block j: acc += lanes·((d·(ls_j−32))·dx_j).
func iq4xs(c *qctx, nb Register, acc [][]VecVirtual, name string) {
	T, R := c.T, c.R
	scale := AllocLocal(32 * R * T) // (d·sc_j)·dx_j per row, token, sub-block
	slot := func(r, t, j int) Mem { return scale.Offset(32*(r*T+t) + 4*j) }
	ints := AllocLocal(32)
	SHRQ(U8(3), nb)
	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	for r := 0; r < R; r++ {
		for l := 0; l < 136; l += 64 {
			c.prefetch(r, l)
		}
		c.prefetch(r, 135)
		h, v, w := GP32(), GP32(), GP32()
		MOVWLZX(c.row(r, 2), h)
		for j := 0; j < 8; j++ {
			MOVBLZX(c.row(r, 4+j/2), v)
			if j%2 == 1 {
				SHRL(U8(4), v)
			}
			ANDL(U32(15), v)
			MOVL(h, w)
			if j > 0 {
				SHRL(U8(2*j), w)
			}
			ANDL(U32(3), w)
			SHLL(U8(4), w)
			ORL(w, v)
			SUBL(U32(32), v)
			MOVL(v, ints.Offset(4*j))
		}
		scv := YMM()
		VCVTDQ2PS(ints, scv)
		d := bcastF16(c.row(r, 0))
		VMULPS(scv, d, scv)
		for t := 0; t < T; t++ {
			dxv := YMM()
			VMULPS(c.xd(t, 0), scv, dxv)
			VMOVUPS(dxv, slot(r, t, 0))
		}
	}
	xv := make([]VecVirtual, T)
	for t := range xv {
		xv[t] = YMM()
	}
	u, iv, s, grid := YMM(), YMM(), YMM(), YMM()
	VMOVDQU(gridIQ4NL, grid)
	for j := 0; j < 8; j++ {
		for t := range xv {
			c.movdqu(c.xq(t, 32*j), xv[t])
		}
		for r := 0; r < R; r++ {
			nib32(c, c.row(r, 8+16*j), u)
			VPSHUFB(u, grid, u)
			for t := range xv {
				signedDot(c, iv, u, xv[t])
				VCVTDQ2PS(iv, iv)
				VBROADCASTSS(slot(r, t, j), s)
				VFMADD231PS(s, iv, acc[t][r])
			}
		}
	}
	c.advance(136, 256, 32)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
}

// q2k3k: Q3_K (110-byte super-blocks: hmask[32] third bits, qs[64] 2-bit
// codes, 12 bytes of six-bit scales, d) and Q2_K (84: 16 bytes sc | m<<4,
// qs[64], d, dmin). Block b = 4n+j of a super-block takes bits 2j of
// qs[32n…] (and bit b of hmask), lanes 0-3 the scale of its sub-block 2b,
// 4-7 of 2b+1 (as Q6_K): acc += (sc·lanes)·(d·dx). Q3_K's codes are
// value+4 (negDot takes the 4 back); Q2_K's mins m·(lane's Σx) go to
// second lanes, kept in memory, scaled by dmin·dx (its finish subtracts
// them).
func q2k3k(c *qctx, typ string, nb Register, acc [][]VecVirtual, name string) finish {
	T, R := c.T, c.R
	q3 := typ == "Q3K"
	size, qs := 84, 16
	if q3 {
		size, qs = 110, 32
	}
	dd := AllocLocal(32 * R * T) // d·dx_b per row, token, block
	slot := func(m Mem, r, t, b int) Mem { return m.Offset(32*(r*T+t) + 4*b) }
	var dm, macc, sc3 Mem
	if q3 {
		sc3 = AllocLocal(24 * R) // the 16 scales (0…63) of each row, and room to read 8
	} else {
		dm = AllocLocal(32 * R * T)   // dmin·dx_b
		macc = AllocLocal(32 * R * T) // the min lanes
		z := YMM()
		VXORPS(z, z, z)
		for i := 0; i < R*T; i++ {
			VMOVUPS(z, macc.Offset(32*i))
		}
	}
	idx := YMM()
	c.movdqu(q6kIdx, idx)
	SHRQ(U8(3), nb)
	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	for r := 0; r < R; r++ {
		for l := 0; l < size; l += 64 {
			c.prefetch(r, l)
		}
		c.prefetch(r, size-1)
		if q3 {
			// ggml's unpacking of the 12 bytes: four dwords of scales
			a0, a1, tmp, v, h := GP32(), GP32(), GP32(), GP32(), GP32()
			MOVL(c.row(r, 96), a0)
			MOVL(c.row(r, 100), a1)
			MOVL(c.row(r, 104), tmp)
			for k, src := range []struct {
				a     Register
				shift int
			}{{a0, 0}, {a1, 0}, {a0, 4}, {a1, 4}} {
				MOVL(src.a, v)
				if src.shift > 0 {
					SHRL(U8(4), v)
				}
				ANDL(U32(0x0f0f0f0f), v)
				MOVL(tmp, h)
				if k > 0 {
					SHRL(U8(2*k), h)
				}
				ANDL(U32(0x03030303), h)
				SHLL(U8(4), h)
				ORL(h, v)
				MOVL(v, sc3.Offset(24*r+4*k))
			}
		}
		dOff := 80
		if q3 {
			dOff = 108
		}
		d := bcastF16(c.row(r, dOff))
		var dmin VecVirtual
		if !q3 {
			dmin = bcastF16(c.row(r, 82))
		}
		for t := 0; t < T; t++ {
			v := YMM()
			VMULPS(c.xd(t, 0), d, v)
			VMOVUPS(v, slot(dd, r, t, 0))
			if !q3 {
				VMULPS(c.xd(t, 0), dmin, v)
				VMOVUPS(v, slot(dm, r, t, 0))
			}
		}
	}
	xv, neg, xsl := make([]VecVirtual, T), make([]VecVirtual, T), make([]VecVirtual, T)
	for t := range xv {
		xv[t], neg[t] = YMM(), YMM()
	}
	var one8 VecVirtual
	if !q3 {
		one8 = YMM()
		VMOVDQU(ones8, one8)
	}
	u, iv, scl, s := YMM(), YMM(), YMM(), YMM()
	for b := 0; b < 8; b++ {
		n, j := b/4, b%4
		for t := range xv {
			c.movdqu(c.xq(t, 32*b), xv[t])
			if q3 {
				off := YMM()
				VMOVDQU(bytes04, off)
				c.negDot(neg[t], off, xv[t])
			} else {
				xsl[t] = neg[t] // the lanes' Σx
				VPMADDUBSW(xv[t], one8, xsl[t])
				VPMADDWD(c.ones, xsl[t], xsl[t])
			}
		}
		for r := 0; r < R; r++ {
			c.movdqu(c.row(r, qs+32*n), u)
			if j > 0 {
				VPSRLW(U8(2*j), u, u)
			}
			VPAND(bytes03, u, u)
			if q3 {
				hb := YMM()
				c.movdqu(c.row(r, 0), hb)
				switch {
				case b < 2:
					VPSLLW(U8(2-b), hb, hb)
				case b > 2:
					VPSRLW(U8(b-2), hb, hb)
				}
				VPAND(bytes04, hb, hb)
				c.por(hb, u, u)
				VPMOVZXBD(sc3.Offset(24*r+2*b), scl)
				VPERMD(scl, idx, scl)
				VPSUBD(dword32, scl, scl)
			} else {
				VPMOVZXBD(c.row(r, 2*b), scl)
				VPERMD(scl, idx, scl)
			}
			for t := range xv {
				var init VecVirtual
				if q3 {
					init = neg[t]
				}
				c.idot(iv, init, u, xv[t])
				if q3 {
					VPMULLD(scl, iv, iv)
				} else {
					sc := YMM()
					VPAND(dword0f, scl, sc)
					VPMULLD(sc, iv, iv)
				}
				VCVTDQ2PS(iv, iv)
				VBROADCASTSS(slot(dd, r, t, b), s)
				VFMADD231PS(s, iv, acc[t][r])
				if !q3 {
					ml, mv := YMM(), YMM()
					VPSRLD(U8(4), scl, ml)
					VPMULLD(xsl[t], ml, ml)
					VCVTDQ2PS(ml, ml)
					VMOVUPS(slot(macc, r, t, 0), mv)
					VBROADCASTSS(slot(dm, r, t, b), s)
					VFMADD231PS(s, ml, mv)
					VMOVUPS(mv, slot(macc, r, t, 0))
				}
			}
		}
	}
	c.advance(size, 256, 32)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
	if q3 {
		return nil
	}
	return func(t, r int, a VecVirtual) {
		m := YMM()
		VMOVUPS(slot(macc, r, t, 0), m)
		hsum8(m, false)
		VSUBSS(m.AsX(), a.AsX(), a.AsX())
	}
}
