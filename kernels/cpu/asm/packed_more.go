package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The packed VNNI tiles of the types the K-quant files mix in (Q4_1, Q5_0,
// Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q5_K, IQ4_XS). Their codes are spread
// over a block's 8 steps (16 rows × 4 codes a load) from three pieces:
//
//   - nibbles: 4 loads, load c holds steps c (low) and c+4 (high), as Q4_0;
//   - bits: one load of one bit per code, lane byte e bit c for step c
//     (element 4c+e): the fifth bit of Q5_*, the third of Q3_K;
//   - pairs: 2 loads of 2-bit codes, load h holds step 4h+f at bits 2f, as
//     Q6_K's highs: Q2_K's codes, Q3_K's low two bits.
//
// Grid types (IQ4_NL, IQ4_XS, MXFP4) look their nibbles up (VPSHUFB) as
// grid+128, unsigned for VPDPBUSD; the records' offset term takes the 128
// back out. packed.go states each layout and its arithmetic.

// pk32Pieces: where a 32-element block type's pieces lie in a group's
// block (pkIntBytes long; -1: absent). The nibbles come first.
var pk32Pieces = map[string]struct{ bits, scale, min int }{
	"Q4_1":   {bits: -1, scale: 256, min: 288},
	"Q5_0":   {bits: 256, scale: 320, min: -1},
	"Q5_1":   {bits: 256, scale: 320, min: 352},
	"IQ4_NL": {bits: -1, scale: 256, min: -1},
	"MXFP4":  {bits: -1, scale: 256, min: -1},
}

// grids are the lookup tables of the grid types, each value + 128.
var grids = map[string]Mem{}

func gridTable(name string, vals [16]int8) Mem {
	if m, ok := grids[name]; ok {
		return m
	}
	m := GLOBL(name, RODATA|NOPTR)
	for i, v := range vals {
		DATA(i, U8(uint8(int(v)+128)))
	}
	grids[name] = m
	return m
}

func loadGrid(typ string) VecVirtual {
	var m Mem
	switch typ {
	case "IQ4_NL", "IQ4XS":
		m = gridTable("gridiq4nl", [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113})
	case "MXFP4":
		m = gridTable("gridmxfp4", [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12})
	default:
		return nil
	}
	g := ZMM()
	VBROADCASTI32X4(m, g)
	return g
}

// orBit ors into u[c] the bit of step c of the bits load h, moved to bit
// pos (mask: that bit in every byte).
func orBit(h VecVirtual, pos int, mask VecVirtual, u []VecVirtual) {
	or := ternImm(func(a, b, c bool) bool { return a || (b && c) })
	for c := range u {
		t := h
		if c != pos {
			t = ZMM()
			if c < pos {
				VPSLLW(U8(pos-c), h, t)
			} else {
				VPSRLW(U8(c-pos), h, t)
			}
		}
		VPTERNLOGD(U8(or), mask, t, u[c])
	}
}

// pairs sets u[c] to the 2-bit codes of step c from the 2 loads at m.
func pairs(m Mem, three VecVirtual, u []VecVirtual) {
	for h := 0; h < 2; h++ {
		l := ZMM()
		VMOVDQU32(m.Offset(64*h), l)
		for f := 0; f < 4; f++ {
			c := 4*h + f
			if f == 0 {
				VPANDD(three, l, u[c])
				continue
			}
			VPSRLW(U8(2*f), l, u[c])
			VPANDD(three, u[c], u[c])
		}
	}
}

func lookup(grid VecVirtual, u []VecVirtual) {
	if grid == nil {
		return
	}
	for c := range u {
		VPSHUFB(u[c], grid, u[c])
	}
}

func vecs(n int) []VecVirtual {
	u := make([]VecVirtual, n)
	for i := range u {
		u[i] = ZMM()
	}
	return u
}

// initDot starts a block's integer sum: the record's offset term where the
// type has one, else zero.
func initDot(i VecVirtual, off Mem, has bool) {
	if has {
		VPBROADCASTD(off, i)
	} else {
		VPXORD(i, i, i)
	}
}

// pk32More: the 32-element block types. Per token:
// out = fma(float(Σu·x + o), s·d_x, out), then for Q4_1 and Q5_1
// out = fma(m, d_x·Σx, out); s is the half d, or MXFP4's 2^(e−128).
func pk32More(typ, name string, w, n Register, acc []VecVirtual, rec func(t, off int) Mem, nextRec func()) {
	l := pk32Pieces[typ]
	u := vecs(8)
	lo := bcastConst(0x0f0f0f0f)
	var bit VecVirtual
	if l.bits >= 0 {
		bit = bcastConst(0x10101010)
	}
	grid := loadGrid(typ)
	var sub, half VecVirtual
	if typ == "MXFP4" {
		sub, half = bcastConst(0x00400000), bcastConst(0x3f000000)
	}
	sw, mw, i, s := ZMM(), ZMM(), ZMM(), ZMM()
	Label(name + "_block")
	TESTQ(n, n)
	JZ(LabelRef(name + "_end"))
	prefetchPart(w, pkIntBytes[typ], 0, 1)
	nibbles(Mem{Base: w}, lo, u)
	if l.bits >= 0 {
		h := ZMM()
		VMOVDQU32(Mem{Base: w, Disp: l.bits}, h)
		orBit(h, 4, bit, u)
	}
	lookup(grid, u)
	if typ == "MXFP4" {
		// 2^(e−127) as float bits, e = 0 raised to the subnormal
		// 2^−127, then halved: 2^(e−128) exactly, as E8M0Half.
		VPMOVZXBD(Mem{Base: w, Disp: l.scale}, sw)
		VPSLLD(U8(23), sw, sw)
		VPMAXUD(sub, sw, sw)
		VMULPS(half, sw, sw)
	} else {
		VCVTPH2PS(Mem{Base: w, Disp: l.scale}, sw)
	}
	if l.min >= 0 {
		VCVTPH2PS(Mem{Base: w, Disp: l.min}, mw)
	}
	for t := range acc {
		initDot(i, rec(t, recO0), typ != "Q4_1" && typ != "Q5_1")
		dots(u, func(off int) Mem { return rec(t, off) }, i, 0, 8)
		VCVTDQ2PS(i, i)
		VMULPS_BCST(rec(t, recD), sw, s)
		VFMADD231PS(s, i, acc[t])
		if l.min >= 0 {
			VFMADD231PS_BCST(rec(t, recA), mw, acc[t])
		}
	}
	ADDQ(U32(pkIntBytes[typ]), w)
	nextRec()
	DECQ(n)
	JMP(LabelRef(name + "_block"))
	Label(name + "_end")
}

// pkK32More: Q5_K (d, dmin, scales and mins as Q4_K, then per sub-block
// nibbles and fifth bits: as Q4_K) and IQ4_XS (d, [8][16] int8 scales −32
// …31, then per sub-block grid nibbles): per sub-block j,
// out = fma(float(Σu·x + o), (d·sc_j)·d_x, out), and Q5_K's
// out = fma(−(dmin·m_j), d_x·Σx, out).
func pkK32More(typ, name string, w, n Register, acc []VecVirtual, rec func(t, off int) Mem, nextRec func()) {
	q5 := typ == "Q5K"
	SHRQ(U8(3), n)
	u := vecs(8)
	lo := bcastConst(0x0f0f0f0f)
	var bit VecVirtual
	if q5 {
		bit = bcastConst(0x10101010)
	}
	grid := loadGrid(typ)
	d, dm, sc, mn, i, s := ZMM(), ZMM(), ZMM(), ZMM(), ZMM(), ZMM()
	Label(name + "_super")
	TESTQ(n, n)
	JZ(LabelRef(name + "_end"))
	VCVTPH2PS(Mem{Base: w}, d)
	if q5 {
		VCVTPH2PS(Mem{Base: w, Disp: 32}, dm)
	}
	for j := 0; j < 8; j++ {
		prefetchPart(w, pkIntBytes[typ], j, 8)
		if q5 {
			VPMOVZXBD(Mem{Base: w, Disp: 64 + 16*j}, sc)
		} else {
			VPMOVSXBD(Mem{Base: w, Disp: 32 + 16*j}, sc)
		}
		VCVTDQ2PS(sc, sc)
		VMULPS(d, sc, sc)
		if q5 {
			VPMOVZXBD(Mem{Base: w, Disp: 192 + 16*j}, mn)
			VCVTDQ2PS(mn, mn)
			VMULPS(dm, mn, mn)
			at := Mem{Base: w, Disp: 320 + 320*j}
			nibbles(at, lo, u)
			h := ZMM()
			VMOVDQU32(at.Offset(256), h)
			orBit(h, 4, bit, u)
		} else {
			nibbles(Mem{Base: w, Disp: 160 + 256*j}, lo, u)
			lookup(grid, u)
		}
		for t := range acc {
			initDot(i, rec(t, recO0), !q5)
			dots(u, func(off int) Mem { return rec(t, off) }, i, 0, 8)
			VCVTDQ2PS(i, i)
			VMULPS_BCST(rec(t, recD), sc, s)
			VFMADD231PS(s, i, acc[t])
			if q5 {
				VFNMADD231PS_BCST(rec(t, recA), mn, acc[t])
			}
		}
		nextRec()
	}
	ADDQ(U32(pkIntBytes[typ]), w)
	DECQ(n)
	JMP(LabelRef(name + "_super"))
	Label(name + "_end")
}

// pkK16: Q3_K (d, [16][16] int8 scales −32…31, then per block the pairs
// and third bits of codes u = q+4) and Q2_K (d, dmin, [16][16] bytes sc |
// m<<4 as the file's, then per block the pairs). With sub-block halves A
// and B of a block:
//
//	Q3_K: out = fma(float(sc_A·(Σ_A u·x + o0) + sc_B·(Σ_B u·x + o1)), d·d_x, out)
//	Q2_K: out = fma(float(sc_A·Σ_A u·x + sc_B·Σ_B u·x), d·d_x, out)
//	      out = fma(float(m_A·Σ_A x + m_B·Σ_B x), −(dmin·d_x), out)
//
// (the records' o0, o1 are −4·Σ_A x, −4·Σ_B x for Q3_K, Σ_A x, Σ_B x for Q2_K).
func pkK16(typ, name string, w, n Register, acc []VecVirtual, rec func(t, off int) Mem, nextRec func()) {
	q3 := typ == "Q3K"
	SHRQ(U8(3), n)
	u := vecs(8)
	three := bcastConst(0x03030303)
	var bit, low VecVirtual
	if q3 {
		bit = bcastConst(0x04040404)
	} else {
		low = bcastConst(0x0f)
	}
	d, dm, sa, sb, ma, mb, ia, ib, s := ZMM(), ZMM(), ZMM(), ZMM(), ZMM(), ZMM(), ZMM(), ZMM(), ZMM()
	Label(name + "_super")
	TESTQ(n, n)
	JZ(LabelRef(name + "_end"))
	VCVTPH2PS(Mem{Base: w}, d)
	if !q3 {
		VCVTPH2PS(Mem{Base: w, Disp: 32}, dm)
	}
	for b := 0; b < 8; b++ {
		prefetchPart(w, pkIntBytes[typ], b, 8)
		if q3 {
			VPMOVSXBD(Mem{Base: w, Disp: 32 + 16*(2*b)}, sa)
			VPMOVSXBD(Mem{Base: w, Disp: 32 + 16*(2*b+1)}, sb)
			at := Mem{Base: w, Disp: 288 + 192*b}
			pairs(at, three, u)
			h := ZMM()
			VMOVDQU32(at.Offset(128), h)
			orBit(h, 2, bit, u)
		} else {
			VPMOVZXBD(Mem{Base: w, Disp: 64 + 16*(2*b)}, ma)
			VPMOVZXBD(Mem{Base: w, Disp: 64 + 16*(2*b+1)}, mb)
			VPANDD(low, ma, sa)
			VPANDD(low, mb, sb)
			VPSRLD(U8(4), ma, ma)
			VPSRLD(U8(4), mb, mb)
			pairs(Mem{Base: w, Disp: 320 + 128*b}, three, u)
		}
		for t := range acc {
			r := func(off int) Mem { return rec(t, off) }
			initDot(ia, rec(t, recO0), q3)
			dots(u, r, ia, 0, 4)
			initDot(ib, rec(t, recO1), q3)
			dots(u, r, ib, 4, 8)
			VPMULLD(sa, ia, ia)
			VPMULLD(sb, ib, ib)
			VPADDD(ib, ia, ia)
			VCVTDQ2PS(ia, ia)
			VMULPS_BCST(rec(t, recD), d, s)
			VFMADD231PS(s, ia, acc[t])
			if !q3 {
				VPMULLD_BCST(rec(t, recO0), ma, ia)
				VPMULLD_BCST(rec(t, recO1), mb, ib)
				VPADDD(ib, ia, ia)
				VCVTDQ2PS(ia, ia)
				VMULPS_BCST(rec(t, recD), dm, s)
				VFNMADD231PS(s, ia, acc[t])
			}
		}
		nextRec()
	}
	ADDQ(U32(pkIntBytes[typ]), w)
	DECQ(n)
	JMP(LabelRef(name + "_super"))
	Label(name + "_end")
}
