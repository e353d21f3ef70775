package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The AVX2 integer tiles of the types K-quant mixes add (packed_more.go
// lays them out): the bodies pk256Int runs for Q5_K, Q4_1, Q5_0, Q5_1,
// IQ4_NL, MXFP4, IQ4_XS, Q3_K and Q2_K.

// fiveSums sets i[t] to token t's int32 dot products over the 8 steps
// of half h of a block of 5-bit codes: nibbles at off (4 loads: load c
// holds steps c and c+4) and one load of fifth bits at bits (byte e of a
// lane, bit c: step c's element e). Codes are 0…31, so two steps' pair
// sums (2·2·31·127) add up in int16 before VPMADDWD (ones: int16 ones).
func fiveSums(c pass256, h int, lo, bit VecVirtual, off, bits, T int, ones Mem) []VecVirtual {
	step := func(s int) VecVirtual {
		u, e := YMM(), YMM()
		VMOVDQU(c.at(h, off+64*(s%4)), u)
		if s >= 4 {
			VPSRLW(U8(4), u, u)
		}
		VPAND(lo, u, u)
		VMOVDQU(c.at(h, bits), e)
		switch {
		case s < 4:
			VPSLLW(U8(4-s), e, e)
		case s > 4:
			VPSRLW(U8(s-4), e, e)
		}
		VPAND(bit, e, e)
		VPOR(e, u, u)
		return u
	}
	i := make([]VecVirtual, T)
	for s := 0; s < 8; s += 2 {
		u0, u1 := step(s), step(s+1)
		for t := range i {
			x, y := YMM(), YMM()
			VPBROADCASTD(c.rec(t, 4*s), x)
			VPMADDUBSW(x, u0, x)
			VPBROADCASTD(c.rec(t, 4*(s+1)), y)
			VPMADDUBSW(y, u1, y)
			VPADDW(y, x, x)
			VPMADDWD(ones, x, x)
			if s == 0 {
				i[t] = x
			} else {
				VPADDD(x, i[t], i[t])
			}
		}
	}
	return i
}

// onesOnStack is int16 ones in a stack slot (a register saved).
func onesOnStack() Mem {
	m := AllocLocal(32)
	VMOVDQU(bcast32(0x00010001), m)
	return m
}

// pk256Q5K: as Q4_K, each sub-block's nibbles followed by one load of its
// fifth bits (fiveSums).
func pk256Q5K(c pass256) {
	SHRQ(U8(3), c.n)
	lo, bit := bcastByte(0x0f), bcastByte(0x10)
	ones := onesOnStack()
	blockLoop(c.name, "super", c.n, func() {
		for j := 0; j < 8; j++ {
			c.prefetch(j, 8)
			at := 320 + 320*j
			for k, h := range c.hs {
				i := fiveSums(c, h, lo, bit, at, at+256, len(c.acc[k]), ones)
				sc, mn := YMM(), YMM()
				scaled := func(m, d Mem, v VecVirtual) {
					f := YMM()
					VCVTPH2PS(d, f)
					VPMOVZXBD(m, v)
					VCVTDQ2PS(v, v)
					VMULPS(f, v, v)
				}
				scaled(Mem{Base: c.w, Disp: 64 + 16*j + 8*h}, Mem{Base: c.w, Disp: 16 * h}, sc)
				scaled(Mem{Base: c.w, Disp: 192 + 16*j + 8*h}, Mem{Base: c.w, Disp: 32 + 16*h}, mn)
				for t := range i {
					scaleInto(i[t], sc, c.acc[k][t], c.rec(t, recD))
					a := YMM()
					VBROADCASTSS(c.rec(t, recA), a)
					VFNMADD231PS(a, mn, c.acc[k][t])
				}
			}
			c.next()
		}
		ADDQ(U32(2880), c.w)
	})
}

// pk256Q32More: Q4_1, Q5_0, Q5_1 (pk32Pieces lays them out): per block,
// out = fma(float(Σu·x + o), d·d_x, out), then for Q4_1 and Q5_1
// out = fma(m, d_x·Σx, out); o is Q5_0's −16·Σx.
func pk256Q32More(typ string, c pass256) {
	l := pk32Pieces[typ]
	lo, ones := bcastByte(0x0f), onesOnStack()
	var bit VecVirtual
	if l.bits >= 0 {
		bit = bcastByte(0x10)
	}
	blockLoop(c.name, "block", c.n, func() {
		c.prefetch(0, 1)
		for k, h := range c.hs {
			T := len(c.acc[k])
			var i []VecVirtual
			if l.bits >= 0 {
				i = fiveSums(c, h, lo, bit, 0, l.bits, T, ones)
			} else if c.vnni {
				i = nibbleDots(c, h, lo, 0, T)
			} else {
				i = nibbleSums(c, h, lo, 0, T)
				for _, v := range i {
					VPMADDWD(ones, v, v)
				}
			}
			if typ == "Q5_0" {
				for t, v := range i {
					o := YMM()
					VPBROADCASTD(c.rec(t, recO0), o)
					VPADDD(o, v, v)
				}
			}
			sw := YMM()
			VCVTPH2PS(Mem{Base: c.w, Disp: l.scale + 16*h}, sw)
			var mw VecVirtual
			if l.min >= 0 {
				mw = YMM()
				VCVTPH2PS(Mem{Base: c.w, Disp: l.min + 16*h}, mw)
			}
			for t, v := range i {
				scaleInto(v, sw, c.acc[k][t], c.rec(t, recD))
				if l.min >= 0 {
					a := YMM()
					VBROADCASTSS(c.rec(t, recA), a)
					VFMADD231PS(a, mw, c.acc[k][t])
				}
			}
		}
		ADDQ(U32(pkIntBytes[typ]), c.w)
		c.next()
	})
}

// grid256 is a grid type's 16 signed values in both 128-bit lanes, for
// VPSHUFB.
func grid256(typ string) VecVirtual {
	name, vals := "pk256gridiq4nl", [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
	if typ == "MXFP4" {
		name, vals = "pk256gridmxfp4", [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}
	}
	m, ok := grids[name]
	if !ok {
		m = GLOBL(name, RODATA|NOPTR)
		for i := range 32 {
			DATA(i, U8(uint8(vals[i%16])))
		}
		grids[name] = m
	}
	g := YMM()
	VMOVDQU(m, g)
	return g
}

// gridSums sets i[t] to token t's int32 Σv·x over the 8 steps of half h
// of a block of grid nibbles at off: v = grid[nibble] by VPSHUFB, then
// |v| times x·sign(v) as Q8_0's (|v| ≤ 127: no saturation). The records'
// offset (the AVX-512 tiles' v+128) is not used.
func gridSums(c pass256, h int, lo, grid VecVirtual, off, T int, ones Mem) []VecVirtual {
	i := make([]VecVirtual, T)
	for s := 0; s < 8; s++ {
		v, a := YMM(), YMM()
		VMOVDQU(c.at(h, off+64*(s%4)), v)
		if s >= 4 {
			VPSRLW(U8(4), v, v)
		}
		VPAND(lo, v, v)
		VPSHUFB(v, grid, v)
		VPABSB(v, a)
		for t := range i {
			x := YMM()
			VPBROADCASTD(c.rec(t, 4*s), x)
			VPSIGNB(v, x, x)
			VPMADDUBSW(x, a, x)
			VPMADDWD(ones, x, x)
			if s == 0 {
				i[t] = x
			} else {
				VPADDD(x, i[t], i[t])
			}
		}
	}
	return i
}

// pk256Grid: IQ4_NL and MXFP4 (nibbles, then 16 halves d or exponent
// bytes e: s = 2^(e−128)), out = fma(float(Σv·x), s·d_x, out); IQ4_XS
// (d, [8][16] int8 scales, 8 sub-blocks of nibbles), per sub-block j
// out = fma(float(Σv·x), (d·sc_j)·d_x, out).
func pk256Grid(typ string, c pass256) {
	lo, grid, ones := bcastByte(0x0f), grid256(typ), onesOnStack()
	if typ == "IQ4XS" {
		SHRQ(U8(3), c.n)
		blockLoop(c.name, "super", c.n, func() {
			for j := 0; j < 8; j++ {
				c.prefetch(j, 8)
				for k, h := range c.hs {
					i := gridSums(c, h, lo, grid, 160+256*j, len(c.acc[k]), ones)
					sc, d := YMM(), YMM()
					VCVTPH2PS(Mem{Base: c.w, Disp: 16 * h}, d)
					VPMOVSXBD(Mem{Base: c.w, Disp: 32 + 16*j + 8*h}, sc)
					VCVTDQ2PS(sc, sc)
					VMULPS(d, sc, sc)
					for t := range i {
						scaleInto(i[t], sc, c.acc[k][t], c.rec(t, recD))
					}
				}
				c.next()
			}
			ADDQ(U32(2208), c.w)
		})
		return
	}
	blockLoop(c.name, "block", c.n, func() {
		c.prefetch(0, 1)
		for k, h := range c.hs {
			i := gridSums(c, h, lo, grid, 0, len(c.acc[k]), ones)
			sw := YMM()
			if typ == "MXFP4" {
				// 2^(e−127) as float bits, e = 0 raised to the subnormal
				// 2^−127, then halved: 2^(e−128) exactly, as E8M0Half.
				VPMOVZXBD(Mem{Base: c.w, Disp: 256 + 8*h}, sw)
				VPSLLD(U8(23), sw, sw)
				VPMAXUD(bcast32(0x00400000), sw, sw)
				VMULPS(bcast32(0x3f000000), sw, sw)
			} else {
				VCVTPH2PS(Mem{Base: c.w, Disp: 256 + 16*h}, sw)
			}
			for t := range i {
				scaleInto(i[t], sw, c.acc[k][t], c.rec(t, recD))
			}
		}
		ADDQ(U32(pkIntBytes[typ]), c.w)
		c.next()
	})
}

// pk256K16: Q3_K (1824: d, [16][16] int8 scales −32…31, then per block 2
// loads of 2-bit codes and one of third bits, u = q+4) and Q2_K (1344: d,
// dmin, [16][16] bytes sc | m<<4, then per block 2 loads of 2-bit codes).
// With sub-block halves A (steps 0-3) and B (4-7) of a block:
//
//	Q3_K: out = fma(float(sc_A·(Σ_A u·x + o0) + sc_B·(Σ_B u·x + o1)), d·d_x, out)
//	Q2_K: out = fma(float(sc_A·Σ_A u·x + sc_B·Σ_B u·x), d·d_x, out)
//	      out = fma(float(m_A·o0 + m_B·o1), −(dmin·d_x), out)
//
// (o0, o1: the records' −4·Σ_A x, −4·Σ_B x for Q3_K, Σ_A x, Σ_B x for
// Q2_K). As Q6_K's, two steps' pair sums meet the scales in VPMADDWD.
func pk256K16(typ string, c pass256) {
	q3 := typ == "Q3K"
	SHRQ(U8(3), c.n)
	three := bcastByte(0x03)
	var bit VecVirtual
	if q3 {
		bit = bcastByte(0x04)
	}
	sc16 := AllocLocal(64) // A's and B's scales, as int16 pairs
	blockLoop(c.name, "super", c.n, func() {
		for b := 0; b < 8; b++ {
			c.prefetch(b, 8)
			for k, h := range c.hs {
				at := 320 + 128*b
				if q3 {
					at = 288 + 192*b
				}
				// the halves' scales: int32 lanes, and int16 pairs on the stack
				var s32 [2]VecVirtual
				for q := range s32 {
					s32[q] = YMM()
					if q3 {
						VPMOVSXBD(Mem{Base: c.w, Disp: 32 + 16*(2*b+q) + 8*h}, s32[q])
					} else {
						VPMOVZXBD(Mem{Base: c.w, Disp: 64 + 16*(2*b+q) + 8*h}, s32[q])
						VPAND(bcast32(0x0f), s32[q], s32[q])
					}
					w := YMM()
					VPSLLD(U8(16), s32[q], w)
					VPBLENDW(U8(0x55), s32[q], w, w)
					VMOVDQU(w, sc16.Offset(32*q))
				}
				i := make([]VecVirtual, len(c.acc[k]))
				for t := range i {
					i[t] = YMM()
					if !q3 {
						VPXOR(i[t], i[t], i[t])
						continue
					}
					halvesOffset(c, t, s32, i[t])
				}
				// step s: field s%4 of pair load s/4 (bits 2f), Q3_K's third
				// bit (bit s of the bits load's byte) at bit 2.
				step := func(s int) VecVirtual {
					u := YMM()
					VMOVDQU(c.at(h, at+64*(s/4)), u)
					if f := s % 4; f > 0 {
						VPSRLW(U8(2*f), u, u)
					}
					VPAND(three, u, u)
					if q3 {
						e := YMM()
						VMOVDQU(c.at(h, at+128), e)
						switch {
						case s < 2:
							VPSLLW(U8(2-s), e, e)
						case s > 2:
							VPSRLW(U8(s-2), e, e)
						}
						VPAND(bit, e, e)
						VPOR(e, u, u)
					}
					return u
				}
				scaledPairDots(c, k, h, i, step, sc16)
				if q3 {
					continue
				}
				var m [2]VecVirtual
				for q := range m {
					m[q] = YMM()
					VPMOVZXBD(Mem{Base: c.w, Disp: 64 + 16*(2*b+q) + 8*h}, m[q])
					VPSRLD(U8(4), m[q], m[q])
				}
				dm := YMM()
				VCVTPH2PS(Mem{Base: c.w, Disp: 32 + 16*h}, dm)
				for t := range i {
					im, o, s := YMM(), YMM(), YMM()
					VPBROADCASTD(c.rec(t, recO0), im)
					VPMULLD(m[0], im, im)
					VPBROADCASTD(c.rec(t, recO1), o)
					VPMULLD(m[1], o, o)
					VPADDD(o, im, im)
					VCVTDQ2PS(im, im)
					VBROADCASTSS(c.rec(t, recD), s)
					VMULPS(s, dm, s)
					VFNMADD231PS(s, im, c.acc[k][t])
				}
			}
			c.next()
		}
		ADDQ(U32(pkIntBytes[typ]), c.w)
	})
}
