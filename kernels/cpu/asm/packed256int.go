package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The AVX2 integer tiles pk256{Type}x{T}, every integer type: T tokens × one
// group, run down `groups` consecutive groups, each output by the
// arithmetic kernels/cpu/packed.go states (the bits of the AVX-512 tiles).
//
// Without VPDPBUSD a step's exact integer dot products are VPMADDUBSW
// (unsigned weight bytes by signed activations, pairs summed into int16)
// then VPMADDWD (pairs of those into int32). The int16 sums must not
// saturate: a 4-bit weight's pair is at most 2·15·127, so a block's 8
// steps add up in int16 before one VPMADDWD; a 6-bit one's (2·63·127)
// two steps at a time; Q8_0's w+128 could saturate alone, so its tiles
// multiply |w| by x·sign(w) (2·128·127 < 2^15), whose sum is Σw·x, the
// same integer as the record's offset plus Σ(w+128)·x.
//
// NOTE: a tile of 3 or 4 tokens runs a group's two 8-row halves one after
// the other, each over all of K (half h reads bytes 32h…32h+31 of every
// 64-byte load): T accumulators and T int sums then fit 16 ymm, and each
// block's weights are unpacked once for all of them (the first pass
// brings the group's lines into the cache, the second reads them from
// there). Tiles of 1 or 2 tokens (decode: weights from DRAM) run both
// halves in one pass, each line used once. The pass that reads a group
// first prefetches ahead. Over a DRAM-sized matrix, one thread, 2 tokens
// in one pass against two: Q8_0 30-35 against 18-21 GB/s, Q4_K 23-24
// against 24-25, Q6_K 18 against 19-20.

// pk256IntTokens is the most tokens of an AVX2 integer tile.
const pk256IntTokens = 4

var pk256IntTypes = []string{"Q8_0", "Q4_0", "Q4K", "Q6K", "Q5K", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "MXFP4", "IQ4XS", "Q3K", "Q2K"}

// pass256 is one pass of an integer tile over K: the halves hs of the
// group (both for one token, else one a pass).
type pass256 struct {
	name string
	hs   []int                // the halves: rows 8h … 8h+7
	w    Register             // the group's current block
	n    Register             // blocks (or super-blocks) left
	rec  func(t, off int) Mem // token t's current record
	next func()               // moves every token to its next record
	acc  [][]VecVirtual       // [half of hs][token]: the float outputs
	pf   Register             // prefetch distance in bytes, or nil
	size int                  // bytes of a block
	vnni bool                 // VEX VPDPBUSD (packed256vnni.go)
}

// at is half h's bytes at off of a load of 64 bytes (16 rows × 4).
func (c pass256) at(h, off int) Mem { return Mem{Base: c.w, Disp: off + 32*h} }

// pk256Prefetch is how far ahead (bytes) a one-token tile prefetches its
// weights: single thread, DRAM-sized matrices, one-pass tiles read Q4_K at
// 25, 32, 33, 31 GB/s prefetching 4, 12, 24, 48 KB ahead (Q6_K 20, 24,
// 25, 25; Q8_0 28, 33-38, 35-39, 34-38), and the two-pass tile that
// prefetched the next group 31 (Q6_K 24, Q8_0 23-29).
const pk256Prefetch = 16384

// prefetch emits part k of parts of the prefetches of a block's lines
// pf bytes ahead: a one-token tile reads its weights from DRAM, and the
// lines it asks for ahead arrive while it computes.
func (c pass256) prefetch(k, parts int) {
	if c.pf == nil {
		return
	}
	lines := (c.size + 63) / 64
	for l := k * lines / parts; l < (k+1)*lines/parts; l++ {
		PREFETCHT0(Mem{Base: c.w, Index: c.pf, Scale: 1, Disp: 64 * l})
	}
}

func pk256Int(typ string, T int) { pk256IntTile(pk256IntName(typ, T), typ, T, false) }

// pk256IntTile writes tile name: T tokens of typ, with AVX-VNNI's
// VPDPBUSD where vnni (pk256VNNITypes), else pure AVX2.
func pk256IntTile(name, typ string, T int, vnni bool) {
	TEXT(name, NOSPLIT, "func(w *byte, r *byte, rs int, nb int, dst *float32, ds int, mask uint16, groups int)")
	Label(name + "_group")
	passes := [][]int{{0}, {1}}
	if T <= 2 {
		passes = [][]int{{0, 1}}
	}
	for _, hs := range passes {
		w := Load(Param("w"), GP64())
		r0, rs := Load(Param("r"), GP64()), Load(Param("rs"), GP64())
		rb := strided(r0, rs, T)
		c := pass256{name: fmt.Sprintf("%s_h%d", name, hs[0]), hs: hs, w: w, n: Load(Param("nb"), GP64()),
			rec: func(t, off int) Mem { return stridedAt(rb, rs, t).Offset(off) },
			next: func() {
				for _, b := range rb {
					ADDQ(U32(recBytes), b)
				}
			},
			size: pkIntBytes[typ], vnni: vnni}
		if hs[0] == 0 { // the pass that reads the group first
			c.pf = GP64()
			MOVQ(U32(pk256Prefetch), c.pf)
		}
		c.acc = make([][]VecVirtual, len(hs))
		for k := range c.acc {
			c.acc[k] = make([]VecVirtual, T)
			for t := range c.acc[k] {
				c.acc[k][t] = YMM()
				VXORPS(c.acc[k][t], c.acc[k][t], c.acc[k][t])
			}
		}
		switch typ {
		case "Q8_0":
			if vnni {
				pk256Q8VNNI(c)
			} else {
				pk256Q8(c)
			}
		case "Q4_0":
			pk256Q4(c)
		case "Q4K":
			pk256Q4K(c, vnni)
		case "Q6K":
			pk256Q6K(c)
		case "Q5K":
			pk256Q5K(c)
		case "Q4_1", "Q5_0", "Q5_1":
			pk256Q32More(typ, c)
		case "IQ4_NL", "MXFP4", "IQ4XS":
			pk256Grid(typ, c)
		case "Q3K", "Q2K":
			pk256K16(typ, c)
		}
		for k, h := range hs {
			storeHalf(fmt.Sprintf("%s_s%d", name, h), h, c.acc[k])
		}
	}
	// Next group: w moves past this group's blocks, dst by 16 rows.
	nextGroup(name, pkIntBytes[typ], pkSuper[typ])
}

// storeHalf stores half h's outputs acc (one a token), masked in the
// last group.
func storeHalf(name string, h int, acc []VecVirtual) {
	dst, ds := Load(Param("dst"), GP64()), Load(Param("ds"), GP64())
	SHLQ(U8(2), ds)
	g := Load(Param("groups"), GP64())
	full, done := LabelRef(name+"_full"), LabelRef(name+"_stored")
	CMPQ(g, U8(1))
	JNE(full)
	mask := rowMasks(Load(Param("mask"), GP32()))[h]
	for t, a := range acc {
		VMASKMOVPS(a, mask, Mem{Base: dst, Disp: 32 * h})
		if t+1 < len(acc) {
			ADDQ(ds, dst)
		}
	}
	JMP(done)
	Label(name + "_full")
	for t, a := range acc {
		VMOVUPS(a, Mem{Base: dst, Disp: 32 * h})
		if t+1 < len(acc) {
			ADDQ(ds, dst)
		}
	}
	Label(name + "_stored")
}

// blockLoop runs body over n blocks (labels from name and tag).
func blockLoop(name, tag string, n Register, body func()) {
	Label(name + "_" + tag)
	TESTQ(n, n)
	JZ(LabelRef(name + "_" + tag + "_end"))
	body()
	DECQ(n)
	JMP(LabelRef(name + "_" + tag))
	Label(name + "_" + tag + "_end")
}

// bcastByte is a ymm of 32 copies of b.
func bcastByte(b uint8) VecVirtual { return bcast32(uint32(b) * 0x01010101) }

// bcast32 is a ymm of 8 copies of v.
func bcast32(v uint32) VecVirtual {
	r, y := GP32(), YMM()
	MOVL(U32(v), r)
	VMOVD(r, y.AsX())
	VPBROADCASTD(y.AsX(), y)
	return y
}

// scaleInto adds float(i)·(s·d_x) into acc (i is spent): s the rows'
// float scales, as VMULPS_BCST(d_x, s) and the FMA of the AVX-512 tiles.
func scaleInto(i, s, acc VecVirtual, dx Mem) {
	b := YMM()
	VCVTDQ2PS(i, i)
	VBROADCASTSS(dx, b)
	VMULPS(b, s, b)
	VFMADD231PS(b, i, acc)
}

// nibbleLoad loads the 32 bytes of nibbles at off of half h: u their low
// nibbles (steps s), v their high ones (steps s+4).
func nibbleLoad(c pass256, h int, lo VecVirtual, off int) (u, v VecVirtual) {
	v, u = YMM(), YMM()
	VMOVDQU(c.at(h, off), v)
	VPAND(lo, v, u)
	VPSRLW(U8(4), v, v)
	VPAND(lo, v, v)
	return u, v
}

// nibbleSums sets s16[t] to token t's int16 pair sums over the 8 steps of
// half h of the block of nibbles at off (4 loads: load c holds steps c
// and c+4).
func nibbleSums(c pass256, h int, lo VecVirtual, off int, T int) []VecVirtual {
	s16 := make([]VecVirtual, T)
	for s := 0; s < 4; s++ {
		u, v := nibbleLoad(c, h, lo, off+64*s)
		for t := range s16 {
			x, y := YMM(), YMM()
			VPBROADCASTD(c.rec(t, 4*s), x)
			if s == 0 {
				s16[t] = x
				VPMADDUBSW(x, u, x)
			} else {
				VPMADDUBSW(x, u, x)
				VPADDW(x, s16[t], s16[t])
			}
			VPBROADCASTD(c.rec(t, 4*(s+4)), y)
			VPMADDUBSW(y, v, y)
			VPADDW(y, s16[t], s16[t])
		}
	}
	return s16
}

// pk256Q8: per block, i = Σw·x over its 8 steps (w = stored ^ 0x80),
// out = fma(float(i), d_w·d_x, out).
//
// NOTE: the tile is bound by its two multiplies a step and half
// (VPMADDUBSW, VPMADDWD), not by VPXOR, VPABSB and VPSIGNB: cutting the
// activations instead (x = 8·(x>>3) + (x&7), the stored w+128 multiplied
// as it is, four or eight steps summed in int16) drops those three and
// the VPADDDs for 2.4 multiplies a step, and ran 0.87× (DecodeTile, one
// thread, in L2), as 32/38 multiplies predicts. Running both halves in
// each step (one broadcast for both) changed nothing measurable. ik's
// AVX2 Q8_0 kernel issues the same six operations a step.
func pk256Q8(c pass256) {
	block := pk256Q8Block()
	blockLoop(c.name, "block", c.n, func() {
		c.prefetch(0, 1)
		block(c)
		ADDQ(U32(544), c.w)
		c.next()
	})
}

// pk256Q8Block sets up pk256Q8's constants and returns what emits one
// block's products at c.w into c.acc (streams256.go runs it too).
func pk256Q8Block() func(c pass256) {
	c80, ones := bcastByte(0x80), bcast32(0x00010001)
	return func(c pass256) {
		for k, h := range c.hs {
			i := make([]VecVirtual, len(c.acc[k]))
			for s := 0; s < 8; s++ {
				ws, a := YMM(), YMM()
				VPXOR(c.at(h, 64*s), c80, ws)
				VPABSB(ws, a)
				for t := range i {
					x := YMM()
					VPBROADCASTD(c.rec(t, 4*s), x)
					VPSIGNB(ws, x, x)
					VPMADDUBSW(x, a, x)
					if s == 0 {
						i[t] = x
						VPMADDWD(ones, x, x)
					} else {
						VPMADDWD(ones, x, x)
						VPADDD(x, i[t], i[t])
					}
				}
			}
			sw := YMM()
			VCVTPH2PS(Mem{Base: c.w, Disp: 512 + 16*h}, sw)
			for t := range i {
				scaleInto(i[t], sw, c.acc[k][t], c.rec(t, recD))
			}
		}
	}
}

// pk256Q4: Q4_0, out = fma(float(Σq·x + o), d_w·d_x, out).
func pk256Q4(c pass256) {
	block := pk256Q4Block(c.vnni)
	blockLoop(c.name, "block", c.n, func() {
		c.prefetch(0, 1)
		block(c)
		ADDQ(U32(288), c.w)
		c.next()
	})
}

// pk256Q4Block is pk256Q8Block for Q4_0 (VPDPBUSD where vnni).
func pk256Q4Block(vnni bool) func(c pass256) {
	lo := bcastByte(0x0f)
	var ones VecVirtual
	if !vnni {
		ones = bcast32(0x00010001)
	}
	return func(c pass256) {
		for k, h := range c.hs {
			var s16 []VecVirtual
			if c.vnni {
				s16 = nibbleDots(c, h, lo, 0, len(c.acc[k]))
			} else {
				s16 = nibbleSums(c, h, lo, 0, len(c.acc[k]))
			}
			sw := YMM()
			VCVTPH2PS(Mem{Base: c.w, Disp: 256 + 16*h}, sw)
			for t, i := range s16 {
				if !c.vnni {
					VPMADDWD(ones, i, i)
				}
				o := YMM()
				VPBROADCASTD(c.rec(t, recO0), o)
				VPADDD(o, i, i)
				scaleInto(i, sw, c.acc[k][t], c.rec(t, recD))
			}
		}
	}
}

// pk256Q4K: per sub-block j, out = fma(float(Σq·x), (d·sc_j)·d_x, out),
// then out = fma(−(dmin·m_j), d_x·Σx, out).
func pk256Q4K(c pass256, vnni bool) {
	SHRQ(U8(3), c.n)
	lo := bcastByte(0x0f)
	var ones VecVirtual
	if !vnni {
		ones = bcast32(0x00010001)
	}
	blockLoop(c.name, "super", c.n, func() {
		// d and dmin as floats: kept for the super-block when registers
		// allow (one token), else converted where used.
		var kept [2][2]VecVirtual
		half := func(h, off int) VecVirtual {
			m := Mem{Base: c.w, Disp: off + 16*h}
			if f := kept[h][off/32]; f != nil {
				return f
			}
			f := YMM()
			VCVTPH2PS(m, f)
			return f
		}
		if len(c.acc[0]) == 1 {
			for _, h := range c.hs {
				kept[h] = [2]VecVirtual{half(h, 0), half(h, 32)}
			}
		}
		for j := 0; j < 8; j++ {
			c.prefetch(j, 8)
			for k, h := range c.hs {
				var s16 []VecVirtual
				if c.vnni {
					s16 = nibbleDots(c, h, lo, 320+256*j, len(c.acc[k]))
				} else {
					s16 = nibbleSums(c, h, lo, 320+256*j, len(c.acc[k]))
				}
				sc, mn := YMM(), YMM()
				scaled := func(m Mem, f, v VecVirtual) {
					VPMOVZXBD(m, v)
					VCVTDQ2PS(v, v)
					VMULPS(f, v, v)
				}
				scaled(Mem{Base: c.w, Disp: 64 + 16*j + 8*h}, half(h, 0), sc)
				scaled(Mem{Base: c.w, Disp: 192 + 16*j + 8*h}, half(h, 32), mn)
				for t, i := range s16 {
					if !c.vnni {
						VPMADDWD(ones, i, i)
					}
					scaleInto(i, sc, c.acc[k][t], c.rec(t, recD))
					a := YMM()
					VBROADCASTSS(c.rec(t, recA), a)
					VFNMADD231PS(a, mn, c.acc[k][t])
				}
			}
			c.next()
		}
		ADDQ(U32(2368), c.w)
	})
}

// pk256Q6K: per 32-element block, halves A (steps 0-3) and B (4-7),
// out = fma(float(sc_A·(Σ_A u·x + o0) + sc_B·(Σ_B u·x + o1)), d·d_x, out).
// Two steps' int16 pair sums add up before VPMADDWD multiplies them by
// the rows' scales (each in both words of its lane, from the stack).
func pk256Q6K(c pass256) {
	SHRQ(U8(3), c.n)
	lo, hi := bcastByte(0x0f), bcastByte(0x30)
	sc16 := AllocLocal(64) // A's and B's scales, as int16 pairs
	blockLoop(c.name, "super", c.n, func() {
		for b := 0; b < 8; b++ {
			c.prefetch(b, 8)
			for k, h := range c.hs {
				pk256Q6KBlock(c, k, h, b, lo, hi, sc16)
			}
			c.next()
		}
		ADDQ(U32(3360), c.w)
	})
}

// pk256Q6KBlock is block b of a Q6_K super-block for half h.
func pk256Q6KBlock(c pass256, k, h, b int, lo, hi VecVirtual, sc16 Mem) {
	ql, qh := 288+256*b, 2336+128*b
	// Each token's sum starts at sc_A·o0 + sc_B·o1.
	var s32 [2]VecVirtual
	for k := range s32 {
		s32[k] = YMM()
		VPMOVSXBD(Mem{Base: c.w, Disp: 32 + 16*(2*b+k) + 8*h}, s32[k])
		if c.vnni {
			continue
		}
		w := YMM()
		VPSLLD(U8(16), s32[k], w)
		VPBLENDW(U8(0x55), s32[k], w, w)
		VMOVDQU(w, sc16.Offset(32*k))
	}
	i := make([]VecVirtual, len(c.acc[k]))
	for t := range i {
		i[t] = YMM()
		halvesOffset(c, t, s32, i[t])
	}
	step := func(s int) VecVirtual { return q6Step(c.w, h, s, ql, qh, lo, hi) }
	if c.vnni {
		scaledDots(c, k, h, i, step, s32)
		return
	}
	scaledPairDots(c, k, h, i, step, sc16)
}

// halvesOffset sets i to token t's offset terms scaled by the halves'
// scales: o0·s32[0] + o1·s32[1] (the records' o0, o1).
func halvesOffset(c pass256, t int, s32 [2]VecVirtual, i VecVirtual) {
	o := YMM()
	VPBROADCASTD(c.rec(t, recO0), i)
	VPMULLD(s32[0], i, i)
	VPBROADCASTD(c.rec(t, recO1), o)
	VPMULLD(s32[1], o, o)
	VPADDD(o, i, i)
}

// scaledPairDots adds a block's 8 steps (step(s): the rows' unsigned
// weights of step s) into each token's i[t], two steps' int16 pair sums at
// a time multiplied by their half's int16 scales (sc16), then scales i[t]
// by the group's d into the token's accumulator.
func scaledPairDots(c pass256, k, h int, i []VecVirtual, step func(int) VecVirtual, sc16 Mem) {
	for s := 0; s < 8; s += 2 {
		u0, u1 := step(s), step(s+1)
		for t := range i {
			x, y := YMM(), YMM()
			VPBROADCASTD(c.rec(t, 4*s), x)
			VPMADDUBSW(x, u0, x)
			VPBROADCASTD(c.rec(t, 4*(s+1)), y)
			VPMADDUBSW(y, u1, y)
			VPADDW(y, x, x)
			VPMADDWD(sc16.Offset(32*(s/4)), x, x)
			VPADDD(x, i[t], i[t])
		}
	}
	d := YMM()
	VCVTPH2PS(Mem{Base: c.w, Disp: 16 * h}, d)
	for t := range i {
		scaleInto(i[t], d, c.acc[k][t], c.rec(t, recD))
	}
}

// q6Step loads step s of half h of a Q6_K block at base: its low nibbles
// (load s%4 at ql, high nibbles from step 4, masked by lo) and its highs
// at bits 4-5 (field s%4 of load s/4 at qh, moved to 2f and masked by hi).
func q6Step(base Register, h, s, ql, qh int, lo, hi VecVirtual) VecVirtual {
	u, e := YMM(), YMM()
	VMOVDQU(Mem{Base: base, Disp: ql + 64*(s%4) + 32*h}, u)
	if s >= 4 {
		VPSRLW(U8(4), u, u)
	}
	VPAND(lo, u, u)
	VMOVDQU(Mem{Base: base, Disp: qh + 64*(s/4) + 32*h}, e)
	switch f := s % 4; {
	case f < 2:
		VPSLLW(U8(4-2*f), e, e)
	case f == 3:
		VPSRLW(U8(2), e, e)
	}
	VPAND(hi, e, e)
	VPOR(e, u, u)
	return u
}
