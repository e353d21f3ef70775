package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The AVX-VNNI tiles pk256v{Type}x{T}: AVX2's tiles (the same passes,
// halves, prefetch and stores) where VEX-encoded VPDPBUSD on ymm (Intel
// Alder Lake and later desktops, AMD Zen 5: no AVX-512 needed) does a
// step's exact 4-byte dot products in one instruction. Q8_0's packed
// bytes u = w+128 go in unsigned as the AVX-512 tiles' do, so an output is
// float(Σu·x + o0) with the record's o0 = −128·Σx: the integer of
// kernels/cpu/packed.go, bit for bit. Without VNNI the same step costs
// VPXOR, VPABSB, VPSIGNB, VPMADDUBSW, VPMADDWD and VPADDD (pk256Q8).

// pk256VNNITypes are the types with AVX-VNNI tiles; the others run their
// AVX2 tiles on an AVX-VNNI CPU.
var pk256VNNITypes = []string{"Q8_0", "Q4_0", "Q4_1", "Q4K", "Q6K"}

// pk256VNNITokens[type] is the most tokens of its AVX-VNNI tiles where
// fewer than pk256IntTokens: wider ones are AVX2's (Q6_K's VNNI block
// keeps a sum a half and token more than 16 ymm hold at 3-4 tokens).
var pk256VNNITokens = map[string]int{"Q6K": 2}

// pk256VNNITile is the tile of t tokens an AVX-VNNI CPU runs for typ.
func pk256VNNITile(typ string, t int) string {
	if m, ok := pk256VNNITokens[typ]; ok && t > m {
		return pk256IntName(typ, t)
	}
	return pk256VNNIName(typ, t)
}

func pk256VNNIName(typ string, t int) string { return fmt.Sprintf("pk256v%sx%d", typ, t) }

// pk256Q8VNNI: per block and half, i = o0 + Σ_s VPDPBUSD(u_s, x_s), in
// two chains for one token (a VPDPBUSD waits for the last: four to five
// cycles), one a token otherwise; out = fma(float(i), d_w·d_x, out).
func pk256Q8VNNI(c pass256) {
	blockLoop(c.name, "block", c.n, func() {
		c.prefetch(0, 1)
		pk256Q8VNNIBlock(c)
		ADDQ(U32(544), c.w)
		c.next()
	})
}

// pk256Q8VNNIBlock emits one block's products at c.w into c.acc.
func pk256Q8VNNIBlock(c pass256) {
	T := len(c.acc[0])
	chains := 1
	if T == 1 {
		chains = 2
	}
	i := make([][][]VecVirtual, len(c.hs)) // [half][token][chain]
	for k := range i {
		i[k] = make([][]VecVirtual, T)
		for t := range i[k] {
			i[k][t] = make([]VecVirtual, chains)
			for ch := range chains {
				i[k][t][ch] = YMM()
				if ch == 0 {
					VPBROADCASTD(c.rec(t, recO0), i[k][t][ch])
				} else {
					VPXOR(i[k][t][ch], i[k][t][ch], i[k][t][ch])
				}
			}
		}
	}
	for s := 0; s < 8; s++ {
		x := make([]VecVirtual, T)
		for t := range x {
			x[t] = YMM()
			VPBROADCASTD(c.rec(t, 4*s), x[t])
		}
		for k, h := range c.hs {
			u := YMM()
			VMOVDQU(c.at(h, 64*s), u)
			for t := range x {
				// all registers: vexVNNI re-encodes it as VEX
				VPDPBUSD(x[t], u, i[k][t][s%chains])
			}
		}
	}
	for k, h := range c.hs {
		sw := YMM()
		VCVTPH2PS(Mem{Base: c.w, Disp: 512 + 16*h}, sw)
		for t := range T {
			for ch := 1; ch < chains; ch++ {
				VPADDD(i[k][t][ch], i[k][t][0], i[k][t][0])
			}
			scaleInto(i[k][t][0], sw, c.acc[k][t], c.rec(t, recD))
		}
	}
}

// nibbleDots is nibbleSums with VPDPBUSD: token t's int32 Σq·x over
// the 8 steps of half h of the nibbles at off, no int16 stage (so no
// VPMADDUBSW, VPADDW and VPMADDWD): two chains for one token.
func nibbleDots(c pass256, h int, lo VecVirtual, off int, T int) []VecVirtual {
	chains := 1
	if T == 1 {
		chains = 2
	}
	i := make([][]VecVirtual, T)
	for t := range i {
		i[t] = make([]VecVirtual, chains)
		for ch := range i[t] {
			i[t][ch] = YMM()
			VPXOR(i[t][ch], i[t][ch], i[t][ch])
		}
	}
	for s := 0; s < 4; s++ {
		u, v := nibbleLoad(c, h, lo, off+64*s)
		for t := range i {
			x, y := YMM(), YMM()
			VPBROADCASTD(c.rec(t, 4*s), x)
			VPDPBUSD(x, u, i[t][0])
			VPBROADCASTD(c.rec(t, 4*(s+4)), y)
			VPDPBUSD(y, v, i[t][chains-1])
		}
	}
	out := make([]VecVirtual, T)
	for t := range i {
		for ch := 1; ch < chains; ch++ {
			VPADDD(i[t][ch], i[t][0], i[t][0])
		}
		out[t] = i[t][0]
	}
	return out
}

// scaledDots is scaledPairDots with VPDPBUSD: per token, each half's
// int32 Σu·x (steps 0-3, then 4-7) times that half's scale (s32, VPMULLD)
// added to i[t], the same integer; then scaled by the group's d.
func scaledDots(c pass256, k, h int, i []VecVirtual, step func(int) VecVirtual, s32 [2]VecVirtual) {
	for q := range 2 {
		d := make([]VecVirtual, len(i))
		for t := range d {
			d[t] = YMM()
			VPXOR(d[t], d[t], d[t])
		}
		for s := 4 * q; s < 4*q+4; s++ {
			u := step(s)
			for t := range d {
				x := YMM()
				VPBROADCASTD(c.rec(t, 4*s), x)
				VPDPBUSD(x, u, d[t])
			}
		}
		for t := range d {
			VPMULLD(s32[q], d[t], d[t])
			VPADDD(d[t], i[t], i[t])
		}
	}
	d := YMM()
	VCVTPH2PS(Mem{Base: c.w, Disp: 16 * h}, d)
	for t := range i {
		scaleInto(i[t], d, c.acc[k][t], c.rec(t, recD))
	}
}

// vpdpbusdY is a register-only VPDPBUSD on ymm as Go prints it (signed
// source, unsigned source, accumulator).
var vpdpbusdY = regexp.MustCompile(`^(\s+)VPDPBUSD\s+Y(\d+), Y(\d+), Y(\d+)$`)

// vexVNNI rewrites the written assembly's ymm VPDPBUSD as VEX bytes
// (VEX.256.66.0F38.W0 50 /r, AVX-VNNI): Go's assembler knows only the
// EVEX form (AVX512_VNNI + AVX512VL), which faults on a CPU without
// AVX-512. Only the AVX-VNNI tiles use VPDPBUSD on ymm.
func vexVNNI() {
	path := flag.Lookup("out").Value.String()
	src, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	lines := strings.Split(string(src), "\n")
	for n, l := range lines {
		if strings.HasPrefix(l, "// Requires:") && n+1 < len(lines) && strings.HasPrefix(lines[n+1], "TEXT ·pk256v") {
			lines[n] = strings.Replace(l, "AVX512VL, AVX512VNNI", "AVX-VNNI", 1)
		}
		m := vpdpbusdY.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		rm, v, r := atoi(m[2]), atoi(m[3]), atoi(m[4])
		if rm > 15 || v > 15 || r > 15 {
			panic(fmt.Sprintf("line %d: %s: VEX reaches Y0-Y15 only", n+1, l))
		}
		b := []int{
			0xc4,
			(^r>>3&1)<<7 | 1<<6 | (^rm>>3&1)<<5 | 0x02, // R̄ X̄ B̄, map 0F38
			(^v&0xf)<<3 | 1<<2 | 0x01,                  // W0, vvvv, L=256, pp=66
			0x50,
			0xc0 | (r&7)<<3 | rm&7,
		}
		var out strings.Builder
		out.WriteString(m[1])
		for j, x := range b {
			if j > 0 {
				out.WriteString("; ")
			}
			fmt.Fprintf(&out, "BYTE $0x%02x", x)
		}
		fmt.Fprintf(&out, " // VPDPBUSD Y%d, Y%d, Y%d (VEX)", rm, v, r)
		lines[n] = out.String()
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		panic(err)
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}
