package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The integer dot products of quantized weight rows with Q8 activations
// (see kernels/cpu/qdot.go for the arithmetic, which these follow lane for
// lane): qdot{vnni,avx2}{Type}x{R} compute R rows × one token.
//
// A block's 8 int32 lanes come from VPDPBUSD (AVX-512 VNNI, unsigned
// weights × signed activations) or VPMADDUBSW + VPMADDWD (AVX2); both give
// each lane the exact sum of 4 products, so both ISAs produce the same
// lanes. Weights are made unsigned by an offset whose product with the
// activations is subtracted exactly: Q8_0 adds 128 (VNNI) or moves its sign
// onto the activations (AVX2, whose 16-bit pairs would saturate), Q4_0
// subtracts 8, Q6_K 32; Q4_K's mins are a separate float term.

var qtypes = []string{"Q8_0", "Q4_0", "Q4K", "Q6K"}

const qRows = 4

func qdots() {
	for _, vnni := range []bool{true, false} {
		for _, t := range qtypes {
			for r := 1; r <= qRows; r++ {
				qdot(t, r, vnni)
			}
		}
	}
}

func qname(t string, r int, vnni bool) string {
	isa := "avx2"
	if vnni {
		isa = "vnni"
	}
	return fmt.Sprintf("qdot%s%sx%d", isa, t, r)
}

// qctx is the state one kernel's generator shares between its helpers.
type qctx struct {
	vnni bool
	ones VecVirtual // AVX2: sixteen-bit ones for VPMADDWD
}

// idot sets acc = init + the lanes of u·x (u unsigned bytes, x signed).
// init nil means zero.
func (c *qctx) idot(acc, init, u, x VecVirtual) {
	if c.vnni {
		if init == nil {
			VPXOR(acc, acc, acc)
		} else {
			VMOVDQA(init, acc)
		}
		VPDPBUSD(x, u, acc)
		return
	}
	VPMADDUBSW(x, u, acc)
	VPMADDWD(c.ones, acc, acc)
	if init != nil {
		VPADDD(init, acc, acc)
	}
}

func bcastB(c uint8) VecVirtual {
	r, v := GP32(), YMM()
	MOVL(U32(uint32(c)*0x01010101), r)
	VMOVD(r, v.AsX())
	VPBROADCASTD(v.AsX(), v)
	return v
}

// bcastF16 broadcasts the half at m to 8 floats.
func bcastF16(m Mem) VecVirtual {
	h, v := XMM(), YMM()
	VPBROADCASTW(m, h)
	VCVTPH2PS(h, v)
	return v
}

// hsum8 leaves the sum of a's 8 lanes in its lowest, by laneSum8's tree.
func hsum8(a VecVirtual) {
	x, hi := a.AsX(), XMM()
	VEXTRACTF128(U8(1), a, hi)
	VADDPS(hi, x, x)
	VPERMILPS(U8(0x4e), x, hi)
	VADDPS(hi, x, x)
	VPERMILPS(U8(0xb1), x, hi)
	VADDSS(hi, x, x)
}

func qdot(typ string, R int, vnni bool) {
	name := qname(typ, R, vnni)
	TEXT(name, NOSPLIT, "func(w *byte, ws int, x *int8, xd *float32, xs *int32, nb int, dst *float32)")
	c := &qctx{vnni: vnni}
	w0 := Load(Param("w"), GP64())
	ws := Load(Param("ws"), GP64())
	x := Load(Param("x"), GP64())
	xd := Load(Param("xd"), GP64())
	nb := Load(Param("nb"), GP64())
	if !vnni {
		r := GP32()
		MOVL(U32(0x00010001), r)
		c.ones = YMM()
		VMOVD(r, c.ones.AsX())
		VPBROADCASTD(c.ones.AsX(), c.ones)
	}
	// Row r is at w0 + r·ws (r < 3) or w3 + (r-3)·ws.
	var w3 Register
	if R > 3 {
		w3 = GP64()
		LEAQ(Mem{Base: w0, Index: ws, Scale: 2}, w3)
		ADDQ(ws, w3)
	}
	row := func(r, disp int) Mem {
		switch r {
		case 0:
			return Mem{Base: w0, Disp: disp}
		case 3:
			return Mem{Base: w3, Disp: disp}
		}
		return Mem{Base: w0, Index: ws, Scale: uint8(r), Disp: disp}
	}
	step := func(n int) {
		ADDQ(U32(n), w0)
		if w3 != nil {
			ADDQ(U32(n), w3)
		}
	}
	acc := make([]VecVirtual, R)
	for r := range acc {
		acc[r] = YMM()
		VXORPS(acc[r], acc[r], acc[r])
	}
	var macc []VecVirtual
	switch typ {
	case "Q8_0", "Q4_0":
		q32(c, typ, R, row, step, x, xd, nb, acc, name)
	case "Q4K":
		xs := Load(Param("xs"), GP64())
		macc = make([]VecVirtual, R)
		for r := range macc {
			macc[r] = YMM()
			VXORPS(macc[r], macc[r], macc[r])
		}
		q4k(c, R, row, step, x, xd, xs, nb, acc, macc, name)
	case "Q6K":
		q6k(c, R, row, step, x, xd, nb, acc, name)
	}
	dst := Load(Param("dst"), GP64())
	for r := range acc {
		hsum8(acc[r])
		if macc != nil {
			hsum8(macc[r])
			VSUBSS(macc[r].AsX(), acc[r].AsX(), acc[r].AsX())
		}
		VMOVSS(acc[r].AsX(), Mem{Base: dst, Disp: 4 * r})
	}
	VZEROUPPER()
	RET()
}

// q32: Q8_0 (34-byte blocks: d, 32 int8) and Q4_0 (18-byte blocks: d, 16
// bytes of nibbles, element j low and j+16 high).
func q32(c *qctx, typ string, R int, row func(r, disp int) Mem, step func(int), x, xd, nb Register, acc []VecVirtual, name string) {
	size := 34
	var off, mask VecVirtual
	switch {
	case typ == "Q4_0":
		size, off, mask = 18, bcastB(8), bcastB(15)
	case c.vnni:
		off = bcastB(0x80)
	}
	xv, neg, u, iv := YMM(), YMM(), YMM(), YMM()
	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	VMOVDQU(Mem{Base: x}, xv)
	dx := YMM()
	VBROADCASTSS(Mem{Base: xd}, dx)
	if off != nil {
		// neg = -(off·x) per lane.
		z := YMM()
		c.idot(z, nil, off, xv)
		VPXOR(neg, neg, neg)
		VPSUBD(z, neg, neg)
	}
	for r := 0; r < R; r++ {
		if typ == "Q8_0" {
			VMOVDQU(row(r, 2), u)
			if c.vnni {
				VPXOR(off, u, u) // w + 128
				c.idot(iv, neg, u, xv)
			} else {
				sx := YMM()
				VPSIGNB(u, xv, sx) // x·sign(w)
				VPABSB(u, u)
				c.idot(iv, nil, u, sx)
			}
		} else {
			hi := XMM()
			VMOVDQU(row(r, 2), u.AsX())
			VPSRLW(U8(4), u.AsX(), hi)
			VINSERTI128(U8(1), hi, u, u)
			VPAND(mask, u, u)
			c.idot(iv, neg, u, xv)
		}
		VCVTDQ2PS(iv, iv)
		s := bcastF16(row(r, 0))
		VMULPS(dx, s, s)
		VFMADD231PS(s, iv, acc[r])
	}
	ADDQ(U32(32), x)
	ADDQ(U32(4), xd)
	step(size)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
}

// q4k: 144-byte super-blocks of 8 sub-blocks: d, dmin, 12 bytes of 6-bit
// scales and mins, 128 bytes of nibbles (pair p: sub-block 2p low, 2p+1
// high).
func q4k(c *qctx, R int, row func(r, disp int) Mem, step func(int), x, xd, xs, nb Register, acc, macc []VecVirtual, name string) {
	scale := AllocLocal(32 * R)
	mask := bcastB(15)
	SHRQ(U8(3), nb)
	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	dxv, xsv := YMM(), YMM()
	VMOVUPS(Mem{Base: xd}, dxv)
	VCVTDQ2PS(Mem{Base: xs}, xsv)
	VMULPS(xsv, dxv, xsv)
	for r := 0; r < R; r++ {
		// The scales and mins as llama.cpp unpacks them: four words,
		// sc[0..3] sc[4..7] m[0..3] m[4..7].
		u0, u1, u2, t := GP32(), GP32(), GP32(), GP32()
		MOVL(row(r, 4), u0)
		MOVL(row(r, 8), u1)
		MOVL(row(r, 12), u2)
		sc1, m1 := GP32(), GP32()
		// m[4..7] = (u2>>4)&0x0f0f0f0f | ((u1>>6)&0x03030303)<<4
		MOVL(u2, m1)
		SHRL(U8(4), m1)
		ANDL(U32(0x0f0f0f0f), m1)
		MOVL(u1, t)
		SHRL(U8(6), t)
		ANDL(U32(0x03030303), t)
		SHLL(U8(4), t)
		ORL(t, m1)
		// sc[4..7] = u2&0x0f0f0f0f | ((u0>>6)&0x03030303)<<4
		MOVL(u2, sc1)
		ANDL(U32(0x0f0f0f0f), sc1)
		MOVL(u0, t)
		SHRL(U8(6), t)
		ANDL(U32(0x03030303), t)
		SHLL(U8(4), t)
		ORL(t, sc1)
		ANDL(U32(0x3f3f3f3f), u0) // sc[0..3]
		ANDL(U32(0x3f3f3f3f), u1) // m[0..3]
		scv, mv := YMM(), YMM()
		VMOVD(u0, scv.AsX())
		VPINSRD(U8(1), sc1, scv.AsX(), scv.AsX())
		VPMOVZXBD(scv.AsX(), scv)
		VCVTDQ2PS(scv, scv)
		VMOVD(u1, mv.AsX())
		VPINSRD(U8(1), m1, mv.AsX(), mv.AsX())
		VPMOVZXBD(mv.AsX(), mv)
		VCVTDQ2PS(mv, mv)
		d := bcastF16(row(r, 0))
		VMULPS(scv, d, scv)
		VMULPS(dxv, scv, scv)
		VMOVUPS(scv, scale.Offset(32*r))
		dmin := bcastF16(row(r, 2))
		VMULPS(mv, dmin, mv)
		VFMADD231PS(xsv, mv, macc[r])
	}
	xv, u, iv := YMM(), YMM(), YMM()
	for p := 0; p < 4; p++ {
		for h := 0; h < 2; h++ {
			j := 2*p + h
			VMOVDQU(Mem{Base: x, Disp: 32 * j}, xv)
			for r := 0; r < R; r++ {
				VMOVDQU(row(r, 16+32*p), u)
				if h == 1 {
					VPSRLW(U8(4), u, u)
				}
				VPAND(mask, u, u)
				c.idot(iv, nil, u, xv)
				VCVTDQ2PS(iv, iv)
				s := YMM()
				VBROADCASTSS(scale.Offset(32*r+4*j), s)
				VFMADD231PS(s, iv, acc[r])
			}
		}
	}
	ADDQ(U32(256), x)
	ADDQ(U32(32), xd)
	ADDQ(U32(32), xs)
	step(144)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
}

var q6kIdx = func() Mem {
	m := GLOBL("q6kidx", RODATA|NOPTR)
	for i := 0; i < 8; i++ {
		DATA(4*i, U32(uint32(i/4)))
	}
	return m
}()

// q6k: 210-byte super-blocks: ql[128] low nibbles, qh[64] high bit pairs,
// 16 int8 scales (one per 16 elements), d.
func q6k(c *qctx, R int, row func(r, disp int) Mem, step func(int), x, xd, nb Register, acc []VecVirtual, name string) {
	scale := AllocLocal(32 * R)
	mask, hmask, off := bcastB(15), bcastB(0x30), bcastB(32)
	idx := YMM()
	VMOVDQU(q6kIdx, idx)
	SHRQ(U8(3), nb)
	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	dxv := YMM()
	VMOVUPS(Mem{Base: xd}, dxv)
	for r := 0; r < R; r++ {
		d := bcastF16(row(r, 208))
		VMULPS(dxv, d, d)
		VMOVUPS(d, scale.Offset(32*r))
	}
	xv, neg, u, hb, iv, scl := YMM(), YMM(), YMM(), YMM(), YMM(), YMM()
	for h := 0; h < 2; h++ {
		for g := 0; g < 4; g++ {
			b := 4*h + g
			VMOVDQU(Mem{Base: x, Disp: 32 * b}, xv)
			z := YMM()
			c.idot(z, nil, off, xv)
			VPXOR(neg, neg, neg)
			VPSUBD(z, neg, neg)
			for r := 0; r < R; r++ {
				VMOVDQU(row(r, 64*h+32*(g%2)), u)
				if g >= 2 {
					VPSRLW(U8(4), u, u)
				}
				VPAND(mask, u, u)
				VMOVDQU(row(r, 128+32*h), hb)
				switch {
				case g < 2:
					VPSLLW(U8(4-2*g), hb, hb)
				case g == 3:
					VPSRLW(U8(2), hb, hb)
				}
				VPAND(hmask, hb, hb)
				VPOR(hb, u, u)
				c.idot(iv, neg, u, xv)
				VPMOVSXBD(row(r, 192+8*h+2*g), scl.AsX())
				VPERMD(scl, idx, scl)
				VPMULLD(scl, iv, iv)
				VCVTDQ2PS(iv, iv)
				s := YMM()
				VBROADCASTSS(scale.Offset(32*r+4*b), s)
				VFMADD231PS(s, iv, acc[r])
			}
		}
	}
	ADDQ(U32(256), x)
	ADDQ(U32(32), xd)
	step(210)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
}
