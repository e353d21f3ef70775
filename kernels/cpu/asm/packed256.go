package main

import (
	"fmt"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The AVX2 kernels over the same packed weights as the AVX-512 ones
// (packed.go): a group's 16 rows are two ymm halves (rows 0-7, 8-15), each
// lane still one row's output, and every output takes the arithmetic
// kernels/cpu/packed.go states, so AVX2 and AVX-512 agree bit for bit.
//
//   - pk256{F32,F16,BF16}x{T}x{M}: T tokens × M groups, as pk512's.
//   - pk256{Q8_0,Q4_0,Q4K,Q6K}x{T}: without VPDPBUSD, a step's exact
//     integer dot products are VPMADDUBSW (unsigned weight bytes by signed
//     activations, pairs summed into int16) then VPMADDWD by ones (pairs of
//     those into int32). Weights of up to 6 bits cannot saturate the int16
//     pairs (2·63·127 < 2^15); Q8_0's w+128 could, so its tiles multiply
//     |w| by x·sign(w) (2·128·127 < 2^15), whose sum is Σw·x, the same
//     integer as the record's offset plus Σ(w+128)·x.

// pk256FloatGroups[t] is the widest float tile of t tokens: 2·t·M
// accumulators, t broadcasts and a weight fit 16 ymm.
var pk256FloatGroups = []int{1: 6, 2: 3, 3: 2, 4: 1, 5: 1}

const pk256IntTokens = 2

var pk256IntTypes = []string{"Q8_0", "Q4_0", "Q4K", "Q6K"}

func packed256Kernels() {
	for _, typ := range pkFloatTypes {
		for t := 1; t < len(pk256FloatGroups); t++ {
			for m := 1; m <= pk256FloatGroups[t]; m++ {
				pk256Float(typ, t, m)
			}
		}
	}
	for _, typ := range pk256IntTypes {
		for t := 1; t <= pk256IntTokens; t++ {
			pk256Int(typ, t)
		}
	}
}

func pk256FloatName(typ string, t, m int) string { return fmt.Sprintf("pk256%sx%dx%d", typ, t, m) }
func pk256IntName(typ string, t int) string      { return fmt.Sprintf("pk256%sx%d", typ, t) }

// pk256Bits holds 1<<i in lane i (16 lanes): the row mask's bits.
var pk256Bits = func() Mem {
	m := GLOBL("pk256bits", RODATA|NOPTR)
	for i := 0; i < 16; i++ {
		DATA(4*i, U32(1<<i))
	}
	return m
}()

// rowMasks expands a 16-bit row mask into two ymm lane masks (rows 0-7
// and 8-15) for VMASKMOVPS.
func rowMasks(mask Register) [2]VecVirtual {
	b := YMM()
	VMOVD(mask, b.AsX())
	VPBROADCASTD(b.AsX(), b)
	var m [2]VecVirtual
	for h := range m {
		m[h] = YMM()
		VPAND(pk256Bits.Offset(32*h), b, m[h])
		VPCMPEQD(pk256Bits.Offset(32*h), m[h], m[h])
	}
	return m
}

func pk256Float(typ string, T, M int) {
	name := pk256FloatName(typ, T, M)
	TEXT(name, NOSPLIT, "func(x *float32, xs int, w *byte, gs int, k int, dst *float32, ds int, mask uint16)")
	step, half := 64, 32 // bytes of one K step of a group, and of its half
	if typ != "F32" {
		step, half = 32, 16
	}
	x0, xs := Load(Param("x"), GP64()), Load(Param("xs"), GP64())
	SHLQ(U8(2), xs)
	w0, gs := Load(Param("w"), GP64()), Load(Param("gs"), GP64())
	k := Load(Param("k"), GP64())
	xb, wb := strided(x0, xs, T), strided(w0, gs, M)

	acc := make([][][2]VecVirtual, T)
	for t := range acc {
		acc[t] = make([][2]VecVirtual, M)
		for g := range acc[t] {
			for h := range 2 {
				acc[t][g][h] = YMM()
				VXORPS(acc[t][g][h], acc[t][g][h], acc[t][g][h])
			}
		}
	}
	bx := make([]VecVirtual, T)
	for t := range bx {
		bx[t] = YMM()
	}
	wv := YMM()
	loadW := func(m Mem) {
		switch typ {
		case "F32":
			VMOVUPS(m, wv)
		case "F16":
			VCVTPH2PS(m, wv)
		case "BF16":
			VPMOVZXWD(m, wv)
			VPSLLD(U8(16), wv, wv)
		}
	}
	body := func(u int) {
		for t := range bx {
			VBROADCASTSS(stridedAt(xb, xs, t).Offset(4*u), bx[t])
		}
		for g := 0; g < M; g++ {
			for h := range 2 {
				loadW(stridedAt(wb, gs, g).Offset(step*u + half*h))
				for t := range bx {
					VFMADD231PS(bx[t], wv, acc[t][g][h])
				}
			}
		}
	}
	advance := func(u int) {
		for _, b := range xb {
			ADDQ(U32(4*u), b)
		}
		for _, b := range wb {
			ADDQ(U32(step*u), b)
		}
	}
	const unroll = 2
	Label(name + "_loop")
	CMPQ(k, U8(unroll))
	JL(LabelRef(name + "_tail"))
	for u := 0; u < unroll; u++ {
		body(u)
	}
	advance(unroll)
	SUBQ(U8(unroll), k)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_tail")
	TESTQ(k, k)
	JZ(LabelRef(name + "_store"))
	body(0)
	advance(1)
	DECQ(k)
	JMP(LabelRef(name + "_tail"))

	Label(name + "_store")
	dst, ds := Load(Param("dst"), GP64()), Load(Param("ds"), GP64())
	SHLQ(U8(2), ds)
	mask := rowMasks(Load(Param("mask"), GP32()))
	for t := range acc {
		for g := range acc[t] {
			for h := range 2 {
				at := Mem{Base: dst, Disp: 64*g + 32*h}
				if g == M-1 {
					VMASKMOVPS(acc[t][g][h], mask[h], at)
				} else {
					VMOVUPS(acc[t][g][h], at)
				}
			}
		}
		if t+1 < T {
			ADDQ(ds, dst)
		}
	}
	VZEROUPPER()
	RET()
}

// int256 is what an AVX2 integer tile's block code works with.
type int256 struct {
	w    Register                 // the group's current block
	rec  func(t, off int) Mem     // token t's current record
	acc  [][2]VecVirtual          // token × half: the float outputs
	ones VecVirtual               // int16 ones, for VPMADDWD
	dot  func(u, x, i VecVirtual) // i += Σ pairs of u·x, u unsigned
}

// dot256 returns i += the 4-element dot products of u's unsigned bytes by
// x's signed ones, lane by lane.
func dot256(ones VecVirtual) func(u, x, i VecVirtual) {
	return func(u, x, i VecVirtual) {
		p := YMM()
		VPMADDUBSW(x, u, p)
		VPMADDWD(ones, p, p)
		VPADDD(p, i, i)
	}
}

// bcastByte is a ymm of 32 copies of b.
func bcastByte(b uint8) VecVirtual {
	r, v := GP32(), YMM()
	MOVL(U32(uint32(b)*0x01010101), r)
	VMOVD(r, v.AsX())
	VPBROADCASTD(v.AsX(), v)
	return v
}

// scaleInto adds float(i)·(s·d_x) into acc: s the rows' float scales.
func scaleInto(i, s, acc VecVirtual, dx Mem) {
	b := YMM()
	VCVTDQ2PS(i, i)
	VBROADCASTSS(dx, b)
	VMULPS(b, s, b) // s·d_x, as VMULPS_BCST(d_x, s) computes it
	VFMADD231PS(b, i, acc)
}

// halfScales converts 8 halves at m to floats.
func halfScales(m Mem) VecVirtual {
	v := YMM()
	VCVTPH2PS(m, v)
	return v
}

func pk256Int(typ string, T int) {
	name := pk256IntName(typ, T)
	TEXT(name, NOSPLIT, "func(w *byte, r *byte, rs int, nb int, dst *float32, ds int, mask uint16, groups int)")
	ones := YMM()
	o := GP32()
	MOVL(U32(0x00010001), o)
	VMOVD(o, ones.AsX())
	VPBROADCASTD(ones.AsX(), ones)
	Label(name + "_group")
	w := Load(Param("w"), GP64())
	r0, rs := Load(Param("r"), GP64()), Load(Param("rs"), GP64())
	rb := strided(r0, rs, T)
	n := Load(Param("nb"), GP64())
	acc := make([][2]VecVirtual, T)
	for t := range acc {
		for h := range 2 {
			acc[t][h] = YMM()
			VXORPS(acc[t][h], acc[t][h], acc[t][h])
		}
	}
	c := int256{w: w, acc: acc, ones: ones, dot: dot256(ones),
		rec: func(t, off int) Mem { return stridedAt(rb, rs, t).Offset(off) }}
	nextRec := func() {
		for _, b := range rb {
			ADDQ(U32(recBytes), b)
		}
	}
	switch typ {
	case "Q8_0":
		pk256Q8(name, c, n, nextRec)
	case "Q4_0":
		pk256Q4(name, c, n, nextRec)
	case "Q4K":
		pk256Q4K(name, c, n, nextRec)
	case "Q6K":
		pk256Q6K(name, c, n, nextRec)
	}

	dst, ds := Load(Param("dst"), GP64()), Load(Param("ds"), GP64())
	SHLQ(U8(2), ds)
	g := Load(Param("groups"), GP64())
	full, last := LabelRef(name+"_full"), LabelRef(name+"_stored")
	CMPQ(g, U8(1))
	JNE(full)
	mask := rowMasks(Load(Param("mask"), GP32()))
	for t := range acc {
		for h := range 2 {
			VMASKMOVPS(acc[t][h], mask[h], Mem{Base: dst, Disp: 32 * h})
		}
		if t+1 < T {
			ADDQ(ds, dst)
		}
	}
	JMP(last)
	Label(name + "_full")
	for t := range acc {
		for h := range 2 {
			VMOVUPS(acc[t][h], Mem{Base: dst, Disp: 32 * h})
		}
		if t+1 < T {
			ADDQ(ds, dst)
		}
	}
	Label(name + "_stored")
	// Next group: w moves past this group's blocks, dst by 16 rows.
	nb := Load(Param("nb"), GP64())
	if pkSuper[typ] {
		SHRQ(U8(3), nb)
	}
	IMUL3Q(U32(pkIntBytes[typ]), nb, nb)
	wp := Load(Param("w"), GP64())
	ADDQ(nb, wp)
	Store(wp, Param("w"))
	dp := Load(Param("dst"), GP64())
	ADDQ(U32(64), dp)
	Store(dp, Param("dst"))
	gn := Load(Param("groups"), GP64())
	DECQ(gn)
	Store(gn, Param("groups"))
	JNZ(LabelRef(name + "_group"))
	VZEROUPPER()
	RET()
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

// Each block's weights are unpacked once for all the tile's tokens: per
// half (8 rows), every step's unsigned weight bytes meet each token's
// broadcast activations in turn.

// pk256Q8: per block and token, Σw·x over its 8 steps (w = stored ^ 0x80),
// then out = fma(float(i), d_w·d_x, out).
func pk256Q8(name string, c int256, n Register, nextRec func()) {
	c80 := bcastByte(0x80)
	blockLoop(name, "block", n, func() {
		for h := range 2 {
			i := zeros(len(c.acc))
			for s := 0; s < 8; s++ {
				ws, a := YMM(), YMM()
				VPXOR(Mem{Base: c.w, Disp: 64*s + 32*h}, c80, ws)
				VPABSB(ws, a)
				for t := range c.acc {
					x := YMM()
					VPBROADCASTD(c.rec(t, 4*s), x)
					VPSIGNB(ws, x, x)
					c.dot(a, x, i[t])
				}
			}
			for t := range c.acc {
				scaleInto(i[t], halfScales(Mem{Base: c.w, Disp: 512 + 16*h}), c.acc[t][h], c.rec(t, recD))
			}
		}
		ADDQ(U32(544), c.w)
		nextRec()
	})
}

// zeros is n zeroed ymm.
func zeros(n int) []VecVirtual {
	v := make([]VecVirtual, n)
	for t := range v {
		v[t] = YMM()
		VPXOR(v[t], v[t], v[t])
	}
	return v
}

// nibbleDots adds into i[t] token t's dot over the 8 steps of a block of
// nibbles at m (4 loads of 64 bytes: load c holds steps c and c+4), half
// h. The 8 steps' pair sums add up in int16 first: each is at most
// 2·15·127, so 8 of them stay below 2^15.
func nibbleDots(c int256, lo VecVirtual, m Mem, h int, i []VecVirtual) {
	s16 := make([]VecVirtual, len(i))
	for s := 0; s < 4; s++ {
		v, u := YMM(), YMM()
		VMOVDQU(m.Offset(64*s+32*h), v)
		VPAND(lo, v, u)
		VPSRLW(U8(4), v, v)
		VPAND(lo, v, v)
		for t := range i {
			x, p := YMM(), YMM()
			VPBROADCASTD(c.rec(t, 4*s), x)
			if s == 0 {
				s16[t] = YMM()
				VPMADDUBSW(x, u, s16[t])
			} else {
				VPMADDUBSW(x, u, p)
				VPADDW(p, s16[t], s16[t])
			}
			VPBROADCASTD(c.rec(t, 4*(s+4)), x)
			VPMADDUBSW(x, v, p)
			VPADDW(p, s16[t], s16[t])
		}
	}
	for t := range i {
		VPMADDWD(c.ones, s16[t], s16[t])
		VPADDD(s16[t], i[t], i[t])
	}
}

// pk256Q4: Q4_0, out = fma(float(Σq·x + o), d_w·d_x, out).
func pk256Q4(name string, c int256, n Register, nextRec func()) {
	lo := bcastByte(0x0f)
	blockLoop(name, "block", n, func() {
		for h := range 2 {
			i := make([]VecVirtual, len(c.acc))
			for t := range i {
				i[t] = YMM()
				VPBROADCASTD(c.rec(t, recO0), i[t])
			}
			nibbleDots(c, lo, Mem{Base: c.w}, h, i)
			for t := range c.acc {
				scaleInto(i[t], halfScales(Mem{Base: c.w, Disp: 256 + 16*h}), c.acc[t][h], c.rec(t, recD))
			}
		}
		ADDQ(U32(288), c.w)
		nextRec()
	})
}

// byteScales converts 8 unsigned bytes at m to floats times the halves at d.
func byteScales(m, d Mem) VecVirtual {
	s := YMM()
	VPMOVZXBD(m, s)
	VCVTDQ2PS(s, s)
	VMULPS(halfScales(d), s, s)
	return s
}

// pk256Q4K: per sub-block j, out = fma(float(Σq·x), (d·sc_j)·d_x, out),
// then out = fma(−(dmin·m_j), d_x·Σx, out).
func pk256Q4K(name string, c int256, n Register, nextRec func()) {
	SHRQ(U8(3), n)
	lo := bcastByte(0x0f)
	blockLoop(name, "super", n, func() {
		for j := 0; j < 8; j++ {
			for h := range 2 {
				i := zeros(len(c.acc))
				nibbleDots(c, lo, Mem{Base: c.w, Disp: 320 + 256*j}, h, i)
				for t := range c.acc {
					sc := byteScales(Mem{Base: c.w, Disp: 64 + 16*j + 8*h}, Mem{Base: c.w, Disp: 16 * h})
					scaleInto(i[t], sc, c.acc[t][h], c.rec(t, recD))
					mn, a := byteScales(Mem{Base: c.w, Disp: 192 + 16*j + 8*h}, Mem{Base: c.w, Disp: 32 + 16*h}), YMM()
					VBROADCASTSS(c.rec(t, recA), a)
					VFNMADD231PS(a, mn, c.acc[t][h])
				}
			}
			nextRec()
		}
		ADDQ(U32(2368), c.w)
	})
}

// pk256Q6K: per 32-element block, halves A (steps 0-3) and B (4-7),
// out = fma(float(sc_A·(Σ_A u·x + o0) + sc_B·(Σ_B u·x + o1)), d·d_x, out).
func pk256Q6K(name string, c int256, n Register, nextRec func()) {
	SHRQ(U8(3), n)
	lo, hi := bcastByte(0x0f), bcastByte(0x30)
	blockLoop(name, "super", n, func() {
		for b := 0; b < 8; b++ {
			ql := Mem{Base: c.w, Disp: 288 + 256*b}
			qh := Mem{Base: c.w, Disp: 2336 + 128*b}
			for h := range 2 {
				ia, ib := make([]VecVirtual, len(c.acc)), make([]VecVirtual, len(c.acc))
				for t := range c.acc {
					ia[t], ib[t] = YMM(), YMM()
					VPBROADCASTD(c.rec(t, recO0), ia[t])
					VPBROADCASTD(c.rec(t, recO1), ib[t])
				}
				for s := 0; s < 8; s++ {
					u, e := YMM(), YMM()
					VMOVDQU(ql.Offset(64*(s%4)+32*h), u)
					if s >= 4 {
						VPSRLW(U8(4), u, u)
					}
					VPAND(lo, u, u)
					// step s's highs to bits 4-5: field f = s%4 sits at 2f.
					VMOVDQU(qh.Offset(64*(s/4)+32*h), e)
					switch f := s % 4; {
					case f < 2:
						VPSLLW(U8(4-2*f), e, e)
					case f == 3:
						VPSRLW(U8(2), e, e)
					}
					VPAND(hi, e, e)
					VPOR(e, u, u)
					for t := range c.acc {
						x := YMM()
						VPBROADCASTD(c.rec(t, 4*s), x)
						if s < 4 {
							c.dot(u, x, ia[t])
						} else {
							c.dot(u, x, ib[t])
						}
					}
				}
				for t := range c.acc {
					sa, sb := YMM(), YMM()
					VPMOVSXBD(Mem{Base: c.w, Disp: 32 + 16*(2*b) + 8*h}, sa)
					VPMOVSXBD(Mem{Base: c.w, Disp: 32 + 16*(2*b+1) + 8*h}, sb)
					VPMULLD(sa, ia[t], ia[t])
					VPMULLD(sb, ib[t], ib[t])
					VPADDD(ib[t], ia[t], ia[t])
					scaleInto(ia[t], halfScales(Mem{Base: c.w, Disp: 16 * h}), c.acc[t][h], c.rec(t, recD))
				}
			}
			nextRec()
		}
		ADDQ(U32(3360), c.w)
	})
}

// writePacked256Table writes the Go tables of the AVX2 packed kernels.
func writePacked256Table(b *strings.Builder, types map[string]string) {
	fmt.Fprintf(b, "\n// pk256FloatTiles[type][tokens][groups] is the AVX2 float tile of that shape.\n")
	b.WriteString("var pk256FloatTiles = map[quant.Type]*pkFloatShapes{\n")
	for _, typ := range pkFloatTypes {
		fmt.Fprintf(b, "\t%s: {", types[typ])
		for t := 1; t < len(pk256FloatGroups); t++ {
			fmt.Fprintf(b, "%d: {", t)
			for m := 1; m <= pk256FloatGroups[t]; m++ {
				fmt.Fprintf(b, "%d: %s, ", m, pk256FloatName(typ, t, m))
			}
			b.WriteString("}, ")
		}
		b.WriteString("},\n")
	}
	b.WriteString("}\n\n")
	fmt.Fprintf(b, "// pk256IntTiles[type][tokens] is the AVX2 integer tile of that shape.\n")
	b.WriteString("var pk256IntTiles = map[quant.Type]*pkIntShapes{\n")
	for _, typ := range pk256IntTypes {
		fmt.Fprintf(b, "\t%s: {", types[typ])
		for t := 1; t <= pk256IntTokens; t++ {
			fmt.Fprintf(b, "%d: %s, ", t, pk256IntName(typ, t))
		}
		b.WriteString("},\n")
	}
	b.WriteString("}\n\n")
	fmt.Fprintf(b, "// pk256FloatGroups[t] is the widest AVX2 float tile of t tokens.\n")
	fmt.Fprintf(b, "var pk256FloatGroups = %#v\n\nconst pk256IntTokens = %d\n", pk256FloatGroups, pk256IntTokens)
}

// cvtHalves converts n halves (a multiple of 8) to floats: the AVX2
// attention's F16 keys and values, a row at a time.
func cvtHalves() {
	TEXT("cvt256F16", NOSPLIT, "func(dst *float32, src *uint16, n int)")
	dst, src, n := Load(Param("dst"), GP64()), Load(Param("src"), GP64()), Load(Param("n"), GP64())
	v := YMM()
	Label("cvt_loop")
	TESTQ(n, n)
	JZ(LabelRef("cvt_done"))
	VCVTPH2PS(Mem{Base: src}, v)
	VMOVUPS(v, Mem{Base: dst})
	ADDQ(U8(16), src)
	ADDQ(U8(32), dst)
	SUBQ(U8(8), n)
	JMP(LabelRef("cvt_loop"))
	Label("cvt_done")
	VZEROUPPER()
	RET()
}
