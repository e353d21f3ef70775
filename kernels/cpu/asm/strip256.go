package main

import (
	"fmt"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The AVX2 strip tiles pk256{Type}Sx{T} (and AVX-VNNI's pk256v{Type}Sx{T}):
// T tokens over groups of weights that a batch product unpacked once
// (kernels/cpu/strip.go) into a form with nothing left to unpack per
// token. Each output takes the arithmetic kernels/cpu/packed.go states,
// so these agree bit for bit with the packed tiles.
//
// A Q4_K strip is, per 32-element sub-block of a group (640 bytes): 8
// steps of 64 bytes (16 rows × 4 four-bit values as bytes 0…15, half h at
// 32h, as a packed load), then the rows' float32 d·sc_j (16 × 4 bytes),
// then their dmin·m_j. Per token, 8 rows and 32 elements take 8
// VPMADDUBSW, 7 VPADDW, one VPMADDWD and the float combine; the nibble
// masks and shifts and the scales' conversions of the packed tile are
// gone. A Q6_K strip (832 bytes a block): 8 steps of the values q+32 as
// bytes, the halves' scales as int16 pairs (VPMADDWD's) and as int32
// (VPMULLD's, for the offset terms), then d as float32.
//
// NOTE: the packed tiles run their unpacking on vector pipes the
// multiplies leave idle, so the strip gains less than its count of
// operations suggests: what paid is fewer broadcasts (below) and, for
// Q6_K, whose unpacking is 5 operations a step, the unpacking itself.
// Replacing VPMADDWD by shifts and adds, or VCVTDQ2PS by the 2^23 magic
// add, measured slower or the same.
//
// NOTE: a tile runs both 8-row halves of a group in one pass, so that
// each broadcast of a token's 4 activations feeds two VPMADDUBSW: 2T
// accumulators, 2T int16 sums, a step's two weight loads, a broadcast and
// a product fit 16 ymm at T = 3. Per 8 rows × 32 elements × token, in
// cache, one thread (load 8, interleaved): 1.78 ns, against 1.96 running
// the halves one after the other at T = 6 (one broadcast a VPMADDUBSW,
// a step's weights loaded once for 6 tokens), 2.07 for T = 4 alike, and
// 2.07 for the packed 4-token tile.

// strip256Tokens is the most tokens of a strip tile, and strip256Max a
// type's (Q6_K's pair sums take 2T more registers).
const strip256Tokens = 3

var strip256Max = map[string]int{"Q4K": 3, "Q6K": 2}

var strip256Types = []string{"Q4K", "Q6K"}

// stripBlockBytes is a strip's bytes per 32-element block of a group.
var stripBlockBytes = map[string]int{"Q4K": 640, "Q6K": 832}

func strip256Kernels() {
	for _, typ := range strip256Types {
		for t := 1; t <= strip256Max[typ]; t++ {
			strip256Tile(typ, t)
		}
	}
	for _, typ := range strip256VNNITypes {
		for t := 1; t <= strip256Max[typ]; t++ {
			strip256TileAs(strip256VNNIName(typ, t), typ, t, true)
		}
	}
	unpack256Q4K()
	unpack256Q6K()
}

// unpack256Q4K writes the strips of nsb packed Q4_K super-blocks of a
// group: the nibbles masked and shifted as bytes, d·sc_j and dmin·m_j as
// VMULPS of their float conversions forms them (the packed tile's
// products, bit for bit).
func unpack256Q4K() {
	TEXT("unpack256Q4K", NOSPLIT, "func(dst *byte, src *byte, nsb int)")
	dst, src, n := Load(Param("dst"), GP64()), Load(Param("src"), GP64()), Load(Param("nsb"), GP64())
	lo := bcastByte(0x0f)
	blockLoop("unpack256Q4K", "super", n, func() {
		var d, dmin [2]VecVirtual
		for h := range 2 {
			d[h], dmin[h] = YMM(), YMM()
			VCVTPH2PS(Mem{Base: src, Disp: 16 * h}, d[h])
			VCVTPH2PS(Mem{Base: src, Disp: 32 + 16*h}, dmin[h])
		}
		for j := 0; j < 8; j++ {
			out := 640 * j
			for c := 0; c < 4; c++ {
				for h := range 2 {
					v, u := YMM(), YMM()
					VMOVDQU(Mem{Base: src, Disp: 320 + 256*j + 64*c + 32*h}, v)
					VPAND(lo, v, u)
					VMOVDQU(u, Mem{Base: dst, Disp: out + 64*c + 32*h})
					VPSRLW(U8(4), v, v)
					VPAND(lo, v, v)
					VMOVDQU(v, Mem{Base: dst, Disp: out + 64*(c+4) + 32*h})
				}
			}
			for h := range 2 {
				for k, f := range []VecVirtual{d[h], dmin[h]} {
					s := YMM()
					VPMOVZXBD(Mem{Base: src, Disp: 64 + 128*k + 16*j + 8*h}, s)
					VCVTDQ2PS(s, s)
					VMULPS(f, s, s)
					VMOVUPS(s, Mem{Base: dst, Disp: out + 512 + 64*k + 32*h})
				}
			}
		}
		ADDQ(U32(2368), src)
		ADDQ(U32(8*stripBlockBytes["Q4K"]), dst)
	})
	VZEROUPPER()
	RET()
}

func strip256Name(typ string, t int) string { return fmt.Sprintf("pk256%sSx%d", typ, t) }

// strip256VNNIName is the AVX-VNNI strip tile's name (pk256v*: vexVNNI
// marks what it requires).
func strip256VNNIName(typ string, t int) string { return fmt.Sprintf("pk256v%sSx%d", typ, t) }

// strip256VNNITypes have AVX-VNNI strip tiles, whose VPDPBUSD sums a
// step into int32 (no VPMADDUBSW, VPADDW, VPMADDWD); an AVX-VNNI CPU runs
// the AVX2 strip tiles of the others. Per 8 rows × 32 elements × token,
// one thread in cache (load 7, interleaved): Q4_K's AVX2 strip tile 1.87
// ns, the AVX-VNNI packed 4-token tile 1.85; Q6_K's AVX2 strip tile
// 2.35, its AVX-VNNI packed tile 3.19 (2 tokens).
var strip256VNNITypes = []string{"Q4K"}

// strip256Tile writes the strip tile of T tokens of typ: pkIntFn's
// arguments, w a group's strip and nb its blocks of 32.
func strip256Tile(typ string, T int) { strip256TileAs(strip256Name(typ, T), typ, T, false) }

// strip256TileAs writes tile name, with AVX-VNNI's VPDPBUSD where vnni.
func strip256TileAs(name, typ string, T int, vnni bool) {
	TEXT(name, NOSPLIT, "func(w *byte, r *byte, rs int, nb int, dst *float32, ds int, mask uint16, groups int)")
	Label(name + "_group")
	for _, hs := range [][]int{{0, 1}} {
		w := Load(Param("w"), GP64())
		r0, rs := Load(Param("r"), GP64()), Load(Param("rs"), GP64())
		rb := strided(r0, rs, T)
		acc := make([][]VecVirtual, len(hs))
		for k := range acc {
			acc[k] = make([]VecVirtual, T)
			for t := range acc[k] {
				acc[k][t] = YMM()
				VXORPS(acc[k][t], acc[k][t], acc[k][t])
			}
		}
		c := pass256{name: fmt.Sprintf("%s_h%d", name, hs[0]), hs: hs, w: w, n: Load(Param("nb"), GP64()),
			rec: func(t, off int) Mem { return stridedAt(rb, rs, t).Offset(off) },
			next: func() {
				for _, b := range rb {
					ADDQ(U32(recBytes), b)
				}
			},
			acc: acc, size: stripBlockBytes[typ], vnni: vnni}
		switch typ {
		case "Q4K":
			strip256Q4K(c)
		case "Q6K":
			strip256Q6K(c)
		}
		for k, h := range hs {
			storeHalf(fmt.Sprintf("%s_s%d", name, h), h, acc[k])
		}
	}
	nextGroup(name, stripBlockBytes[typ], false)
}

// stripOnes is 0x00010001 in 8 lanes: VPMADDWD's pair sums.
var stripOnes = func() Mem {
	m := GLOBL("stripones", RODATA|NOPTR)
	for i := 0; i < 8; i++ {
		DATA(4*i, U32(0x00010001))
	}
	return m
}()

// strip256Q4K: per sub-block j, out = fma(float(Σq·x), (d·sc_j)·d_x, out),
// then out = fma(−(dmin·m_j), d_x·Σx, out), with d·sc_j and dmin·m_j
// read as the strip holds them.
func strip256Q4K(c pass256) {
	blockLoop(c.name, "block", c.n, func() {
		i := make([][]VecVirtual, len(c.hs))
		for k := range i {
			i[k] = make([]VecVirtual, len(c.acc[k]))
		}
		for s := 0; s < 8; s++ {
			w := make([]VecVirtual, len(c.hs))
			for k, h := range c.hs {
				w[k] = YMM()
				VMOVDQU(c.at(h, 64*s), w[k])
			}
			for t := range i[0] {
				x := YMM()
				VPBROADCASTD(c.rec(t, 4*s), x)
				for k := range c.hs {
					m := x
					if k+1 < len(c.hs) {
						m = YMM()
					}
					if c.vnni {
						if s == 0 {
							i[k][t] = YMM()
							VPXOR(i[k][t], i[k][t], i[k][t])
						}
						// all registers: vexVNNI re-encodes it as VEX
						VPDPBUSD(x, w[k], i[k][t])
						continue
					}
					VPMADDUBSW(x, w[k], m)
					if s == 0 {
						i[k][t] = m
					} else {
						VPADDW(m, i[k][t], i[k][t])
					}
				}
			}
		}
		for t := range i[0] {
			dx, a := YMM(), YMM()
			VBROADCASTSS(c.rec(t, recD), dx)
			VBROADCASTSS(c.rec(t, recA), a)
			for k, h := range c.hs {
				v, acc := i[k][t], c.acc[k][t]
				if !c.vnni {
					VPMADDWD(stripOnes, v, v)
				}
				VCVTDQ2PS(v, v)
				b := YMM()
				VMULPS(c.at(h, 512), dx, b)
				VFMADD231PS(b, v, acc)
				VFNMADD231PS(c.at(h, 576), a, acc)
			}
		}
		ADDQ(U32(stripBlockBytes["Q4K"]), c.w)
		c.next()
	})
}

// unpack256Q6K writes the strips of nsb packed Q6_K super-blocks of a
// group: per block the values u = q+32 as bytes (the packed tile's
// steps), the halves' scales as int16 pairs and as int32, and d as
// float32.
func unpack256Q6K() {
	TEXT("unpack256Q6K", NOSPLIT, "func(dst *byte, src *byte, nsb int)")
	dst, src, n := Load(Param("dst"), GP64()), Load(Param("src"), GP64()), Load(Param("nsb"), GP64())
	lo, hi := bcastByte(0x0f), bcastByte(0x30)
	blockLoop("unpack256Q6K", "super", n, func() {
		var d [2]VecVirtual
		for h := range 2 {
			d[h] = YMM()
			VCVTPH2PS(Mem{Base: src, Disp: 16 * h}, d[h])
		}
		for b := 0; b < 8; b++ {
			out, ql, qh := 832*b, 288+256*b, 2336+128*b
			for h := range 2 {
				for s := 0; s < 8; s++ {
					u := q6Step(src, h, s, ql, qh, lo, hi)
					VMOVDQU(u, Mem{Base: dst, Disp: out + 64*s + 32*h})
				}
				for k := range 2 {
					s32, w := YMM(), YMM()
					VPMOVSXBD(Mem{Base: src, Disp: 32 + 16*(2*b+k) + 8*h}, s32)
					VMOVDQU(s32, Mem{Base: dst, Disp: out + 640 + 64*k + 32*h})
					VPSLLD(U8(16), s32, w)
					VPBLENDW(U8(0x55), s32, w, w)
					VMOVDQU(w, Mem{Base: dst, Disp: out + 512 + 64*k + 32*h})
				}
				VMOVUPS(d[h], Mem{Base: dst, Disp: out + 768 + 32*h})
			}
		}
		ADDQ(U32(3360), src)
		ADDQ(U32(8*stripBlockBytes["Q6K"]), dst)
	})
	VZEROUPPER()
	RET()
}

// strip256Q6K: per 32-element block, halves A (steps 0-3) and B (4-7),
// out = fma(float(sc_A·(Σ_A u·x + o0) + sc_B·(Σ_B u·x + o1)), d·d_x, out),
// as pk256Q6K: two steps' int16 pair sums (at most 2·2·63·128 < 2^15)
// add up before VPMADDWD multiplies them by their half's scales.
func strip256Q6K(c pass256) {
	T := len(c.acc[0])
	blockLoop(c.name, "block", c.n, func() {
		i := make([][]VecVirtual, len(c.hs))
		for k := range i {
			i[k] = make([]VecVirtual, T)
		}
		for t := 0; t < T; t++ {
			o0, o1 := YMM(), YMM()
			VPBROADCASTD(c.rec(t, recO0), o0)
			VPBROADCASTD(c.rec(t, recO1), o1)
			for k, h := range c.hs {
				v, b := YMM(), YMM()
				VPMULLD(c.at(h, 640), o0, v)
				VPMULLD(c.at(h, 704), o1, b)
				VPADDD(b, v, v)
				i[k][t] = v
			}
		}
		for s := 0; s < 8; s += 2 {
			p := make([][]VecVirtual, len(c.hs))
			for k := range p {
				p[k] = make([]VecVirtual, T)
			}
			for e := s; e < s+2; e++ {
				w := make([]VecVirtual, len(c.hs))
				for k, h := range c.hs {
					w[k] = YMM()
					VMOVDQU(c.at(h, 64*e), w[k])
				}
				for t := 0; t < T; t++ {
					x := YMM()
					VPBROADCASTD(c.rec(t, 4*e), x)
					for k := range c.hs {
						m := x
						if k+1 < len(c.hs) {
							m = YMM()
						}
						VPMADDUBSW(x, w[k], m)
						if e == s {
							p[k][t] = m
						} else {
							VPADDW(m, p[k][t], p[k][t])
						}
					}
				}
			}
			for k, h := range c.hs {
				for t := 0; t < T; t++ {
					VPMADDWD(c.at(h, 512+64*(s/4)), p[k][t], p[k][t])
					VPADDD(p[k][t], i[k][t], i[k][t])
				}
			}
		}
		for t := 0; t < T; t++ {
			b := YMM()
			VBROADCASTSS(c.rec(t, recD), b)
			for k, h := range c.hs {
				f := YMM()
				VMULPS(c.at(h, 768), b, f)
				VCVTDQ2PS(i[k][t], i[k][t])
				VFMADD231PS(f, i[k][t], c.acc[k][t])
			}
		}
		ADDQ(U32(stripBlockBytes["Q6K"]), c.w)
		c.next()
	})
}

// writeStrip256Table writes the Go table of the strip tiles.
func writeStrip256Table(b *strings.Builder, types map[string]string) {
	fmt.Fprintf(b, "\n// pk256StripTiles[type][tokens] is the AVX2 strip tile of that shape.\n")
	b.WriteString("var pk256StripTiles = map[quant.Type]*pkIntShapes{\n")
	for _, typ := range strip256Types {
		fmt.Fprintf(b, "\t%s: {", types[typ])
		for t := 1; t <= strip256Max[typ]; t++ {
			fmt.Fprintf(b, "%d: %s, ", t, strip256Name(typ, t))
		}
		b.WriteString("},\n")
	}
	b.WriteString("}\n\n")
	fmt.Fprintf(b, "// pk256VNNIStripTiles[type][tokens] is the AVX-VNNI strip tile of that shape.\n")
	b.WriteString("var pk256VNNIStripTiles = map[quant.Type]*pkIntShapes{\n")
	for _, typ := range strip256VNNITypes {
		fmt.Fprintf(b, "\t%s: {", types[typ])
		for t := 1; t <= strip256Max[typ]; t++ {
			fmt.Fprintf(b, "%d: %s, ", t, strip256VNNIName(typ, t))
		}
		b.WriteString("},\n")
	}
	fmt.Fprintf(b, "}\n\nconst pk256StripTokens = %d\n", strip256Tokens)
}
