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

// The AVX-512 kernels over packed weights (kernels/cpu/packed.go states
// the layouts and the arithmetic). A group is 16 weight rows whose values
// for one step of K lie side by side, so one zmm load holds a step of all
// 16 rows and each lane accumulates one row's output: no sums across lanes.
//
//   - pk512{F32,F16,BF16}x{T}x{M}: T tokens × M groups. Per element of K,
//     each token's activation is broadcast and multiplied into the groups'
//     16 rows: out = fma(x[k], w[k], out) for k in order.
//   - pkvnni{Q8_0,Q4_0,Q4K,Q6K,…}x{T}: T tokens × one group, run down
//     `groups` consecutive groups. Per 32-element block, 8 VPDPBUSD (the
//     token's 4 activations of a step broadcast against the 16 rows' 4
//     weights) give each row's exact integer dot product, scaled to float
//     and accumulated in block order. Tiles of up to pkPrefetchTokens
//     tokens (decode) ask for their weights pkPrefetch bytes ahead of
//     their reads: one stream a thread, which the hardware prefetchers
//     alone kept well short of the memory limit.

// Float tiles: tokens × groups, the most of each.
const (
	pkTokens = 6
	pkGroups = 4
	// pkDecodeGroups is the widest one-token tile: one FMA chain per
	// group, so enough chains to cover the FMA latency.
	pkDecodeGroups = 8
	// pkIntTokens is the most tokens of an integer tile.
	pkIntTokens = 8
	// pkPrefetch is how far ahead (bytes) a few-token integer tile asks
	// for its weights. Its one stream a thread left the hardware
	// prefetchers short of the memory limit (Q4_K read 41 GB/s where the
	// machine reads 53): the lines must be asked for early.
	pkPrefetch = 2048
	// pkPrefetchOne is how far ahead the one-token tiles ask (but Q8_0's
	// and Q4_0's, which mostly run as streams tiles): alternating
	// distances over the 8B shape's layers (load 3-5, GB per CPU second),
	// Q4_K ran 1.29-1.38x its 2 KB rate at 8-64 KB, Q6_K 1.41x at 8 KB
	// (1.32x at 16, below at 32-64), near read512's rate from the same
	// bytes; Q4_1, Q5_0, Q5_1 and MXFP4 1.1-1.6x in DecodeBandwidth
	// (medians of 3 alternating runs at load 3.5), IQ4_NL alike.
	pkPrefetchOne = 8192
	// pkStreams is how many groups a one-token streams tile (Q8_0, Q4_0)
	// reads in lockstep, each its own stream, and pkStreamPrefetch how far
	// ahead (bytes) it asks for each. With one stream a thread the 8B
	// shape's Q8_0 products read at 55-65 % of what read512 reads from the
	// same bytes (4 streams a thread); with 8 at 90-108 %, prefetched
	// 512-2048 bytes ahead (4 streams: 82-87 %; 12: below 8's).
	// NOTE: Q4_K has no streams tile: its one-stream tile (8 KB ahead)
	// reads ~72 % of read512's rate on one thread, 75-100 % on two, and
	// no lockstep form beat it: 2, 4 or 8 groups a super-block at a time
	// 0.45-0.78x (DecodeLayers/8B-Q4_K, two threads, medians of 3
	// alternating runs, load 4-5, 0-16 KB ahead each), 2 or 4 groups
	// interleaved sub-block by sub-block 0.8-1.04x (2-8 KB ahead; paired
	// in-process ratios, one thread, load 7-9), none without prefetch
	// (0.5x); nor did the one-stream tile's distance (4-32 KB) or hint
	// (T0, T1, NTA) move it beyond ±6 %.
	pkStreams        = 8
	pkStreamPrefetch = 1024
	// pkPrefetchTokens is the most tokens of a tile that prefetches: a
	// few sequences decoding together stream the weights as one does;
	// wider tiles (prefill) reuse each load enough to hide the memory.
	pkPrefetchTokens = 4
)

var pkFloatTypes = []string{"F32", "F16", "BF16"}

// pkStreamTypes have a one-token streams tile (pkStreamTile).
var pkStreamTypes = []string{"Q8_0", "Q4_0"}

var pkIntTypes = []string{"Q8_0", "Q4_0", "Q4K", "Q6K", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "MXFP4", "Q2K", "Q3K", "Q5K", "IQ4XS"}

func packedKernels() {
	for _, typ := range pkFloatTypes {
		for t := 1; t <= pkTokens; t++ {
			for m := 1; m <= pkGroups; m++ {
				pkFloat(typ, t, m)
			}
		}
		for m := pkGroups + 1; m <= pkDecodeGroups; m++ {
			pkFloat(typ, 1, m)
		}
	}
	for _, typ := range pkIntTypes {
		for t := 1; t <= pkIntTokens; t++ {
			pkInt(typ, t)
		}
	}
	for _, typ := range pkStreamTypes {
		pkStreamTile(typ)
	}
	quantRecords()
}

func pkFloatName(typ string, t, m int) string { return fmt.Sprintf("pk512%sx%dx%d", typ, t, m) }
func pkIntName(typ string, t int) string      { return fmt.Sprintf("pkvnni%sx%d", typ, t) }
func pkStreamName(typ string) string          { return fmt.Sprintf("pkvnni%sx1s%d", typ, pkStreams) }

// strided returns base registers for n items at p0 + i·stride: one
// register per three items, item i at b[i/3] + (i%3)·stride (at).
func strided(p0, stride Register, n int) []Register {
	b := []Register{p0}
	for i := 3; i < n; i += 3 {
		r := GP64()
		LEAQ(Mem{Base: b[len(b)-1], Index: stride, Scale: 2}, r)
		ADDQ(stride, r)
		b = append(b, r)
	}
	return b
}

func stridedAt(b []Register, stride Register, i int) Mem {
	m := Mem{Base: b[i/3]}
	switch i % 3 {
	case 1:
		m.Index, m.Scale = stride, 1
	case 2:
		m.Index, m.Scale = stride, 2
	}
	return m
}

// pkFloat emits a float tile. Arguments:
//
//	x, xs: token 0's activations and the token stride (elements)
//	w, gs: group 0's packed weights and the group stride (bytes)
//	k:     elements of K
//	dst, ds: token 0's outputs of group 0 and the token stride (elements)
//	mask:  the lanes (rows) of the last group to store
func pkFloat(typ string, T, M int) {
	name := pkFloatName(typ, T, M)
	TEXT(name, NOSPLIT, "func(x *float32, xs int, w *byte, gs int, k int, dst *float32, ds int, mask uint16)")
	step := 64 // bytes of one K step of a group
	if typ != "F32" {
		step = 32
	}
	x0, xs := Load(Param("x"), GP64()), Load(Param("xs"), GP64())
	SHLQ(U8(2), xs)
	w0, gs := Load(Param("w"), GP64()), Load(Param("gs"), GP64())
	k := Load(Param("k"), GP64())
	xb, wb := strided(x0, xs, T), strided(w0, gs, M)

	acc := make([][]VecVirtual, T)
	for t := range acc {
		acc[t] = make([]VecVirtual, M)
		for g := range acc[t] {
			acc[t][g] = ZMM()
			VXORPS(acc[t][g], acc[t][g], acc[t][g])
		}
	}
	bx := make([]VecVirtual, T)
	for t := range bx {
		bx[t] = ZMM()
	}
	wv := ZMM()
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
			loadW(stridedAt(wb, gs, g).Offset(step * u))
			for t := range bx {
				VFMADD231PS(bx[t], wv, acc[t][g])
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
	const unroll = 4
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
	mask := K()
	KMOVW(Load(Param("mask"), GP32()), mask)
	for t := range acc {
		for g := range acc[t] {
			at := Mem{Base: dst, Disp: 64 * g}
			if g == M-1 {
				VMOVUPS(acc[t][g], mask, at)
			} else {
				VMOVUPS(acc[t][g], at)
			}
		}
		if t+1 < T {
			ADDQ(ds, dst)
		}
	}
	VZEROUPPER()
	RET()
}

// Activation records: the integer tiles read each token's quantized
// activations as one record per 32-element block (quantRecords writes
// them), so that one pointer a token walks all of a block's values.
const (
	recBytes = 48
	recD     = 32 // float32: the block's scale
	recO0    = 36 // int32: the type's offset term (first half for Q6K)
	recO1    = 40 // int32: Q6K's offset term of the second half
	recA     = 44 // float32: scale · Σq (Q4K's min term)
)

// Packed block sizes: bytes of one group (16 rows) for one 32-element
// block (Q8_0, Q4_0, …) or one 256-element super-block (pkSuper).
var pkIntBytes = map[string]int{"Q8_0": 544, "Q4_0": 288, "Q4K": 2368, "Q6K": 3360,
	"Q4_1": 320, "Q5_0": 352, "Q5_1": 384, "IQ4_NL": 288, "MXFP4": 272,
	"Q2K": 1344, "Q3K": 1824, "Q5K": 2880, "IQ4XS": 2208}

var pkSuper = map[string]bool{"Q4K": true, "Q6K": true, "Q2K": true, "Q3K": true, "Q5K": true, "IQ4XS": true}

// pkInt emits an integer tile. Arguments:
//
//	w:      the first group's packed blocks
//	r, rs:  token 0's activation records and the token stride (bytes)
//	nb:     32-element blocks of K
//	dst, ds: token 0's outputs of the first group and the token stride (elements)
//	mask:   the lanes (rows) of the last group to store
//	groups: consecutive groups to run (w and dst advance)
func pkInt(typ string, T int) {
	name := pkIntName(typ, T)
	TEXT(name, NOSPLIT, "func(w *byte, r *byte, rs int, nb int, dst *float32, ds int, mask uint16, groups int)")
	Label(name + "_group")
	w := Load(Param("w"), GP64())
	r0, rs := Load(Param("r"), GP64()), Load(Param("rs"), GP64())
	rb := strided(r0, rs, T)
	n := Load(Param("nb"), GP64())
	acc := make([]VecVirtual, T)
	for t := range acc {
		acc[t] = ZMM()
		VXORPS(acc[t], acc[t], acc[t])
	}
	pfAhead = 0
	if T <= pkPrefetchTokens {
		pfAhead = pkPrefetch
	}
	if T == 1 && typ != "Q8_0" && typ != "Q4_0" {
		pfAhead = pkPrefetchOne
	}
	rec := func(t, off int) Mem { return stridedAt(rb, rs, t).Offset(off) }
	nextRec := func() {
		for _, b := range rb {
			ADDQ(U32(recBytes), b)
		}
	}
	switch typ {
	case "Q8_0", "Q4_0":
		pkQ32(typ, name, w, n, acc, rec, nextRec)
	case "Q4K":
		pkQ4K(name, w, n, acc, rec, nextRec)
	case "Q6K":
		pkQ6K(name, w, n, acc, rec, nextRec)
	case "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "MXFP4":
		pk32More(typ, name, w, n, acc, rec, nextRec)
	case "Q5K", "IQ4XS":
		pkK32More(typ, name, w, n, acc, rec, nextRec)
	case "Q3K", "Q2K":
		pkK16(typ, name, w, n, acc, rec, nextRec)
	}

	dst, ds := Load(Param("dst"), GP64()), Load(Param("ds"), GP64())
	SHLQ(U8(2), ds)
	g := Load(Param("groups"), GP64())
	full, last := LabelRef(name+"_full"), LabelRef(name+"_stored")
	CMPQ(g, U8(1))
	JNE(full)
	mask := K()
	KMOVW(Load(Param("mask"), GP32()), mask)
	for t := range acc {
		VMOVUPS(acc[t], mask, Mem{Base: dst})
		if t+1 < T {
			ADDQ(ds, dst)
		}
	}
	JMP(last)
	Label(name + "_full")
	for t := range acc {
		VMOVUPS(acc[t], Mem{Base: dst})
		if t+1 < T {
			ADDQ(ds, dst)
		}
	}
	Label(name + "_stored")
	// Next group: w moves past this group's blocks, dst by 16 rows.
	nextGroup(name, pkIntBytes[typ], pkSuper[typ])
	pfAhead = 0
}

// pfAhead is how far ahead of its reads (bytes) the tile being emitted
// asks for its weights, 0 for none (pkInt sets it).
var pfAhead int

// prefetchPart asks for part j of parts of the block of size bytes at w,
// pfAhead bytes ahead: the parts together cover the block's lines and the
// one a block that is not line-aligned spills into.
func prefetchPart(w Register, size, j, parts int) {
	if pfAhead == 0 {
		return
	}
	lines := (size + 63) / 64
	if size%64 != 0 {
		lines++
	}
	for l := j * lines / parts; l < (j+1)*lines/parts; l++ {
		PREFETCHT0(Mem{Base: w, Disp: pfAhead + 64*l})
	}
}

func bcastConst(c uint32) VecVirtual {
	r, v := GP32(), ZMM()
	MOVL(U32(c), r)
	VPBROADCASTD(r, v)
	return v
}

// nibbles sets u[c] and u[c+4] (c < 4) to the low and high nibbles of the
// 4 group loads at m: 8 steps of 16 rows × 4 unsigned weights.
func nibbles(m Mem, lo VecVirtual, u []VecVirtual) {
	for c := 0; c < 4; c++ {
		l := ZMM()
		VMOVDQU32(m.Offset(64*c), l)
		VPANDD(lo, l, u[c])
		VPSRLW(U8(4), l, l)
		VPANDD(lo, l, u[c+4])
	}
}

// dots adds the 8 steps of a block into acc: step c's 16 rows' 4 weights
// (u[c]) against the token's 4 activations of that step, broadcast.
func dots(u []VecVirtual, rec func(off int) Mem, acc VecVirtual, from, to int) {
	for c := from; c < to; c++ {
		VPDPBUSD_BCST(rec(4*c), u[c], acc)
	}
}

// pkQ32: Q8_0 (544 bytes a block: 8 steps × 64, then 16 half scales) and
// Q4_0 (288: 4 loads of nibbles, then the scales). Per token:
// out = fma(float(Σu·x + o), d_w·d_x, out), o the record's offset term.
func pkQ32(typ, name string, w, n Register, acc []VecVirtual, rec func(t, off int) Mem, nextRec func()) {
	q := newBlk32(typ)
	Label(name + "_block")
	TESTQ(n, n)
	JZ(LabelRef(name + "_end"))
	q.load(w)
	prefetchPart(w, q.size, 0, 1)
	q.dots(w, acc, rec)
	ADDQ(U32(q.size), w)
	nextRec()
	DECQ(n)
	JMP(LabelRef(name + "_block"))
	Label(name + "_end")
}

// blk32 emits a Q8_0 or Q4_0 block's product: its registers and sizes.
type blk32 struct {
	typ          string
	size, scales int
	u            []VecVirtual
	lo, sw, i, s VecVirtual
}

func newBlk32(typ string) *blk32 {
	q := &blk32{typ: typ, size: 544, scales: 512, u: make([]VecVirtual, 8)}
	for c := range q.u {
		q.u[c] = ZMM()
	}
	if typ == "Q4_0" {
		q.size, q.scales, q.lo = 288, 256, bcastConst(0x0f0f0f0f)
	}
	q.sw, q.i, q.s = ZMM(), ZMM(), ZMM()
	return q
}

// load reads the block at w: its 8 steps of 16 rows × 4 weights.
func (q *blk32) load(w Register) {
	if q.typ == "Q8_0" {
		for c := range q.u {
			VMOVDQU32(Mem{Base: w, Disp: 64 * c}, q.u[c])
		}
	} else {
		nibbles(Mem{Base: w}, q.lo, q.u)
	}
}

// dots adds the loaded block at w into each token's acc.
func (q *blk32) dots(w Register, acc []VecVirtual, rec func(t, off int) Mem) {
	VCVTPH2PS(Mem{Base: w, Disp: q.scales}, q.sw)
	for t := range acc {
		VPBROADCASTD(rec(t, recO0), q.i)
		dots(q.u, func(off int) Mem { return rec(t, off) }, q.i, 0, 8)
		VCVTDQ2PS(q.i, q.i)
		VMULPS_BCST(rec(t, recD), q.sw, q.s)
		VFMADD231PS(q.s, q.i, acc[t])
	}
}

// pkStreamTile emits a one-token tile of pkStreams consecutive groups at
// once (Q8_0, Q4_0): block b of every group, then block b+1, each group
// its own stream prefetched pkStreamPrefetch bytes ahead, each output the
// same chain as pkQ32's. Arguments as pkInt's; groups is a multiple of
// pkStreams, all full (mask unused).
func pkStreamTile(typ string) {
	name := pkStreamName(typ)
	TEXT(name, NOSPLIT, "func(w *byte, r *byte, rs int, nb int, dst *float32, ds int, mask uint16, groups int)")
	q := newBlk32(typ)
	Label(name + "_group")
	gs := Load(Param("nb"), GP64())
	IMUL3Q(U32(q.size), gs, gs) // a group's bytes
	ws := []Register{Load(Param("w"), GP64())}
	for s := 1; s < pkStreams; s++ {
		r := GP64()
		LEAQ(Mem{Base: ws[s-1], Index: gs, Scale: 1}, r)
		ws = append(ws, r)
	}
	rp, n := Load(Param("r"), GP64()), Load(Param("nb"), GP64())
	acc := make([]VecVirtual, pkStreams)
	for s := range acc {
		acc[s] = ZMM()
		VXORPS(acc[s], acc[s], acc[s])
	}
	rec := func(_, off int) Mem { return Mem{Base: rp, Disp: off} }
	Label(name + "_block")
	TESTQ(n, n)
	JZ(LabelRef(name + "_end"))
	for s, w := range ws {
		q.load(w)
		lines := (q.size + 63) / 64
		for l := 0; l <= lines; l++ {
			PREFETCHT0(Mem{Base: w, Disp: pkStreamPrefetch + 64*l})
		}
		q.dots(w, acc[s:s+1], rec)
		ADDQ(U32(q.size), w)
	}
	ADDQ(U32(recBytes), rp)
	DECQ(n)
	JMP(LabelRef(name + "_block"))
	Label(name + "_end")
	dst := Load(Param("dst"), GP64())
	for s := range acc {
		VMOVUPS(acc[s], Mem{Base: dst, Disp: 64 * s})
	}
	ADDQ(U32(64*pkStreams), dst)
	Store(dst, Param("dst"))
	nb := Load(Param("nb"), GP64())
	IMUL3Q(U32(q.size*pkStreams), nb, nb)
	wp := Load(Param("w"), GP64())
	ADDQ(nb, wp)
	Store(wp, Param("w"))
	g := Load(Param("groups"), GP64())
	SUBQ(U32(pkStreams), g)
	Store(g, Param("groups"))
	JNZ(LabelRef(name + "_group"))
	VZEROUPPER()
	RET()
}

// pkQ4K: 2368 bytes a super-block: d and dmin (16 halves each), the
// sub-blocks' scales and mins ([8][16] bytes each), then 8 sub-blocks of
// nibbles (4 loads each). Sub-block j with block record b:
// out = fma(float(Σq·x), (d·sc_j)·d_x, out); out = fma(-(dmin·m_j), d_x·Σx, out).
func pkQ4K(name string, w, n Register, acc []VecVirtual, rec func(t, off int) Mem, nextRec func()) {
	SHRQ(U8(3), n)
	u := make([]VecVirtual, 8)
	for c := range u {
		u[c] = ZMM()
	}
	lo := bcastConst(0x0f0f0f0f)
	d, dm, sc, mn, i, s := ZMM(), ZMM(), ZMM(), ZMM(), ZMM(), ZMM()
	Label(name + "_super")
	TESTQ(n, n)
	JZ(LabelRef(name + "_end"))
	VCVTPH2PS(Mem{Base: w}, d)
	VCVTPH2PS(Mem{Base: w, Disp: 32}, dm)
	for j := 0; j < 8; j++ {
		prefetchPart(w, 2368, j, 8)
		VPMOVZXBD(Mem{Base: w, Disp: 64 + 16*j}, sc)
		VCVTDQ2PS(sc, sc)
		VMULPS(d, sc, sc)
		VPMOVZXBD(Mem{Base: w, Disp: 192 + 16*j}, mn)
		VCVTDQ2PS(mn, mn)
		VMULPS(dm, mn, mn)
		nibbles(Mem{Base: w, Disp: 320 + 256*j}, lo, u)
		for t := range acc {
			VPXORD(i, i, i)
			dots(u, func(off int) Mem { return rec(t, off) }, i, 0, 8)
			VCVTDQ2PS(i, i)
			VMULPS_BCST(rec(t, recD), sc, s)
			VFMADD231PS(s, i, acc[t])
			VFNMADD231PS_BCST(rec(t, recA), mn, acc[t])
		}
		nextRec()
	}
	ADDQ(U32(2368), w)
	DECQ(n)
	JMP(LabelRef(name + "_super"))
	Label(name + "_end")
}

// ternImm is VPTERNLOGD's immediate for f(a, b, c) (a the destination).
func ternImm(f func(a, b, c bool) bool) uint8 {
	var imm uint8
	for i := 0; i < 8; i++ {
		if f(i&4 != 0, i&2 != 0, i&1 != 0) {
			imm |= 1 << i
		}
	}
	return imm
}

// pkQ6K: 3360 bytes a super-block: d (16 halves), the 16 sub-blocks'
// scales ([16][16] int8), then per 32-element block 4 loads of low nibbles
// (steps c and c+4) and 2 loads of 2-bit highs (load h: steps 4h..4h+3,
// step 4h+f in bits 2f..2f+1). With u in 0..63, sub-block halves A and B:
// out = fma(float(sc_A·(Σ_A u·x + o0) + sc_B·(Σ_B u·x + o1)), d·d_x, out),
// o0, o1 the records' -32·Σx of each half.
func pkQ6K(name string, w, n Register, acc []VecVirtual, rec func(t, off int) Mem, nextRec func()) {
	SHRQ(U8(3), n)
	u := make([]VecVirtual, 8)
	for c := range u {
		u[c] = ZMM()
	}
	lo, hi := bcastConst(0x0f0f0f0f), bcastConst(0x30303030)
	// u = a | (b & lo), a the highs already masked to bits 4-5 (into
	// a: no copy of the nibbles).
	merge := ternImm(func(a, b, c bool) bool { return a || (b && c) })
	d, sa, sb, ia, ib, s := ZMM(), ZMM(), ZMM(), ZMM(), ZMM(), ZMM()
	h := []VecVirtual{ZMM(), ZMM()}
	Label(name + "_super")
	TESTQ(n, n)
	JZ(LabelRef(name + "_end"))
	VCVTPH2PS(Mem{Base: w}, d)
	for b := 0; b < 8; b++ {
		prefetchPart(w, 3360, b, 8)
		VPMOVSXBD(Mem{Base: w, Disp: 32 + 16*(2*b)}, sa)
		VPMOVSXBD(Mem{Base: w, Disp: 32 + 16*(2*b+1)}, sb)
		ql := Mem{Base: w, Disp: 288 + 256*b}
		qh := Mem{Base: w, Disp: 2336 + 128*b}
		VMOVDQU32(qh, h[0])
		VMOVDQU32(qh.Offset(64), h[1])
		for c := 0; c < 8; c++ {
			l := ZMM()
			VMOVDQU32(ql.Offset(64*(c%4)), l)
			if c >= 4 {
				VPSRLW(U8(4), l, l)
			}
			// step c's highs to bits 4-5: field f = c%4 sits at 2f.
			t := ZMM()
			switch f := c % 4; {
			case f < 2:
				VPSLLW(U8(4-2*f), h[c/4], t)
				VPANDD(hi, t, t)
			case f == 2:
				VPANDD(hi, h[c/4], t)
			default:
				VPSRLW(U8(2), h[c/4], t)
				VPANDD(hi, t, t)
			}
			VPTERNLOGD(U8(merge), lo, l, t)
			u[c] = t
		}
		for t := range acc {
			r := func(off int) Mem { return rec(t, off) }
			VPBROADCASTD(rec(t, recO0), ia)
			dots(u, r, ia, 0, 4)
			VPBROADCASTD(rec(t, recO1), ib)
			dots(u, r, ib, 4, 8)
			VPMULLD(sa, ia, ia)
			VPMULLD(sb, ib, ib)
			VPADDD(ib, ia, ia)
			VCVTDQ2PS(ia, ia)
			VMULPS_BCST(rec(t, recD), d, s)
			VFMADD231PS(s, ia, acc[t])
		}
		nextRec()
	}
	ADDQ(U32(3360), w)
	DECQ(n)
	JMP(LabelRef(name + "_super"))
	Label(name + "_end")
}

// quantRecords is quant512Q8 writing activation records: per 32-element
// block the 32 quants, the scale d (quantBlock), and with s0, s1 the sums
// of the two halves' quants, o0 = c·(s0+s1) (or c·s0 and o1 = c·s1 when
// halves) and a = d·(s0+s1).
func quantRecords() {
	TEXT("quant512Q8R", NOSPLIT, "func(x *float32, r *byte, nb int, c int32, halves bool)")
	x, r := Load(Param("x"), GP64()), Load(Param("r"), GP64())
	nb := Load(Param("nb"), GP64())
	cq := newQ8Consts()
	Label("q8r_loop")
	TESTQ(nb, nb)
	JZ(LabelRef("q8r_done"))
	db, v0, v1 := quantBlock(cq, Mem{Base: x}, Mem{Base: r, Disp: recD}, "q8r_zero")
	VPMOVSDB(v0, Mem{Base: r})
	VPMOVSDB(v1, Mem{Base: r, Disp: 16})
	s0, s1 := GP32(), GP32()
	hsumInt(v0, s0)
	hsumInt(v1, s1)
	c := Load(Param("c"), GP32())
	halves := Load(Param("halves"), GP8())
	sum := GP32()
	MOVL(s0, sum)
	ADDL(s1, sum)
	// a = d·(s0+s1)
	fs := XMM()
	VCVTSI2SSL(sum, fs, fs)
	VMULSS(db, fs, fs)
	VMOVSS(fs, Mem{Base: r, Disp: recA})
	TESTB(halves, halves)
	JNZ(LabelRef("q8r_halves"))
	IMULL(c, sum)
	MOVL(sum, Mem{Base: r, Disp: recO0})
	MOVL(U32(0), Mem{Base: r, Disp: recO1})
	JMP(LabelRef("q8r_next"))
	Label("q8r_halves")
	IMULL(c, s0)
	IMULL(c, s1)
	MOVL(s0, Mem{Base: r, Disp: recO0})
	MOVL(s1, Mem{Base: r, Disp: recO1})
	Label("q8r_next")
	ADDQ(U32(128), x)
	ADDQ(U32(recBytes), r)
	DECQ(nb)
	JMP(LabelRef("q8r_loop"))
	Label("q8r_done")
	VZEROUPPER()
	RET()
}

// hsumInt sets s to the sum of v's 16 int32 lanes.
func hsumInt(v VecVirtual, s Register) {
	hy, hx := YMM(), XMM()
	VEXTRACTI64X4(U8(1), v, hy)
	VPADDD(hy, v.AsY(), hy)
	VEXTRACTI32X4(U8(1), hy, hx)
	VPADDD(hx, hy.AsX(), hx)
	t := XMM()
	VPSHUFD(U8(0x4e), hx, t)
	VPADDD(t, hx, hx)
	VPSHUFD(U8(0xb1), hx, t)
	VPADDD(t, hx, hx)
	VMOVD(hx, s)
}

// writePackedTable writes the Go tables of the packed kernels.
func writePackedTable() {
	var b strings.Builder
	b.WriteString("// Code generated by command: go run main.go. DO NOT EDIT.\n\npackage cpu\n\nimport \"jspark/kernels/quant\"\n\n")
	fmt.Fprintf(&b, "// pkFloatTiles[type][tokens][groups] is the AVX-512 float tile of that shape.\n")
	b.WriteString("var pkFloatTiles = map[quant.Type]*pkFloatShapes{\n")
	types := map[string]string{"F32": "quant.F32", "F16": "quant.F16", "BF16": "quant.BF16",
		"Q8_0": "quant.Q8_0", "Q4_0": "quant.Q4_0", "Q4K": "quant.Q4_K", "Q6K": "quant.Q6_K",
		"Q4_1": "quant.Q4_1", "Q5_0": "quant.Q5_0", "Q5_1": "quant.Q5_1", "IQ4_NL": "quant.IQ4_NL", "MXFP4": "quant.MXFP4",
		"Q2K": "quant.Q2_K", "Q3K": "quant.Q3_K", "Q5K": "quant.Q5_K", "IQ4XS": "quant.IQ4_XS"}
	for _, typ := range pkFloatTypes {
		fmt.Fprintf(&b, "\t%s: {", types[typ])
		for t := 1; t <= pkTokens; t++ {
			fmt.Fprintf(&b, "%d: {", t)
			top := pkGroups
			if t == 1 {
				top = pkDecodeGroups
			}
			for m := 1; m <= top; m++ {
				fmt.Fprintf(&b, "%d: %s, ", m, pkFloatName(typ, t, m))
			}
			b.WriteString("}, ")
		}
		b.WriteString("},\n")
	}
	b.WriteString("}\n\n")
	fmt.Fprintf(&b, "// pkIntTiles[type][tokens] is the AVX-512 VNNI integer tile of that shape.\n")
	b.WriteString("var pkIntTiles = map[quant.Type]*pkIntShapes{\n")
	for _, typ := range pkIntTypes {
		fmt.Fprintf(&b, "\t%s: {", types[typ])
		for t := 1; t <= pkIntTokens; t++ {
			fmt.Fprintf(&b, "%d: %s, ", t, pkIntName(typ, t))
		}
		b.WriteString("},\n")
	}
	b.WriteString("}\n\n")
	fmt.Fprintf(&b, "// pkStreamTiles[type] is the AVX-512 VNNI one-token tile of pkStreams groups at once.\n")
	b.WriteString("var pkStreamTiles = map[quant.Type]pkIntFn{\n")
	for _, typ := range pkStreamTypes {
		fmt.Fprintf(&b, "\t%s: %s,\n", types[typ], pkStreamName(typ))
	}
	b.WriteString("}\n")
	writePacked256Table(&b, types)
	writeGo("../packed_amd64.go", b.String())
	var c strings.Builder
	c.WriteString("// Code generated by command: go run main.go. DO NOT EDIT.\n\npackage cpu\n\n")
	c.WriteString("// The shapes of the packed kernels (asm/packed.go).\n")
	fmt.Fprintf(&c, "const (\n\tpkTokens = %d\n\tpkGroups = %d\n\tpkDecodeGroups = %d\n\tpkIntTokens = %d\n\tpkStreams = %d\n\trecBytes = %d\n)\n\n",
		pkTokens, pkGroups, pkDecodeGroups, pkIntTokens, pkStreams, recBytes)
	c.WriteString("type (\n\tpkFloatShapes [pkTokens + 1][pkDecodeGroups + 1]pkFloatFn\n\tpkIntShapes [pkIntTokens + 1]pkIntFn\n)\n")
	writeGo("../packed_shapes.go", c.String())
}

func writeGo(path, src string) {
	out, err := format.Source([]byte(src))
	if err != nil {
		panic(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		panic(err)
	}
}

// nextGroup ends a group loop: w moves past the group's blocks (nb of
// blockBytes, or nb/8 where super: nb counts 32-element blocks there and
// a block is a super-block of eight), dst past its 16 outputs, and the
// loop goes on while groups remain.
func nextGroup(name string, blockBytes int, super bool) {
	nb := Load(Param("nb"), GP64())
	if super {
		SHRQ(U8(3), nb)
	}
	IMUL3Q(U32(blockBytes), nb, nb)
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
