package main

import (
	"fmt"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The AVX2 and AVX-VNNI streams tiles pk256{,v}{Q8_0,Q4_0}x1s{S}: one
// token down runs of pk256Streams consecutive groups, block b of every
// group, then block b+1, each group its own memory stream prefetched
// pk256StreamPrefetch bytes ahead (asm/packed.go's pkStreamTile on ymm).
// A group's block is the one-stream tile's block body (pk256Q8Block,
// pk256Q4Block, pk256Q8VNNIBlock), so each output is the same chain:
// out = fma(float(i), d_w·d_x, out) in block order, the bits of
// kernels/cpu/packed.go.
//
// The one-stream tile reads one stream a thread, which the hardware keeps
// well short of the memory limit (the cause q8dec found on AVX-512).
// Sixteen ymm cannot hold S groups' two halves of accumulators beside a
// block's working set, so the outputs accumulate in a stack frame of
// S×16 floats: a load and a store a half and block, beside ~100
// operations of its products.

// pk256Streams is how many groups a streams tile reads in lockstep, and
// pk256StreamPrefetch how far ahead (bytes) it asks for each. Alternating
// variants under JSPARK_ISA=avx2 (DecodeLayers, GB per CPU second, medians
// of 3 at load 6-8), 1B and 8B Q8_0: one stream 25.6 and 24.5; 4 streams
// at 1-2 KB 27.9-31.8 and 36.4-39.0; 8 at 0.5, 1, 2, 4, 8 KB 24.7, 33.0,
// 32.5-34.9, 32.4-35.8, 30.2 and 38.8, 37.2, 37.6-39.1, 37.8-39.9, 35.5;
// 6 at 4 KB 31.4 and 35.5. 12 and 16 overflow NOSPLIT's stack.
const (
	pk256Streams        = 8
	pk256StreamPrefetch = 2048
)

// pk256StreamTypes have AVX2 and AVX-VNNI streams tiles.
var pk256StreamTypes = []string{"Q8_0", "Q4_0"}

func pk256StreamName(typ string, vnni bool) string {
	if vnni {
		return fmt.Sprintf("pk256v%sx1s%d", typ, pk256Streams)
	}
	return fmt.Sprintf("pk256%sx1s%d", typ, pk256Streams)
}

func streams256Kernels() {
	for _, vnni := range []bool{false, true} {
		for _, typ := range pk256StreamTypes {
			pk256StreamTile(typ, vnni)
		}
	}
}

// pk256StreamTile emits typ's streams tile. Arguments as pk256IntTile's;
// groups is a multiple of pk256Streams, all full (mask unused).
func pk256StreamTile(typ string, vnni bool) {
	name := pk256StreamName(typ, vnni)
	TEXT(name, NOSPLIT, "func(w *byte, r *byte, rs int, nb int, dst *float32, ds int, mask uint16, groups int)")
	size := pkIntBytes[typ]
	var block func(pass256)
	switch {
	case typ == "Q4_0":
		block = pk256Q4Block(vnni)
	case vnni:
		block = pk256Q8VNNIBlock
	default:
		block = pk256Q8Block()
	}
	out := AllocLocal(64 * pk256Streams) // [group][half] 8 floats
	Label(name + "_group")
	zero := YMM()
	VXORPS(zero, zero, zero)
	for o := 0; o < 64*pk256Streams; o += 32 {
		VMOVUPS(zero, out.Offset(o))
	}
	gs := Load(Param("nb"), GP64())
	IMUL3Q(U32(size), gs, gs) // a group's bytes
	wb, rp, n := Load(Param("w"), GP64()), Load(Param("r"), GP64()), Load(Param("nb"), GP64())
	c := pass256{name: name, hs: []int{0, 1}, size: size, vnni: vnni,
		rec: func(_, off int) Mem { return Mem{Base: rp, Disp: off} }}
	// A group's last blocks prefetch the next run's group at the same
	// place instead (pk256StreamPrefetch + (S−1)·gs ahead), whose start
	// would otherwise arrive unasked, 8 streams at once: at K = 1024
	// (DecodeBandwidth, medians of 3 alternating at load 8-9, GB per CPU
	// second) Q8_0 44.7 → 59.5 and Q4_0 39.8 → 56.6, the one-stream tile
	// 39.8 and 55.3; DecodeLayers 1B Q8_0 37.3 → 40.9, 8B 41.2 → 41.9.
	far := GP64()
	IMUL3Q(U32(pk256Streams-1), gs, far)
	ADDQ(U32(pk256StreamPrefetch), far)
	// One stream's block a pass of the inner loop: the loop unrolled
	// over the streams ran 0.8× (its ~8 KB of code a block).
	blockLoop(name, "block", n, func() {
		pf := GP64()
		MOVQ(U32(pk256StreamPrefetch), pf)
		CMPQ(n, U32(pk256StreamPrefetch/size+1)) // from the next group's first line
		CMOVQLE(far, pf)
		w, op, s := GP64(), GP64(), GP64()
		MOVQ(wb, w)
		LEAQ(out, op)
		MOVQ(U32(pk256Streams), s)
		Label(name + "_stream")
		c.w = w
		c.acc = [][]VecVirtual{{YMM()}, {YMM()}}
		for h, a := range c.acc {
			VMOVUPS(Mem{Base: op, Disp: 32 * h}, a[0])
		}
		for l := 0; l <= (size+63)/64; l++ {
			PREFETCHT0(Mem{Base: w, Index: pf, Scale: 1, Disp: 64 * l})
		}
		block(c)
		for h, a := range c.acc {
			VMOVUPS(a[0], Mem{Base: op, Disp: 32 * h})
		}
		ADDQ(gs, w)
		ADDQ(U8(64), op)
		DECQ(s)
		JNZ(LabelRef(name + "_stream"))
		ADDQ(U32(size), wb)
		ADDQ(U32(recBytes), rp)
	})
	dst := Load(Param("dst"), GP64())
	v := YMM()
	for o := 0; o < 64*pk256Streams; o += 32 {
		VMOVUPS(out.Offset(o), v)
		VMOVUPS(v, Mem{Base: dst, Disp: o})
	}
	ADDQ(U32(64*pk256Streams), dst)
	Store(dst, Param("dst"))
	nb := Load(Param("nb"), GP64())
	IMUL3Q(U32(size*pk256Streams), nb, nb)
	wp := Load(Param("w"), GP64())
	ADDQ(nb, wp)
	Store(wp, Param("w"))
	g := Load(Param("groups"), GP64())
	SUBQ(U32(pk256Streams), g)
	Store(g, Param("groups"))
	JNZ(LabelRef(name + "_group"))
	VZEROUPPER()
	RET()
}

// writeStreams256Table writes the Go tables of the streams tiles.
func writeStreams256Table(b *strings.Builder, types map[string]string) {
	for _, vnni := range []bool{false, true} {
		table, what := "pk256StreamTiles", "AVX2"
		if vnni {
			table, what = "pk256VNNIStreamTiles", "AVX-VNNI"
		}
		fmt.Fprintf(b, "// %s[type] is the %s one-token tile of pk256Streams groups at once.\n", table, what)
		fmt.Fprintf(b, "var %s = map[quant.Type]pkIntFn{\n", table)
		for _, typ := range pk256StreamTypes {
			fmt.Fprintf(b, "\t%s: %s,\n", types[typ], pk256StreamName(typ, vnni))
		}
		b.WriteString("}\n\n")
	}
	fmt.Fprintf(b, "const pk256Streams = %d\n\n", pk256Streams)
}
