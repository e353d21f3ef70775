package main

import (
	"fmt"
	"math"

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
func attnBlock(f16 bool) { attnBlockHD(f16, 0) }

// attnBlockHD emits the step for one head width (0: any multiple of 16,
// read at run time). A fixed width up to 128 keeps the value sums of all
// its 16-lane columns in registers, key after key, so the columns' chains
// overlap; each lane still sums o·c + Σ_j p_j v_j in the same order.
func attnBlockHD(f16 bool, fixed int) {
	name, kvBytes := "attn512F32", 64
	if f16 {
		name, kvBytes = "attn512F16", 32
	}
	if fixed > 0 {
		name = fmt.Sprintf("%sd%d", name, fixed)
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
	kr := Load(Param("k"), GP64())
	j := GP64()
	XORQ(j, j)
	cq, ck := GP64(), GP64()
	if fixed > 0 {
		qv := make([]VecVirtual, fixed/16)
		for c := range qv {
			qv[c] = ZMM()
			VMOVUPS(Mem{Base: q, Disp: 64 * c}, qv[c])
		}
		Label(name + "_frow")
		CMPQ(j, n)
		JGE(LabelRef(name + "_scored"))
		acc := ZMM()
		VXORPS(acc, acc, acc)
		for c := range qv {
			kv := ZMM()
			load(Mem{Base: kr, Disp: kvBytes * c}, kv)
			VFMADD231PS(qv[c], kv, acc)
		}
		hsum(acc)
		VMOVSS(acc.AsX(), Mem{Base: sp, Index: j, Scale: 4})
		ADDQ(stride, kr)
		INCQ(j)
		JMP(LabelRef(name + "_frow"))
	}
	Label(name + "_row")
	CMPQ(j, n)
	JGE(LabelRef(name + "_scored"))
	acc := ZMM()
	VXORPS(acc, acc, acc)
	XORQ(cq, cq)
	XORQ(ck, ck)
	Label(name + "_dot")
	CMPQ(cq, hd)
	JGE(LabelRef(name + "_dotted"))
	kv := ZMM()
	load(Mem{Base: kr, Index: ck, Scale: 1}, kv)
	VFMADD231PS(Mem{Base: q, Index: cq, Scale: 1}, kv, acc)
	ADDQ(U32(64), cq)
	ADDQ(U32(kvBytes), ck)
	JMP(LabelRef(name + "_dot"))
	Label(name + "_dotted")
	hsum(acc)
	VMOVSS(acc.AsX(), Mem{Base: sp, Index: j, Scale: 4})
	ADDQ(stride, kr)
	INCQ(j)
	JMP(LabelRef(name + "_row"))

	Label(name + "_scored")
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
	o := Load(Param("o"), GP64())
	v := Load(Param("v"), GP64())
	if fixed > 0 {
		cols := fixed / 16
		ov := make([]VecVirtual, cols)
		for c := range ov {
			ov[c] = ZMM()
			VMULPS(Mem{Base: o, Disp: 64 * c}, corr, ov[c])
		}
		XORQ(j, j)
		Label(name + "_fvrow")
		CMPQ(j, n)
		JGE(LabelRef(name + "_fvdone"))
		pj := ZMM()
		VBROADCASTSS(Mem{Base: sp, Index: j, Scale: 4}, pj)
		for c := range ov {
			vv := ZMM()
			load(Mem{Base: v, Disp: kvBytes * c}, vv)
			VFMADD231PS(pj, vv, ov[c])
		}
		ADDQ(stride, v)
		INCQ(j)
		JMP(LabelRef(name + "_fvrow"))
		Label(name + "_fvdone")
		for c := range ov {
			VMOVUPS(ov[c], Mem{Base: o, Disp: 64 * c})
		}
		JMP(LabelRef(name + "_done"))
	}
	XORQ(cq, cq)
	XORQ(ck, ck)
	Label(name + "_col")
	CMPQ(cq, hd)
	JGE(LabelRef(name + "_done"))
	ov := ZMM()
	VMULPS(Mem{Base: o, Index: cq, Scale: 1}, corr, ov)
	vr := GP64()
	LEAQ(Mem{Base: v, Index: ck, Scale: 1}, vr)
	XORQ(j, j)
	Label(name + "_vrow")
	CMPQ(j, n)
	JGE(LabelRef(name + "_vdone"))
	pj, vv := ZMM(), ZMM()
	VBROADCASTSS(Mem{Base: sp, Index: j, Scale: 4}, pj)
	load(Mem{Base: vr}, vv)
	VFMADD231PS(pj, vv, ov)
	ADDQ(stride, vr)
	INCQ(j)
	JMP(LabelRef(name + "_vrow"))
	Label(name + "_vdone")
	VMOVUPS(ov, Mem{Base: o, Index: cq, Scale: 1})
	ADDQ(U32(64), cq)
	ADDQ(U32(kvBytes), ck)
	JMP(LabelRef(name + "_col"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
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
