package main

import (
	"fmt"
	"math"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// attnBlock emits one step of online-softmax attention for one query head
// over n ≤ 16 consecutive KV slots (AVX-512, head_dim a multiple of 16):
//
//	s_j = scale · q·k_j           for j < n (rows stride bytes apart)
//	m' = max(m, max_j s_j);  c = e^(m-m');  p_j = e^(s_j-m')
//	l  = l·c + Σ p_j;        o = o·c + Σ p_j v_j
//
// with (m, l) in state and o (head_dim) in memory; the caller divides o by
// l after the last block. s is 16 floats of scratch. K and V are F32 or F16.
// This one reads the head width at run time; attnChunk's fixed widths
// keep rows in registers and take several queries at once.
func attnBlock(f16 bool) {
	name, kvBytes := "attn512F32", 64
	if f16 {
		name, kvBytes = "attn512F16", 32
	}
	TEXT(name, NOSPLIT, "func(q *float32, k, v *byte, stride int, n int, mask uint16, hd int, scale float32, state *[2]float32, o *float32, s *[16]float32)")
	q := Load(Param("q"), GP64())
	stride := Load(Param("stride"), GP64())
	n := Load(Param("n"), GP64())
	hd := Load(Param("hd"), GP64())
	SHLQ(U8(2), hd) // bytes of q and o
	sp := Load(Param("s"), GP64())
	load := func(m Mem, v VecVirtual) {
		if f16 {
			VCVTPH2PS(m, v)
		} else {
			VMOVUPS(m, v)
		}
	}

	Comment("Scores.")
	w := anyWidth{name: name, vec: ZMM, bytes: 64, kvBytes: kvBytes, load: load, q: q, stride: stride, n: n, hd: hd, sp: sp}
	j, cq, ck := w.scores(hsum)

	Comment("Online softmax.")
	mk := K()
	mask := Load(Param("mask"), GP32())
	KMOVW(mask, mk)
	sc := ZMM()
	VBROADCASTSS(Load(Param("scale"), XMM()), sc)
	sv := constant(math.Float32bits(-1e30))
	VMULPS_Z(Mem{Base: sp}, sc, mk, sc) // lanes past n: 0, then replaced
	VMOVAPS(sc, mk, sv)                 // lanes past n: -1e30
	bm, tmp := ZMM(), ZMM()
	VMOVAPS(sv, tmp)
	hmax(tmp, bm)
	st := Load(Param("state"), GP64())
	mOld, mNew := ZMM(), ZMM()
	VBROADCASTSS(Mem{Base: st}, mOld)
	VMAXPS(bm, mOld, mNew)
	d := ZMM()
	VSUBPS(mNew, mOld, d)
	corr := vexp(d)
	VSUBPS(mNew, sv, sv)
	p := vexp(sv)
	VMOVAPS_Z(p, mk, p)
	VMOVUPS(p, Mem{Base: sp})
	ps := ZMM()
	VMOVAPS(p, ps)
	hsum(ps)
	l := XMM()
	VMOVSS(Mem{Base: st, Disp: 4}, l)
	VMULSS(corr.AsX(), l, l)
	VADDSS(ps.AsX(), l, l)
	VMOVSS(mNew.AsX(), Mem{Base: st})
	VMOVSS(l, Mem{Base: st, Disp: 4})

	Comment("Values.")
	w.values(corr, j, cq, ck)
}

// anyWidth is the part of the any-width steps (attnBlock, attn256Block)
// that only the vector width tells apart: the score of each key row and
// the value sum, walking the head width vector by vector at run time.
type anyWidth struct {
	name           string
	vec            func() VecVirtual
	bytes, kvBytes int // of a vector of q and o, and of K and V rows
	load           func(Mem, VecVirtual)
	q, stride, n   Register
	hd, sp         Register // hd in bytes of q
}

// scores leaves in s[j] (j < n) the dot product of q with key row j at
// k + j·stride, summed by sum, and gives the loop registers for values.
func (w anyWidth) scores(sum func(VecVirtual)) (j, cq, ck Register) {
	name := w.name
	kr := Load(Param("k"), GP64())
	j = GP64()
	XORQ(j, j)
	cq, ck = GP64(), GP64()
	Label(name + "_row")
	CMPQ(j, w.n)
	JGE(LabelRef(name + "_scored"))
	acc := w.vec()
	VXORPS(acc, acc, acc)
	XORQ(cq, cq)
	XORQ(ck, ck)
	Label(name + "_dot")
	CMPQ(cq, w.hd)
	JGE(LabelRef(name + "_dotted"))
	kv := w.vec()
	w.load(Mem{Base: kr, Index: ck, Scale: 1}, kv)
	VFMADD231PS(Mem{Base: w.q, Index: cq, Scale: 1}, kv, acc)
	ADDQ(U32(w.bytes), cq)
	ADDQ(U32(w.kvBytes), ck)
	JMP(LabelRef(name + "_dot"))
	Label(name + "_dotted")
	sum(acc)
	VMOVSS(acc.AsX(), Mem{Base: w.sp, Index: j, Scale: 4})
	ADDQ(w.stride, kr)
	INCQ(j)
	JMP(LabelRef(name + "_row"))
	Label(name + "_scored")
	return j, cq, ck
}

// values sets o = o·corr + Σ_j s[j]·v_j over value rows v + j·stride,
// and returns from the step.
func (w anyWidth) values(corr VecVirtual, j, cq, ck Register) {
	name := w.name
	o := Load(Param("o"), GP64())
	v := Load(Param("v"), GP64())
	XORQ(cq, cq)
	XORQ(ck, ck)
	Label(name + "_col")
	CMPQ(cq, w.hd)
	JGE(LabelRef(name + "_done"))
	ov := w.vec()
	VMULPS(Mem{Base: o, Index: cq, Scale: 1}, corr, ov)
	vr := GP64()
	LEAQ(Mem{Base: v, Index: ck, Scale: 1}, vr)
	XORQ(j, j)
	Label(name + "_vrow")
	CMPQ(j, w.n)
	JGE(LabelRef(name + "_vdone"))
	pj, vv := w.vec(), w.vec()
	VBROADCASTSS(Mem{Base: w.sp, Index: j, Scale: 4}, pj)
	w.load(Mem{Base: vr}, vv)
	VFMADD231PS(pj, vv, ov)
	ADDQ(w.stride, vr)
	INCQ(j)
	JMP(LabelRef(name + "_vrow"))
	Label(name + "_vdone")
	VMOVUPS(ov, Mem{Base: o, Index: cq, Scale: 1})
	ADDQ(U32(w.bytes), cq)
	ADDQ(U32(w.kvBytes), ck)
	JMP(LabelRef(name + "_col"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// scores16 leaves in s[j] (j < 16) the dot product of q (head_dim/16
// registers) with key row j at k + j·stride, each summed as hsum does:
// lanes over the row in column order, then halves, quarters, pairs. The
// 16 sums are not reduced one by one but by one transposing tree (its
// levels are hsum's), key j accumulated in vector 4·(j%4) + j/4 so that
// its sum lands in lane j. Rows past n repeat row n-1 (they stay in the
// block; the caller masks their lanes).
func scores16(qv []VecVirtual, k, stride, n Register, kvBytes int, f16 bool, sp Register, disp int) {
	acc := make([]VecVirtual, 16)
	for i := range acc {
		acc[i] = ZMM()
	}
	r, next := GP64(), GP64()
	MOVQ(k, r)
	kv := ZMM()
	for j := 0; j < 16; j++ {
		if j > 0 {
			LEAQ(Mem{Base: r, Index: stride, Scale: 1}, next)
			CMPQ(n, U32(j))
			CMOVQGT(next, r) // r = row min(j, n-1)
		}
		a := acc[4*(j%4)+j/4]
		VXORPS(a, a, a)
		for c := range qv {
			m := Mem{Base: r, Disp: kvBytes * c}
			if f16 {
				VCVTPH2PS(m, kv)
				VFMADD231PS(qv[c], kv, a)
			} else {
				VFMADD231PS(m, qv[c], a)
			}
		}
	}
	shuf := func(op func(...Op), imm uint8) func(b, a, dst VecVirtual) {
		return func(b, a, dst VecVirtual) { op(U8(imm), b, a, dst) }
	}
	unpack := func(op func(...Op)) func(b, a, dst VecVirtual) {
		return func(b, a, dst VecVirtual) { op(b, a, dst) }
	}
	// halves (lanes k and k+8 of each row), quarters (m and m+4), pairs
	// (elements 0+2 and 1+3 of each 4), then 0+1.
	v := treeLevel(acc, shuf(VSHUFF32X4, 0x44), shuf(VSHUFF32X4, 0xee))
	v = treeLevel(v, shuf(VSHUFF32X4, 0x88), shuf(VSHUFF32X4, 0xdd))
	v = treeLevel(v, unpack(VUNPCKLPD), unpack(VUNPCKHPD))
	v = treeLevel(v, shuf(VSHUFPS, 0x88), shuf(VSHUFPS, 0xdd))
	lo := v[0]
	VMOVUPS(lo, Mem{Base: sp, Disp: disp})
}

// treeLevel adds each pair of vectors' two shuffles: out[i] =
// lo(in[2i], in[2i+1]) + hi(in[2i], in[2i+1]), half as many vectors.
func treeLevel(in []VecVirtual, lo, hi func(b, a, dst VecVirtual)) []VecVirtual {
	out := make([]VecVirtual, len(in)/2)
	for i := range out {
		l, h := ZMM(), ZMM()
		lo(in[2*i+1], in[2*i], l)
		hi(in[2*i+1], in[2*i], h)
		VADDPS(h, l, l)
		out[i] = l
	}
	return out
}

func constant(bits uint32) VecVirtual {
	r, v := GP32(), ZMM()
	MOVL(U32(bits), r)
	VPBROADCASTD(r, v)
	return v
}

// hmax sets every lane of out to the largest lane of a (a is clobbered).
func hmax(a, out VecVirtual) {
	y, hi := a.AsY(), YMM()
	VEXTRACTF64X4(U8(1), a, hi)
	VMAXPS(hi, y, y)
	x, h := a.AsX(), XMM()
	VEXTRACTF32X4(U8(1), y, h)
	VMAXPS(h, x, x)
	VPERMILPS(U8(0x4e), x, h)
	VMAXPS(h, x, x)
	VPERMILPS(U8(0xb1), x, h)
	VMAXPS(h, x, x)
	VBROADCASTSS(x, out)
}

// vexp returns e^x lane-wise for x ≤ 0: 2^(x·log2 e) as 2^i (VSCALEFPS)
// times a degree-6 polynomial in the fraction f ∈ [-0.5, 0.5], within
// 2e-7 relative; x below -87 gives 0.
func vexp(x VecVirtual) VecVirtual {
	t, i, p := ZMM(), ZMM(), ZMM()
	VMULPS(constant(math.Float32bits(float32(math.Log2E))), x, t)
	VRNDSCALEPS(U8(0), t, i)
	VSUBPS(i, t, t)
	coef := []float64{1.5403530393381606e-4, 1.3333558146428443e-3, 9.6181291076284772e-3,
		5.5504108664821580e-2, 2.4022650695910071e-1, 6.9314718055994531e-1, 1}
	VMOVAPS(constant(math.Float32bits(float32(coef[0]))), p)
	for _, c := range coef[1:] {
		VFMADD213PS(constant(math.Float32bits(float32(c))), t, p)
	}
	VSCALEFPS(i, p, p)
	return p
}

// siluMul sets g = g·sigmoid(g)·u over n elements (a multiple of 16), with
// vexp's e^-g: g/(1+e^-g) is -0 where e^-g overflows, as with math.Exp.
func siluMul() {
	TEXT("silu512", NOSPLIT, "func(gate, up *float32, n int)")
	g, u, n := Load(Param("gate"), GP64()), Load(Param("up"), GP64()), Load(Param("n"), GP64())
	one := constant(math.Float32bits(1))
	Label("silu_loop")
	TESTQ(n, n)
	JZ(LabelRef("silu_done"))
	x, neg := ZMM(), ZMM()
	VMOVUPS(Mem{Base: g}, x)
	VXORPS(neg, neg, neg)
	VSUBPS(x, neg, neg)
	e := vexp(neg)
	VADDPS(one, e, e)
	VDIVPS(e, x, x)
	VMULPS(Mem{Base: u}, x, x)
	VMOVUPS(x, Mem{Base: g})
	ADDQ(U32(64), g)
	ADDQ(U32(64), u)
	SUBQ(U32(16), n)
	JMP(LabelRef("silu_loop"))
	Label("silu_done")
	VZEROUPPER()
	RET()
}

// attnQueries is the most queries one fixed-width step takes, by head
// width: their value sums stay in registers (4 or 8 per query).
func attnQueries(hd int) int {
	if hd > 64 {
		return 2
	}
	return 4
}

// attnChunk emits attnBlock's step for B queries of one fixed head width
// over the same n ≤ 16 slots: attn512{F32,F16}d{hd}x{B}. Query b's
// vector is at q + b·qs (floats), its state at state[b], its value sums at
// o + b·hd, its scratch at s + 16b. Each query takes exactly the
// instructions of a one-query step (scores16, the same softmax, the same
// value chains in key order); several at once interleave their chains,
// which alone wait on the FMA latency (16 keys one after another).
func attnChunk(f16 bool, hd, B int) {
	name, kvBytes := "attn512F32", 64
	if f16 {
		name, kvBytes = "attn512F16", 32
	}
	name = fmt.Sprintf("%sd%dx%d", name, hd, B)
	TEXT(name, NOSPLIT, "func(q *float32, qs int, k, v *byte, stride int, n int, mask uint16, scale float32, state *[2]float32, o *float32, s *float32)")
	cols := hd / 16
	q := Load(Param("q"), GP64())
	qs := Load(Param("qs"), GP64())
	SHLQ(U8(2), qs)
	stride := Load(Param("stride"), GP64())
	n := Load(Param("n"), GP64())
	sp := Load(Param("s"), GP64())
	kr := Load(Param("k"), GP64())

	Comment("Scores.")
	for b := 0; b < B; b++ {
		qv := make([]VecVirtual, cols)
		for c := range qv {
			qv[c] = ZMM()
			VMOVUPS(Mem{Base: q, Disp: 64 * c}, qv[c])
		}
		scores16(qv, kr, stride, n, kvBytes, f16, sp, 64*b)
		if b+1 < B {
			ADDQ(qs, q)
		}
	}

	Comment("Online softmax.")
	mk := K()
	KMOVW(Load(Param("mask"), GP32()), mk)
	sc := ZMM()
	VBROADCASTSS(Load(Param("scale"), XMM()), sc)
	st := Load(Param("state"), GP64())
	corr := make([]VecVirtual, B)
	for b := 0; b < B; b++ {
		sv, sb := constant(math.Float32bits(-1e30)), ZMM()
		VMULPS_Z(Mem{Base: sp, Disp: 64 * b}, sc, mk, sb) // lanes past n: 0, then replaced
		VMOVAPS(sb, mk, sv)                               // lanes past n: -1e30
		bm, tmp := ZMM(), ZMM()
		VMOVAPS(sv, tmp)
		hmax(tmp, bm)
		mOld, mNew := ZMM(), ZMM()
		VBROADCASTSS(Mem{Base: st, Disp: 8 * b}, mOld)
		VMAXPS(bm, mOld, mNew)
		d := ZMM()
		VSUBPS(mNew, mOld, d)
		corr[b] = vexp(d)
		VSUBPS(mNew, sv, sv)
		p := vexp(sv)
		VMOVAPS_Z(p, mk, p)
		VMOVUPS(p, Mem{Base: sp, Disp: 64 * b})
		ps := ZMM()
		VMOVAPS(p, ps)
		hsum(ps)
		l := XMM()
		VMOVSS(Mem{Base: st, Disp: 8*b + 4}, l)
		VMULSS(corr[b].AsX(), l, l)
		VADDSS(ps.AsX(), l, l)
		VMOVSS(mNew.AsX(), Mem{Base: st, Disp: 8 * b})
		VMOVSS(l, Mem{Base: st, Disp: 8*b + 4})
	}

	Comment("Values.")
	o := Load(Param("o"), GP64())
	v := Load(Param("v"), GP64())
	ov := make([][]VecVirtual, B)
	for b := range ov {
		ov[b] = make([]VecVirtual, cols)
		for c := range ov[b] {
			ov[b][c] = ZMM()
			VMULPS(Mem{Base: o, Disp: 4 * (b*hd + 16*c)}, corr[b], ov[b][c])
		}
	}
	j := GP64()
	XORQ(j, j)
	Label(name + "_vrow")
	CMPQ(j, n)
	JGE(LabelRef(name + "_vdone"))
	vv := make([]VecVirtual, cols)
	for c := range vv {
		vv[c] = ZMM()
		if f16 {
			VCVTPH2PS(Mem{Base: v, Disp: kvBytes * c}, vv[c])
		}
	}
	for b := range ov {
		pj := ZMM()
		VBROADCASTSS(Mem{Base: sp, Index: j, Scale: 4, Disp: 64 * b}, pj)
		for c := range ov[b] {
			if f16 {
				VFMADD231PS(pj, vv[c], ov[b][c])
			} else {
				VFMADD231PS(Mem{Base: v, Disp: kvBytes * c}, pj, ov[b][c])
			}
		}
	}
	ADDQ(stride, v)
	INCQ(j)
	JMP(LabelRef(name + "_vrow"))
	Label(name + "_vdone")
	for b := range ov {
		for c := range ov[b] {
			VMOVUPS(ov[b][c], Mem{Base: o, Disp: 4 * (b*hd + 16*c)})
		}
	}
	VZEROUPPER()
	RET()
}

// attnWidths are the head widths with attnChunk steps.
var attnWidths = []int{32, 48, 64, 80, 96, 112, 128}

// writeAttnTable writes the Go table of the fixed-width attention steps.
func writeAttnTable() {
	var b strings.Builder
	b.WriteString("// Code generated by command: go run main.go. DO NOT EDIT.\n\npackage cpu\n\n")
	b.WriteString("// attnChunks are the fixed-width attention steps by KV type and head\n// width: one query, and the most queries at once.\n")
	b.WriteString("var attnChunks = map[attnKey]attnSteps{\n")
	for _, f16 := range []bool{false, true} {
		t := "F32"
		if f16 {
			t = "F16"
		}
		for _, hd := range attnWidths {
			q := attnQueries(hd)
			fmt.Fprintf(&b, "\t{%v, %d}: {attn512%sd%dx1, attn512%sd%dx%d, %d},\n", f16, hd, t, hd, t, hd, q, q)
		}
	}
	b.WriteString("}\n")
	writeGo("../attn_amd64.go", b.String())
}

// attnPrefetch emits attnPrefetch512: a software prefetch (into L1) of
// lines 64-byte lines of rows rows, stride bytes apart, at k and at v: the
// next chunk's strip of keys and values, fetched while this chunk's steps
// run (a step reads each row's strip at a 1-2 KB stride, which the
// hardware's prefetchers did not follow: a one-token decode read F16
// slots from L3 at a tenth of its steps' speed in L1).
func attnPrefetch() {
	TEXT("attnPrefetch512", NOSPLIT, "func(k, v *byte, stride, rows, lines int)")
	k, v := Load(Param("k"), GP64()), Load(Param("v"), GP64())
	stride, rows, lines := Load(Param("stride"), GP64()), Load(Param("rows"), GP64()), Load(Param("lines"), GP64())
	SHLQ(U8(6), lines)
	Label("attnpf_row")
	TESTQ(rows, rows)
	JZ(LabelRef("attnpf_done"))
	off := GP64()
	XORQ(off, off)
	Label("attnpf_line")
	PREFETCHT0(Mem{Base: k, Index: off, Scale: 1})
	PREFETCHT0(Mem{Base: v, Index: off, Scale: 1})
	ADDQ(U32(64), off)
	CMPQ(off, lines)
	JL(LabelRef("attnpf_line"))
	ADDQ(stride, k)
	ADDQ(stride, v)
	DECQ(rows)
	JMP(LabelRef("attnpf_row"))
	Label("attnpf_done")
	RET()
}
