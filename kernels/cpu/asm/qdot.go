package main

import (
	"fmt"
	"go/format"
	"os"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The AVX2 integer dot products of quantized weight rows with Q8
// activations (see kernels/cpu/qdot.go for the arithmetic, which these
// follow lane for lane): qdotavx2{Type}x1x{R} compute one token × R rows,
// each output with the same instructions whatever R (a tile only shares
// the loads and the weight-side work between outputs). AVX-512 with VNNI
// multiplies packed weights instead (packed.go).
//
// A block's 8 int32 lanes come from VPMADDUBSW + VPMADDWD, each lane the
// exact sum of 4 products. Weights are made unsigned by an offset whose
// product with the activations is subtracted exactly: Q8_0 moves its sign
// onto the activations (16-bit pairs of w+128 would saturate), Q4_0
// subtracts 8, Q6_K 32; Q4_K's mins are a separate float term.

var qtypes = []string{"Q8_0", "Q4_0", "Q4K", "Q6K", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "MXFP4", "Q2K", "Q3K", "Q5K", "IQ4XS"}

const qRows = 4

// qPrefetch is how far ahead of its reads (bytes) a kernel asks for each
// weight row: a decode streams the weights from DRAM.
const qPrefetch = 4096

var qonly = os.Getenv("QONLY")

func qdots() {
	for _, t := range qtypes {
		for r := 1; r <= qRows; r++ {
			if qonly != "" && qonly != qname(t, 1, r) {
				continue
			}
			qdot(t, 1, r)
		}
	}
}

func qname(t string, tk, r int) string { return fmt.Sprintf("qdotavx2%sx%dx%d", t, tk, r) }

// qctx is the state one kernel's generator shares between its helpers.
type qctx struct {
	ones VecVirtual // AVX2: sixteen-bit ones for VPMADDWD
	T, R int
	// row r's weights at wb[r/3] + (r%3)·ws
	wb []Register
	ws Register
	// the token's activations at q, its scales and sums at d, s (T is 1:
	// token t > 0 would sit a stride further)
	q, d, s Register
}

func (c *qctx) pand(a, b, d Op) { VPAND(a, b, d) }
func (c *qctx) pxor(a, b, d Op) { VPXOR(a, b, d) }
func (c *qctx) por(a, b, d Op)  { VPOR(a, b, d) }
func (c *qctx) movdqu(a, d Op)  { VMOVDQU(a, d) }

func (c *qctx) zero(v VecVirtual) { c.pxor(v, v, v) }

func (c *qctx) row(r, disp int) Mem {
	m := Mem{Base: c.wb[r/3], Disp: disp}
	if r%3 != 0 {
		m.Index, m.Scale = c.ws, uint8(r%3)
	}
	return m
}

// prefetch asks for row r's weights qPrefetch+off bytes ahead (non-temporal), in
// one-token tiles only: a decode reads each weight once from DRAM, while a
// prefill's rows are already in cache for the tokens after the first.
func (c *qctx) prefetch(r, off int) {
	if c.T == 1 {
		PREFETCHNTA(c.row(r, qPrefetch+off))
	}
}

func tokAt(base Register, t, disp int) Mem {
	if t != 0 {
		panic("asm: AVX2 integer tiles take one token")
	}
	return Mem{Base: base, Disp: disp}
}

func (c *qctx) xq(t, disp int) Mem { return tokAt(c.q, t, disp) }
func (c *qctx) xd(t, disp int) Mem { return tokAt(c.d, t, disp) }
func (c *qctx) xs(t, disp int) Mem { return tokAt(c.s, t, disp) }

// advance moves the weights by wb bytes and the activations by qb bytes
// of quants and db bytes of scales (and sums).
func (c *qctx) advance(wb, qb, db int) {
	for _, b := range c.wb {
		ADDQ(U32(wb), b)
	}
	ADDQ(U32(qb), c.q)
	ADDQ(U32(db), c.d)
	if c.s != nil {
		ADDQ(U32(db), c.s)
	}
}

// idot sets acc = init + the lanes of u·x (u unsigned bytes, x signed).
// init nil means zero.
func (c *qctx) idot(acc, init, u, x VecVirtual) {
	VPMADDUBSW(x, u, acc)
	VPMADDWD(c.ones, acc, acc)
	if init != nil {
		VPADDD(init, acc, acc)
	}
}

// negDot sets neg = -(off·x) per lane: the offset's share of a block.
func (c *qctx) negDot(neg, off, x VecVirtual) {
	z := YMM()
	c.idot(z, nil, off, x)
	c.zero(neg)
	VPSUBD(z, neg, neg)
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

func grid(T, R int) [][]VecVirtual {
	g := make([][]VecVirtual, T)
	for t := range g {
		g[t] = make([]VecVirtual, R)
		for r := range g[t] {
			g[t][r] = YMM()
		}
	}
	return g
}

func qdot(typ string, T, R int) {
	name := qname(typ, T, R)
	TEXT(name, NOSPLIT, "func(w *byte, ws int, x *int8, xd *float32, xs *int32, xst int, nb int, dst *float32, ds int, groups int)")
	c := &qctx{T: T, R: R}
	// groups tiles of R consecutive rows each, one after another: the row
	// loop of a decode stays out of Go. Each group reloads its arguments;
	// w, dst and groups advance in the argument frame.
	Label(name + "_group")
	c.wb = []Register{Load(Param("w"), GP64())}
	c.ws = Load(Param("ws"), GP64())
	c.q = Load(Param("x"), GP64())
	c.d = Load(Param("xd"), GP64())
	if typ == "Q4K" || typ == "Q5K" || typ == "Q4_1" || typ == "Q5_1" {
		c.s = Load(Param("xs"), GP64())
	}
	nb := Load(Param("nb"), GP64())
	r := GP32()
	MOVL(U32(0x00010001), r)
	c.ones = YMM()
	VMOVD(r, c.ones.AsX())
	VPBROADCASTD(c.ones.AsX(), c.ones)
	for i := 3; i < R; i += 3 {
		b := GP64()
		LEAQ(Mem{Base: c.wb[len(c.wb)-1], Index: c.ws, Scale: 2}, b)
		ADDQ(c.ws, b)
		c.wb = append(c.wb, b)
	}
	acc := grid(T, R)
	for t := range acc {
		for r := range acc[t] {
			c.zero(acc[t][r])
		}
	}
	var macc [][]VecVirtual
	var fin finish
	switch typ {
	case "Q8_0", "Q4_0":
		q32(c, typ, nb, acc, name)
	case "Q4K":
		macc = grid(T, R)
		for t := range macc {
			for r := range macc[t] {
				c.zero(macc[t][r])
			}
		}
		q4k(c, nb, acc, macc, name)
	case "Q6K":
		q6k(c, nb, acc, name)
	case "Q5K":
		macc = grid(T, R)
		for t := range macc {
			for r := range macc[t] {
				c.zero(macc[t][r])
			}
		}
		q4k5(c, typ, nb, acc, macc, name)
	case "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "MXFP4":
		fin = q32More(c, typ, nb, acc, name)
	case "IQ4XS":
		iq4xs(c, nb, acc, name)
	case "Q2K", "Q3K":
		fin = q2k3k(c, typ, nb, acc, name)
	}
	dst := Load(Param("dst"), GP64())
	ds := Load(Param("ds"), GP64())
	SHLQ(U8(2), ds)
	for t := range acc {
		for r := range acc[t] {
			a := acc[t][r]
			hsum8(a, false)
			if macc != nil {
				hsum8(macc[t][r], false)
				VSUBSS(macc[t][r].AsX(), a.AsX(), a.AsX())
			}
			if fin != nil {
				fin(t, r, a)
			}
			VMOVSS(a.AsX(), Mem{Base: dst, Disp: 4 * r})
		}
		if t+1 < T {
			ADDQ(ds, dst)
		}
	}
	next := Load(Param("dst"), GP64())
	ADDQ(U32(4*R), next)
	Store(next, Param("dst"))
	w, step := Load(Param("w"), GP64()), Load(Param("ws"), GP64())
	IMUL3Q(U32(R), step, step)
	ADDQ(step, w)
	Store(w, Param("w"))
	g := Load(Param("groups"), GP64())
	DECQ(g)
	Store(g, Param("groups"))
	JNZ(LabelRef(name + "_group"))
	VZEROUPPER()
	RET()
}

// q32: Q8_0 (34-byte blocks: d, 32 int8) and Q4_0 (18-byte blocks: d, 16
// bytes of nibbles, element j low and j+16 high).
func q32(c *qctx, typ string, nb Register, acc [][]VecVirtual, name string) {
	size := 34
	// Q8_0's signed weights: the sign moves onto the activations
	// (VPSIGNB, |w| unsigned).
	sign := typ == "Q8_0"
	var off, mask VecVirtual
	if typ == "Q4_0" {
		size, off, mask = 18, bcastB(8), bcastB(15)
	}
	xv, dx, neg := make([]VecVirtual, c.T), make([]VecVirtual, c.T), make([]VecVirtual, c.T)
	for t := range xv {
		xv[t], dx[t], neg[t] = YMM(), YMM(), YMM()
	}
	u, iv, s := YMM(), YMM(), YMM()
	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	for t := range xv {
		c.movdqu(c.xq(t, 0), xv[t])
		VBROADCASTSS(c.xd(t, 0), dx[t])
		if off != nil {
			c.negDot(neg[t], off, xv[t])
		}
	}
	for r := 0; r < c.R; r++ {
		var sx VecVirtual
		if sign {
			c.movdqu(c.row(r, 2), u)
			sx = YMM()
		} else {
			hi := XMM()
			c.movdqu(c.row(r, 2), u.AsX())
			VPSRLW(U8(4), u.AsX(), hi)
			VINSERTI128(U8(1), hi, u, u)
			c.pand(mask, u, u)
		}
		c.prefetch(r, 0)
		dw := bcastF16(c.row(r, 0))
		for t := range xv {
			switch {
			case sign:
				VPSIGNB(u, xv[t], sx) // x·sign(w)
				VPABSB(u, s)
				c.idot(iv, nil, s, sx)
			default:
				c.idot(iv, neg[t], u, xv[t])
			}
			VCVTDQ2PS(iv, iv)
			VMULPS(dw, dx[t], s)
			VFMADD231PS(s, iv, acc[t][r])
		}
	}
	c.advance(size, 32, 4)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
}

// q4k: 144-byte super-blocks of 8 sub-blocks: d, dmin, 12 bytes of 6-bit
// scales and mins, 128 bytes of nibbles (pair p: sub-block 2p low, 2p+1
// high).
func q4k(c *qctx, nb Register, acc, macc [][]VecVirtual, name string) {
	q4k5(c, "Q4K", nb, acc, macc, name)
}

// q4k5 is q4k, or Q5_K (176-byte super-blocks: d, dmin, 12 bytes of
// scales and mins, qh[32] of fifth bits (sub-block j's in bit j), 128
// bytes of nibbles).
func q4k5(c *qctx, typ string, nb Register, acc, macc [][]VecVirtual, name string) {
	size, qs := 144, 16
	if typ == "Q5K" {
		size, qs = 176, 48
	}
	T, R := c.T, c.R
	scale := AllocLocal(32 * R * T) // (d·sc_j)·dx_j per row, token, sub-block
	slot := func(r, t, j int) Mem { return scale.Offset(32*(r*T+t) + 4*j) }
	mask := bcastB(15)
	SHRQ(U8(3), nb)
	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	for r := 0; r < R; r++ {
		for l := 0; l < size; l += 64 {
			c.prefetch(r, l)
		}
		c.prefetch(r, size-1)
		// The scales and mins as llama.cpp unpacks them: four words,
		// sc[0..3] sc[4..7] m[0..3] m[4..7].
		u0, u1, u2, t1, t2 := GP32(), GP32(), GP32(), GP32(), GP32()
		MOVL(c.row(r, 4), u0)
		MOVL(c.row(r, 8), u1)
		MOVL(c.row(r, 12), u2)
		scv, mv := YMM(), YMM()
		// m[4..7] = (u2>>4)&0x0f0f0f0f | ((u1>>6)&0x03030303)<<4
		MOVL(u2, t1)
		SHRL(U8(4), t1)
		ANDL(U32(0x0f0f0f0f), t1)
		MOVL(u1, t2)
		SHRL(U8(6), t2)
		ANDL(U32(0x03030303), t2)
		SHLL(U8(4), t2)
		ORL(t2, t1)
		ANDL(U32(0x3f3f3f3f), u1) // m[0..3]
		VMOVD(u1, mv.AsX())
		VPINSRD(U8(1), t1, mv.AsX(), mv.AsX())
		// sc[4..7] = u2&0x0f0f0f0f | ((u0>>6)&0x03030303)<<4
		ANDL(U32(0x0f0f0f0f), u2)
		MOVL(u0, t2)
		SHRL(U8(6), t2)
		ANDL(U32(0x03030303), t2)
		SHLL(U8(4), t2)
		ORL(t2, u2)
		ANDL(U32(0x3f3f3f3f), u0) // sc[0..3]
		VMOVD(u0, scv.AsX())
		VPINSRD(U8(1), u2, scv.AsX(), scv.AsX())
		VPMOVZXBD(scv.AsX(), scv)
		VCVTDQ2PS(scv, scv)
		VPMOVZXBD(mv.AsX(), mv)
		VCVTDQ2PS(mv, mv)
		d := bcastF16(c.row(r, 0))
		VMULPS(scv, d, scv)
		dmin := bcastF16(c.row(r, 2))
		VMULPS(mv, dmin, mv)
		for t := 0; t < T; t++ {
			dxv, xsv := YMM(), YMM()
			VMOVUPS(c.xd(t, 0), dxv)
			VCVTDQ2PS(c.xs(t, 0), xsv)
			VMULPS(xsv, dxv, xsv)
			VFMADD231PS(xsv, mv, macc[t][r])
			VMULPS(dxv, scv, dxv)
			VMOVUPS(dxv, slot(r, t, 0))
		}
	}
	xv := make([]VecVirtual, T)
	for t := range xv {
		xv[t] = YMM()
	}
	u, iv, s := YMM(), YMM(), YMM()
	for p := 0; p < 4; p++ {
		for h := 0; h < 2; h++ {
			j := 2*p + h
			for t := range xv {
				c.movdqu(c.xq(t, 32*j), xv[t])
			}
			for r := 0; r < R; r++ {
				c.movdqu(c.row(r, qs+32*p), u)
				if h == 1 {
					VPSRLW(U8(4), u, u)
				}
				c.pand(mask, u, u)
				if typ == "Q5K" {
					// sub-block j's fifth bits (bit j of qh) to bit 4
					hb := YMM()
					c.movdqu(c.row(r, 16), hb)
					switch {
					case j < 4:
						VPSLLW(U8(4-j), hb, hb)
					case j > 4:
						VPSRLW(U8(j-4), hb, hb)
					}
					VPAND(bytes16, hb, hb)
					c.por(hb, u, u)
				}
				for t := range xv {
					c.idot(iv, nil, u, xv[t])
					VCVTDQ2PS(iv, iv)
					VBROADCASTSS(slot(r, t, j), s)
					VFMADD231PS(s, iv, acc[t][r])
				}
			}
		}
	}
	c.advance(size, 256, 32)
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
func q6k(c *qctx, nb Register, acc [][]VecVirtual, name string) {
	T, R := c.T, c.R
	scale := AllocLocal(32 * R * T) // d·dx_b per row, token, block
	slot := func(r, t, b int) Mem { return scale.Offset(32*(r*T+t) + 4*b) }
	mask, hmask, off := bcastB(15), bcastB(0x30), bcastB(32)
	idx := YMM()
	c.movdqu(q6kIdx, idx)
	SHRQ(U8(3), nb)
	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	for r := 0; r < R; r++ {
		for l := 0; l < 210; l += 64 {
			c.prefetch(r, l)
		}
		c.prefetch(r, 209)
		d := bcastF16(c.row(r, 208))
		for t := 0; t < T; t++ {
			dxv := YMM()
			VMULPS(c.xd(t, 0), d, dxv)
			VMOVUPS(dxv, slot(r, t, 0))
		}
	}
	xv, neg := make([]VecVirtual, T), make([]VecVirtual, T)
	for t := range xv {
		xv[t], neg[t] = YMM(), YMM()
	}
	u, hb, iv, scl, s := YMM(), YMM(), YMM(), YMM(), YMM()
	for h := 0; h < 2; h++ {
		for g := 0; g < 4; g++ {
			b := 4*h + g
			for t := range xv {
				c.movdqu(c.xq(t, 32*b), xv[t])
				c.negDot(neg[t], off, xv[t])
			}
			for r := 0; r < R; r++ {
				c.movdqu(c.row(r, 64*h+32*(g%2)), u)
				if g >= 2 {
					VPSRLW(U8(4), u, u)
				}
				c.pand(mask, u, u)
				c.movdqu(c.row(r, 128+32*h), hb)
				switch {
				case g < 2:
					VPSLLW(U8(4-2*g), hb, hb)
				case g == 3:
					VPSRLW(U8(2), hb, hb)
				}
				c.pand(hmask, hb, hb)
				c.por(hb, u, u)
				VPMOVSXBD(c.row(r, 192+8*h+2*g), scl.AsX())
				VPERMD(scl, idx, scl)
				for t := range xv {
					c.idot(iv, neg[t], u, xv[t])
					VPMULLD(scl, iv, iv)
					VCVTDQ2PS(iv, iv)
					VBROADCASTSS(slot(r, t, b), s)
					VFMADD231PS(s, iv, acc[t][r])
				}
			}
		}
	}
	c.advance(210, 256, 32)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
}

// writeQTable writes the Go table of the AVX2 integer kernels by type and
// rows.
func writeQTable() {
	var b strings.Builder
	b.WriteString("// Code generated by command: go run main.go. DO NOT EDIT.\n\npackage cpu\n\nimport \"jspark/kernels/quant\"\n\n")
	types := map[string]string{"Q8_0": "quant.Q8_0", "Q4_0": "quant.Q4_0", "Q4K": "quant.Q4_K", "Q6K": "quant.Q6_K",
		"Q4_1": "quant.Q4_1", "Q5_0": "quant.Q5_0", "Q5_1": "quant.Q5_1", "IQ4_NL": "quant.IQ4_NL", "MXFP4": "quant.MXFP4",
		"Q2K": "quant.Q2_K", "Q3K": "quant.Q3_K", "Q5K": "quant.Q5_K", "IQ4XS": "quant.IQ4_XS"}
	b.WriteString("// qkernAVX2[type][tokens][rows] is the AVX2 integer tile of that shape\n// (one token: AVX2 has 16 vector registers).\n")
	b.WriteString("var qkernAVX2 = map[quant.Type]*qtiles{\n")
	for _, t := range qtypes {
		fmt.Fprintf(&b, "\t%s: {1: {", types[t])
		for r := 1; r <= qRows; r++ {
			fmt.Fprintf(&b, "%d: %s, ", r, qname(t, 1, r))
		}
		b.WriteString("}},\n")
	}
	b.WriteString("}\n")
	out, err := format.Source([]byte(b.String()))
	if err != nil {
		panic(err)
	}
	if err := os.WriteFile("../qtiles_amd64.go", out, 0o644); err != nil {
		panic(err)
	}
}

// q8Consts are quantBlock's constants, made once per kernel.
type q8Consts struct{ absMask, c127, one, zero VecVirtual }

func newQ8Consts() q8Consts {
	c := q8Consts{absMask: broadcast(0x7fffffff), c127: broadcast(0x42fe0000), one: broadcast(0x3f800000), zero: XMM()}
	VXORPS(c.zero, c.zero, c.zero)
	return c
}

// quantBlock quantizes the 32 floats at x as quant.QuantizeQ8 does, bit
// for bit: d = amax/127 (stored at dm) and id = 1/d in float32, q = x·id
// rounded to nearest even (VCVTPS2DQ, as math.RoundToEven). It returns d
// and the quants as int32 lanes: elements 0-15 in v0, 16-31 in v1. label
// names its branch target.
func quantBlock(c q8Consts, x, dm Mem, label string) (db, v0, v1 VecVirtual) {
	v0, v1 = ZMM(), ZMM()
	m := ZMM()
	VMOVUPS(x, v0)
	VMOVUPS(x.Offset(64), v1)
	VANDPS(c.absMask, v0, m)
	a1 := ZMM()
	VANDPS(c.absMask, v1, a1)
	VMAXPS(a1, m, m)
	hy := YMM()
	VEXTRACTF64X4(U8(1), m, hy)
	VMAXPS(hy, m.AsY(), m.AsY())
	hx := XMM()
	VEXTRACTF32X4(U8(1), m.AsY(), hx)
	VMAXPS(hx, m.AsX(), m.AsX())
	VPERMILPS(U8(0x4e), m.AsX(), hx)
	VMAXPS(hx, m.AsX(), m.AsX())
	VPERMILPS(U8(0xb1), m.AsX(), hx)
	VMAXSS(hx, m.AsX(), m.AsX())
	id := ZMM()
	db = XMM()
	VDIVSS(c.c127.AsX(), m.AsX(), db) // amax/127
	VMOVSS(db, dm)
	VXORPS(id, id, id)
	VUCOMISS(c.zero, db)
	JE(LabelRef(label))
	VDIVSS(db, c.one.AsX(), id.AsX())
	Label(label)
	VBROADCASTSS(id.AsX(), id)
	VMULPS(id, v0, v0)
	VMULPS(id, v1, v1)
	VCVTPS2DQ(v0, v0)
	VCVTPS2DQ(v1, v1)
	return db, v0, v1
}

// quantQ8 is quant.QuantizeQ8 on AVX-512, bit for bit (quantBlock), with
// s = Σq.
func quantQ8() {
	TEXT("quant512Q8", NOSPLIT, "func(x *float32, q *int8, d *float32, s *int32, nb int)")
	x, q := Load(Param("x"), GP64()), Load(Param("q"), GP64())
	d, s := Load(Param("d"), GP64()), Load(Param("s"), GP64())
	nb := Load(Param("nb"), GP64())
	c := newQ8Consts()
	Label("q8_loop")
	TESTQ(nb, nb)
	JZ(LabelRef("q8_done"))
	_, v0, v1 := quantBlock(c, Mem{Base: x}, Mem{Base: d}, "q8_zero")
	VPMOVSDB(v0, Mem{Base: q})
	VPMOVSDB(v1, Mem{Base: q, Disp: 16})
	VPADDD(v1, v0, v0)
	sum := GP32()
	hsumInt(v0, sum)
	MOVL(sum, Mem{Base: s})
	ADDQ(U32(128), x)
	ADDQ(U32(32), q)
	ADDQ(U32(4), d)
	ADDQ(U32(4), s)
	DECQ(nb)
	JMP(LabelRef("q8_loop"))
	Label("q8_done")
	VZEROUPPER()
	RET()
}
