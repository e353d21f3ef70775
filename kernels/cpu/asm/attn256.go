package main

import (
	"fmt"
	"math"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The AVX2 attention steps: attnBlock's and attnChunk's online softmax
// over n ≤ 16 slots of a chunk, with 8-lane vectors (any head width that
// is a multiple of 8; AVX-512 machines run them for widths that are not
// a multiple of 16). The 16 scores of a step are two vectors; the row
// mask becomes two lane masks (rowMasks).

// attn256Widths are the head widths with fixed-width AVX2 steps.
var attn256Widths = []int{8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 96, 112, 128, 256}

// attn256Queries is the most queries one fixed-width AVX2 step takes:
// each keeps its value sums in registers (16 of them in all).
func attn256Queries(hd int) int {
	if hd <= 16 {
		return 4
	}
	return 2
}

// expCoef is vexp's polynomial for 2^f, f ∈ [-0.5, 0.5], highest degree first.
var expCoef = []float64{1.5403530393381606e-4, 1.3333558146428443e-3, 9.6181291076284772e-3,
	5.5504108664821580e-2, 2.4022650695910071e-1, 6.9314718055994531e-1, 1}

// attn256Consts are the AVX2 steps' constants, 8 lanes each, read as
// memory operands (building each in a register took 3 instructions, ~100
// a query's step): log2 e, -127, the polynomial, 127 (an int), -1e30.
var attn256Consts = func() func(i int) Mem {
	vals := []uint32{math.Float32bits(float32(math.Log2E)), math.Float32bits(-127)}
	for _, c := range expCoef {
		vals = append(vals, math.Float32bits(float32(c)))
	}
	vals = append(vals, 127, math.Float32bits(-1e30))
	m := GLOBL("attn256consts", RODATA|NOPTR)
	for i, v := range vals {
		for l := 0; l < 8; l++ {
			DATA(32*i+4*l, U32(v))
		}
	}
	return func(i int) Mem { return m.Offset(32 * i) }
}()

const (
	cLog2E    = 0
	cMin      = 1
	cPoly     = 2 // through 8
	cBias     = 9
	cMinusBig = 10
)

// vexp256 returns e^x lane-wise for x ≤ 0, vexp's polynomial with 2^i
// set in the exponent bits (AVX2 has no VSCALEFPS): x·log2 e is clamped
// at -127, whose power is the float 0, so x below about -88 gives 0.
func vexp256(x VecVirtual) VecVirtual {
	t, i, p := YMM(), YMM(), YMM()
	VMULPS(attn256Consts(cLog2E), x, t)
	VMAXPS(attn256Consts(cMin), t, t)
	VROUNDPS(U8(0), t, i)
	VSUBPS(i, t, t)
	VMOVUPS(attn256Consts(cPoly), p)
	for c := 1; c < len(expCoef); c++ {
		VFMADD213PS(attn256Consts(cPoly+c), t, p)
	}
	e := YMM()
	VCVTPS2DQ(i, e) // i is a whole number: exact
	VPADDD(attn256Consts(cBias), e, e)
	VPSLLD(U8(23), e, e)
	VMULPS(e, p, p)
	return p
}

// softmax256 takes one query's step of the online softmax: the 16 raw
// scores at sp+disp, times scale, lanes outside the masks -1e30, update
// the state (m, l) at st+sd; the scores become p_j (0 outside the masks)
// in place, and the returned vector holds c = e^(m-m') in every lane.
func softmax256(sp Register, disp int, m [2]VecVirtual, sc VecVirtual, st Register, sd int) VecVirtual {
	var sv [2]VecVirtual
	for h := range sv {
		x := YMM()
		VMULPS(Mem{Base: sp, Disp: disp + 32*h}, sc, x)
		sv[h] = YMM()
		VMOVUPS(attn256Consts(cMinusBig), sv[h])
		VBLENDVPS(m[h], x, sv[h], sv[h])
	}
	bm := YMM()
	VMAXPS(sv[1], sv[0], bm)
	x, hi := bm.AsX(), XMM()
	VEXTRACTF128(U8(1), bm, hi)
	VMAXPS(hi, x, x)
	VPERMILPS(U8(0x4e), x, hi)
	VMAXPS(hi, x, x)
	VPERMILPS(U8(0xb1), x, hi)
	VMAXPS(hi, x, x)
	mOld, mNew, d := YMM(), YMM(), YMM()
	VBROADCASTSS(Mem{Base: st, Disp: sd}, mOld)
	VBROADCASTSS(x, mNew)
	VMAXPS(mOld, mNew, mNew)
	VSUBPS(mNew, mOld, d)
	corr := vexp256(d)
	var p [2]VecVirtual
	for h := range p {
		VSUBPS(mNew, sv[h], sv[h])
		p[h] = vexp256(sv[h])
		VANDPS(m[h], p[h], p[h])
		VMOVUPS(p[h], Mem{Base: sp, Disp: disp + 32*h})
	}
	VADDPS(p[1], p[0], p[0])
	hsum8(p[0], false)
	l := XMM()
	VMOVSS(Mem{Base: st, Disp: sd + 4}, l)
	VMULSS(corr.AsX(), l, l)
	VADDSS(p[0].AsX(), l, l)
	VMOVSS(mNew.AsX(), Mem{Base: st, Disp: sd})
	VMOVSS(l, Mem{Base: st, Disp: sd + 4})
	return corr
}

// attn256Block is attnBlock's any-width step on AVX2 over F32 keys and
// values (attnStage's): attn256F32. Each score is one vector over the
// row in column order, summed by hsum8.
func attn256Block() {
	const name, kvBytes = "attn256F32", 32
	TEXT(name, NOSPLIT, "func(q *float32, k, v *byte, stride int, n int, mask uint16, hd int, scale float32, state *[2]float32, o *float32, s *[16]float32)")
	q := Load(Param("q"), GP64())
	stride := Load(Param("stride"), GP64())
	n := Load(Param("n"), GP64())
	hd := Load(Param("hd"), GP64())
	SHLQ(U8(2), hd) // bytes of q and o
	sp := Load(Param("s"), GP64())
	load := func(m Mem, v VecVirtual) { VMOVUPS(m, v) }

	Comment("Scores.")
	w := anyWidth{name: name, vec: YMM, bytes: 32, kvBytes: kvBytes, load: load, q: q, stride: stride, n: n, hd: hd, sp: sp}
	j, cq, ck := w.scores(func(acc VecVirtual) { hsum8(acc, false) })
	Comment("Online softmax.")
	m := rowMasks(Load(Param("mask"), GP32()))
	sc := YMM()
	VBROADCASTSS(Load(Param("scale"), XMM()), sc)
	corr := softmax256(sp, 0, m, sc, Load(Param("state"), GP64()), 0)

	Comment("Values.")
	w.values(corr, j, cq, ck)
}

// scores8 leaves in the 8 floats at sp+disp the dot products of q (cols
// vectors: in registers qv, or at q) with the F32 key rows from *r on,
// one stride apart, rows past n repeating row n-1 (*r is left at the
// last row read). Each key keeps one accumulator, lanes over the row in
// column order; one transposing tree of horizontal adds sums the 8 at
// once, key i's in lane i: the same arithmetic for a key whatever else
// is read.
func scores8(q Register, qv []VecVirtual, cols int, r, stride, n Register, first int, sp Register, disp int) {
	acc := make([]VecVirtual, 8)
	next := GP64()
	for i := range acc {
		if j := first + i; j > 0 {
			LEAQ(Mem{Base: r, Index: stride, Scale: 1}, next)
			CMPQ(n, U32(j))
			CMOVQGT(next, r) // r = row min(j, n-1)
		}
		a := YMM()
		acc[i] = a
		for c := 0; c < cols; c++ {
			km, qm := Mem{Base: r, Disp: 32 * c}, Mem{Base: q, Disp: 32 * c}
			var src Op
			var kv VecVirtual
			if qv != nil {
				kv, src = qv[c], km
			} else {
				kv, src = YMM(), qm
				VMOVUPS(km, kv)
			}
			if c == 0 {
				VMULPS(src, kv, a)
			} else {
				VFMADD231PS(src, kv, a)
			}
		}
	}
	for i := 0; i < 8; i += 2 {
		VHADDPS(acc[i+1], acc[i], acc[i])
	}
	VHADDPS(acc[2], acc[0], acc[0])
	VHADDPS(acc[6], acc[4], acc[4])
	lo := YMM()
	VPERM2F128(U8(0x20), acc[4], acc[0], lo)
	VPERM2F128(U8(0x31), acc[4], acc[0], acc[4])
	VADDPS(acc[4], lo, lo)
	VMOVUPS(lo, Mem{Base: sp, Disp: disp})
}

// attn256Chunk is attnChunk's step on AVX2 for B queries of head width
// hd over F32 keys and values (attnStage's): attn256F32d{hd}x{B}, with
// attnChunk's arguments and layout. Each query takes the instructions of
// a one-query step; the value sums go through in blocks of columns that
// fit the registers, each column's sum still in key order.
func attn256Chunk(hd, B int) {
	name := fmt.Sprintf("attn256F32d%dx%d", hd, B)
	TEXT(name, NOSPLIT, "func(q *float32, qs int, k, v *byte, stride int, n int, mask uint16, scale float32, state *[2]float32, o *float32, s *float32)")
	cols := hd / 8
	q := Load(Param("q"), GP64())
	qs := Load(Param("qs"), GP64())
	SHLQ(U8(2), qs)
	stride := Load(Param("stride"), GP64())
	n := Load(Param("n"), GP64())
	sp := Load(Param("s"), GP64())

	Comment("Scores.")
	for b := 0; b < B; b++ {
		var qv []VecVirtual
		if cols <= 4 {
			qv = make([]VecVirtual, cols)
			for c := range qv {
				qv[c] = YMM()
				VMOVUPS(Mem{Base: q, Disp: 32 * c}, qv[c])
			}
		}
		r := Load(Param("k"), GP64())
		scores8(q, qv, cols, r, stride, n, 0, sp, 64*b)
		skip := fmt.Sprintf("%s_q%d_scored", name, b)
		CMPQ(n, U32(8))
		JLE(LabelRef(skip)) // lanes 8-15 are masked
		scores8(q, qv, cols, r, stride, n, 8, sp, 64*b+32)
		Label(skip)
		if b+1 < B {
			ADDQ(qs, q)
		}
	}

	Comment("Online softmax.")
	m := rowMasks(Load(Param("mask"), GP32()))
	sc := YMM()
	VBROADCASTSS(Load(Param("scale"), XMM()), sc)
	st := Load(Param("state"), GP64())
	o := Load(Param("o"), GP64())
	var corr VecVirtual
	for b := 0; b < B; b++ {
		c := softmax256(sp, 64*b, m, sc, st, 8*b)
		if B == 1 {
			corr = c
			continue
		}
		// Several queries' value sums are rescaled here, in memory: the
		// same product as in a register, leaving them for the sums.
		for i := 0; i < cols; i++ {
			x := YMM()
			VMULPS(Mem{Base: o, Disp: 4 * (b*hd + 8*i)}, c, x)
			VMOVUPS(x, Mem{Base: o, Disp: 4 * (b*hd + 8*i)})
		}
	}

	Comment("Values.")
	budget := 12 / B
	if B == 1 {
		budget = 11
	}
	blocks := (cols + budget - 1) / budget
	cb := (cols + blocks - 1) / blocks
	v := Load(Param("v"), GP64())
	for c0 := 0; c0 < cols; c0 += cb {
		c1 := min(cols, c0+cb)
		ov := make([][]VecVirtual, B)
		for b := range ov {
			ov[b] = make([]VecVirtual, c1-c0)
			for c := range ov[b] {
				ov[b][c] = YMM()
				m := Mem{Base: o, Disp: 4 * (b*hd + 8*(c0+c))}
				if B == 1 {
					VMULPS(m, corr, ov[b][c])
				} else {
					VMOVUPS(m, ov[b][c])
				}
			}
		}
		vr, j := GP64(), GP64()
		MOVQ(v, vr)
		XORQ(j, j)
		loop, done := fmt.Sprintf("%s_vrow%d", name, c0), fmt.Sprintf("%s_vdone%d", name, c0)
		Label(loop)
		CMPQ(j, n)
		JGE(LabelRef(done))
		pj := make([]VecVirtual, B)
		for b := range pj {
			pj[b] = YMM()
			VBROADCASTSS(Mem{Base: sp, Index: j, Scale: 4, Disp: 64 * b}, pj[b])
		}
		for c := c0; c < c1; c++ {
			for b := range ov {
				VFMADD231PS(Mem{Base: vr, Disp: 32 * c}, pj[b], ov[b][c-c0])
			}
		}
		ADDQ(stride, vr)
		INCQ(j)
		JMP(LabelRef(loop))
		Label(done)
		for b := range ov {
			for c := range ov[b] {
				VMOVUPS(ov[b][c], Mem{Base: o, Disp: 4 * (b*hd + 8*(c0+c))})
			}
		}
	}
	VZEROUPPER()
	RET()
}

func attn256Kernels() {
	attnStage(false)
	attnStage(true)
	attn256Block()
	for _, hd := range attn256Widths {
		attn256Chunk(hd, 1)
		attn256Chunk(hd, attn256Queries(hd))
	}
}

// writeAttn256Table writes the Go table of the fixed-width AVX2 steps.
func writeAttn256Table() {
	var b strings.Builder
	b.WriteString("// Code generated by command: go run main.go. DO NOT EDIT.\n\npackage cpu\n\n")
	b.WriteString("// attnChunks256 are the fixed-width AVX2 attention steps (F32 keys and\n// values) by head width: one query, and the most queries at once.\n")
	b.WriteString("var attnChunks256 = map[int]attnSteps{\n")
	for _, hd := range attn256Widths {
		q := attn256Queries(hd)
		fmt.Fprintf(&b, "\t%d: {attn256F32d%dx1, attn256F32d%dx%d, %d},\n", hd, hd, hd, q, q)
	}
	b.WriteString("}\n")
	writeGo("../attn256_amd64.go", b.String())
}

// attnStage emits attnStage256{F32,F16}: rows rows of a chunk's key and
// value strips (hd floats or halves each, stride bytes apart) written as
// floats, keys at dst and values at dst + 16·hd floats, hd floats a row.
// The AVX2 steps then read each strip from L1 as one contiguous block
// (F16 converted once per task, not once per query; F32 rows 1-2 KB
// apart crowd a few L1 sets).
func attnStage(f16 bool) {
	name, kvBytes := "attnStage256F32", 32
	if f16 {
		name, kvBytes = "attnStage256F16", 16
	}
	TEXT(name, NOSPLIT, "func(dst *byte, k, v *byte, stride, rows, hd int)")
	dst, k, v := Load(Param("dst"), GP64()), Load(Param("k"), GP64()), Load(Param("v"), GP64())
	stride, rows, hd := Load(Param("stride"), GP64()), Load(Param("rows"), GP64()), Load(Param("hd"), GP64())
	vd := GP64()
	MOVQ(hd, vd)
	SHLQ(U8(6), vd) // 16 rows of hd floats
	SHRQ(U8(3), hd) // vectors a row
	Label(name + "_row")
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_done"))
	c, ks, vs := GP64(), GP64(), GP64()
	MOVQ(hd, c)
	MOVQ(k, ks)
	MOVQ(v, vs)
	Label(name + "_col")
	x, y := YMM(), YMM()
	if f16 {
		VCVTPH2PS(Mem{Base: ks}, x)
		VCVTPH2PS(Mem{Base: vs}, y)
	} else {
		VMOVUPS(Mem{Base: ks}, x)
		VMOVUPS(Mem{Base: vs}, y)
	}
	VMOVUPS(x, Mem{Base: dst})
	VMOVUPS(y, Mem{Base: dst, Index: vd, Scale: 1})
	ADDQ(U32(kvBytes), ks)
	ADDQ(U32(kvBytes), vs)
	ADDQ(U32(32), dst)
	DECQ(c)
	JNZ(LabelRef(name + "_col"))
	ADDQ(stride, k)
	ADDQ(stride, v)
	DECQ(rows)
	JMP(LabelRef(name + "_row"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}
