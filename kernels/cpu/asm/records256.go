package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// records256 is quant512Q8R on AVX2: the integer tiles' activation
// records, per 32-element block the quants of quant.QuantizeQ8 bit for bit
// (d = amax/127, id = 1/d, q = x·id rounded to nearest even by
// VCVTPS2DQ), d, the offset terms and d·Σq (asm/packed.go's fields).
func records256() {
	TEXT("quant256Q8R", NOSPLIT, "func(x *float32, r *byte, nb int, c int32, halves bool)")
	x, r := Load(Param("x"), GP64()), Load(Param("r"), GP64())
	nb := Load(Param("nb"), GP64())
	abs, c127, one, perm := bcast32(0x7fffffff), bcast32(0x42fe0000), bcast32(0x3f800000), YMM()
	VMOVDQU(packPerm, perm)
	Label("r256_loop")
	TESTQ(nb, nb)
	JZ(LabelRef("r256_done"))
	v := make([]VecVirtual, 4)
	for i := range v {
		v[i] = YMM()
		VMOVUPS(Mem{Base: x, Disp: 32 * i}, v[i])
	}
	m, a := YMM(), YMM()
	VANDPS(abs, v[0], m)
	for i := 1; i < 4; i++ {
		VANDPS(abs, v[i], a)
		VMAXPS(a, m, m)
	}
	hx := XMM()
	VEXTRACTF128(U8(1), m, hx)
	VMAXPS(hx, m.AsX(), m.AsX())
	VPERMILPS(U8(0x4e), m.AsX(), hx)
	VMAXPS(hx, m.AsX(), m.AsX())
	VPERMILPS(U8(0xb1), m.AsX(), hx)
	VMAXSS(hx, m.AsX(), m.AsX())
	db, id, zero := XMM(), YMM(), XMM()
	VDIVSS(c127.AsX(), m.AsX(), db) // amax/127
	VMOVSS(db, Mem{Base: r, Disp: recD})
	VXORPS(id, id, id)
	VXORPS(zero, zero, zero)
	VUCOMISS(zero, db)
	JE(LabelRef("r256_zero"))
	VDIVSS(db, one.AsX(), id.AsX())
	Label("r256_zero")
	VBROADCASTSS(id.AsX(), id)
	for i := range v {
		VMULPS(id, v[i], v[i])
		VCVTPS2DQ(v[i], v[i])
	}
	// Bytes from the int32 lanes: the packs interleave 128-bit lanes,
	// packPerm puts the 4-byte groups back in order.
	p01, p23 := YMM(), YMM()
	VPACKSSDW(v[1], v[0], p01)
	VPACKSSDW(v[3], v[2], p23)
	VPACKSSWB(p23, p01, p01)
	VPERMD(p01, perm, p01)
	VMOVDQU(p01, Mem{Base: r})
	// s0, s1: the halves' sums of quants.
	s := []Register{GP32(), GP32()}
	for k := range s {
		t, h := YMM(), XMM()
		VPADDD(v[2*k+1], v[2*k], t)
		VEXTRACTI128(U8(1), t, h)
		VPADDD(h, t.AsX(), h)
		VPSHUFD(U8(0x4e), h, t.AsX())
		VPADDD(t.AsX(), h, h)
		VPSHUFD(U8(0xb1), h, t.AsX())
		VPADDD(t.AsX(), h, h)
		VMOVD(h, s[k])
	}
	c := Load(Param("c"), GP32())
	halves := Load(Param("halves"), GP8())
	sum := GP32()
	MOVL(s[0], sum)
	ADDL(s[1], sum)
	fs := XMM()
	VCVTSI2SSL(sum, fs, fs)
	VMULSS(db, fs, fs)
	VMOVSS(fs, Mem{Base: r, Disp: recA})
	TESTB(halves, halves)
	JNZ(LabelRef("r256_halves"))
	IMULL(c, sum)
	MOVL(sum, Mem{Base: r, Disp: recO0})
	MOVL(U32(0), Mem{Base: r, Disp: recO1})
	JMP(LabelRef("r256_next"))
	Label("r256_halves")
	IMULL(c, s[0])
	IMULL(c, s[1])
	MOVL(s[0], Mem{Base: r, Disp: recO0})
	MOVL(s[1], Mem{Base: r, Disp: recO1})
	Label("r256_next")
	ADDQ(U32(128), x)
	ADDQ(U32(recBytes), r)
	DECQ(nb)
	JMP(LabelRef("r256_loop"))
	Label("r256_done")
	VZEROUPPER()
	RET()
}

// packPerm orders the dwords VPACKSSDW then VPACKSSWB leave (quants 0-3,
// 8-11, 16-19, 24-27 | 4-7, 12-15, 20-23, 28-31).
var packPerm = func() Mem {
	m := GLOBL("pk256perm", RODATA|NOPTR)
	for i, v := range []uint32{0, 4, 1, 5, 2, 6, 3, 7} {
		DATA(4*i, U32(v))
	}
	return m
}()
