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
//   - pk256{Q8_0,Q4_0,Q4K,Q6K}x{T}: the integer tiles (packed256int.go).
//   - pk256{,v}{Q8_0,Q4_0}x1s8: one token down 8 groups at once, each its
//     own memory stream (streams256.go).

// pk256FloatGroups[t] is the widest float tile of t tokens: 2·t·M
// accumulators, t broadcasts and a weight fit 16 ymm.
var pk256FloatGroups = []int{1: 6, 2: 3, 3: 2, 4: 1, 5: 1}

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
	for _, typ := range pk256VNNITypes {
		for t := 1; t <= pk256IntTokens; t++ {
			if name := pk256VNNITile(typ, t); name == pk256VNNIName(typ, t) {
				pk256IntTile(name, typ, t, true)
			}
		}
	}
	strip256Kernels()
	streams256Kernels()
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
	fmt.Fprintf(b, "// pk256VNNITiles[type][tokens] is the AVX-VNNI integer tile of that shape.\n")
	b.WriteString("var pk256VNNITiles = map[quant.Type]*pkIntShapes{\n")
	for _, typ := range pk256VNNITypes {
		fmt.Fprintf(b, "\t%s: {", types[typ])
		for t := 1; t <= pk256IntTokens; t++ {
			fmt.Fprintf(b, "%d: %s, ", t, pk256VNNITile(typ, t))
		}
		b.WriteString("},\n")
	}
	b.WriteString("}\n\n")
	writeStreams256Table(b, types)
	fmt.Fprintf(b, "// pk256FloatGroups[t] is the widest AVX2 float tile of t tokens.\n")
	fmt.Fprintf(b, "var pk256FloatGroups = %#v\n\nconst pk256IntTokens = %d\n", pk256FloatGroups, pk256IntTokens)
	writeStrip256Table(b, types)
}
