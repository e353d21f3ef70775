package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

var allTypes = WeightTypes()

func randVec(r *rand.Rand, n int, amax float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = (r.Float32()*2 - 1) * amax
	}
	return v
}

func TestRoundTripWithinBound(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, typ := range allTypes {
		t.Run(typ.String(), func(t *testing.T) {
			x := randVec(r, 4*QK_K, 2)
			got := make([]float32, len(x))
			Dequantize(typ, Quantize(typ, x), got)
			bound := MaxError(typ, 2)
			for i := range x {
				if d := abs32(got[i] - x[i]); d > bound {
					t.Fatalf("element %d: %v decoded as %v, error %v over bound %v", i, x[i], got[i], d, bound)
				}
			}
		})
	}
}

func TestDotMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, typ := range allTypes {
		for _, n := range []int{256, 512, 1024 + 256} {
			t.Run(fmt.Sprintf("%v/%d", typ, n), func(t *testing.T) {
				w := Quantize(typ, randVec(r, n, 1))
				x := randVec(r, n, 1)
				got := float64(Dot(typ, w, x))
				want := ReferenceDot(typ, w, x)
				if math.Abs(got-want) > 1e-4*math.Max(1, math.Abs(want)) {
					t.Fatalf("Dot = %v, reference %v", got, want)
				}
			})
		}
	}
}

// Known encodings decoded by hand from ggml's layout, so that an encoder and a
// decoder that agree with each other but not with ggml cannot both pass.
func TestKnownBlocks(t *testing.T) {
	// Q8_0: d = 0.5 (f16 0x3800), q = 0..31.
	q8 := make([]byte, 34)
	q8[0], q8[1] = 0x00, 0x38
	for i := 0; i < 32; i++ {
		q8[2+i] = byte(int8(i - 16))
	}
	got := make([]float32, 32)
	Dequantize(Q8_0, q8, got)
	for i := range got {
		if want := 0.5 * float32(i-16); got[i] != want {
			t.Fatalf("Q8_0[%d] = %v, want %v", i, got[i], want)
		}
	}
	// Q4_0: d = 1, byte j holds x[j] low nibble and x[j+16] high nibble.
	q4 := make([]byte, 18)
	q4[0], q4[1] = 0x00, 0x3c
	for j := 0; j < 16; j++ {
		q4[2+j] = byte(j) | byte(15-j)<<4
	}
	Dequantize(Q4_0, q4, got)
	for j := 0; j < 16; j++ {
		if got[j] != float32(j-8) || got[j+16] != float32(7-j) {
			t.Fatalf("Q4_0 pair %d = %v,%v", j, got[j], got[j+16])
		}
	}
	// Q6_K: d = 1, all scales 1, ql = 0, qh = 0 → every value is -32.
	q6 := make([]byte, 210)
	for i := 192; i < 208; i++ {
		q6[i] = 1
	}
	q6[208], q6[209] = 0x00, 0x3c
	big := make([]float32, QK_K)
	Dequantize(Q6_K, q6, big)
	for i, v := range big {
		if v != -32 {
			t.Fatalf("Q6_K[%d] = %v, want -32", i, v)
		}
	}
	// Q4_K: d = 1, dmin = 1, scale j = j+1 and min j = 0 for j < 4; all nibbles 1.
	q4k := make([]byte, 144)
	q4k[0], q4k[1], q4k[2], q4k[3] = 0x00, 0x3c, 0x00, 0x3c
	for j := 0; j < 4; j++ {
		q4k[4+j] = byte(j + 1)
	}
	for i := 16; i < 144; i++ {
		q4k[i] = 0x11
	}
	Dequantize(Q4_K, q4k, big)
	for s := 0; s < 4; s++ {
		if v := big[s*32]; v != float32(s+1) {
			t.Fatalf("Q4_K sub-block %d = %v, want %v", s, v, s+1)
		}
	}
}

func TestHalfConversions(t *testing.T) {
	for _, c := range []struct {
		f float32
		h uint16
	}{{1, 0x3c00}, {-2, 0xc000}, {0.5, 0x3800}, {65504, 0x7bff}, {5.960464477539063e-08, 0x0001}, {0, 0}} {
		if got := F32ToF16(c.f); got != c.h {
			t.Errorf("F32ToF16(%v) = %#x, want %#x", c.f, got, c.h)
		}
		if got := F16ToF32(c.h); got != c.f {
			t.Errorf("F16ToF32(%#x) = %v, want %v", c.h, got, c.f)
		}
	}
	for h := 0; h < 1<<16; h++ {
		f := F16ToF32(uint16(h))
		if f != f { // NaN
			continue
		}
		if back := F32ToF16(f); back != uint16(h) {
			t.Fatalf("half %#x → %v → %#x", h, f, back)
		}
	}
	if got := BF16ToF32(F32ToBF16(1.5)); got != 1.5 {
		t.Fatalf("bf16 1.5 → %v", got)
	}
}

func BenchmarkDot(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	const n = 4096
	x := randVec(r, n, 1)
	for _, typ := range allTypes {
		w := Quantize(typ, randVec(r, n, 1))
		b.Run(typ.String(), func(b *testing.B) {
			for b.Loop() {
				Dot(typ, w, x)
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
		})
	}
}

func TestDotF32MatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for n := 0; n < 300; n++ {
		a, b := randVec(r, n, 1), randVec(r, n, 1)
		var want float64
		for i := range a {
			want += float64(a[i]) * float64(b[i])
		}
		if got := float64(DotF32(a, b)); math.Abs(got-want) > 1e-5*math.Max(1, math.Abs(want)) {
			t.Fatalf("n=%d: DotF32 %v, float64 %v", n, got, want)
		}
	}
}
