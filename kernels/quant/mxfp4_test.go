package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestNearestMXFP4MatchesSearch: the midpoint rule picks the code the
// search over the grid picks, element for element: random blocks at many
// scales, every midpoint and its neighbours (ties), signed zeros, NaN,
// infinities, and scales at and beyond the rule's bounds.
func TestNearestMXFP4MatchesSearch(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var cases [][]float32
	for _, sc := range []float64{1e-30, 1e-6, 0.02, 1, 3, 1e6, 1e30} {
		for range 200 {
			x := make([]float32, 32)
			for i := range x {
				x[i] = float32(r.NormFloat64() * sc)
			}
			cases = append(cases, x)
		}
	}
	var edges []float32
	for _, m := range []float32{0.5, 1.5, 2.5, 3.5, 5, 7, 10, 12, 16} {
		for _, v := range []float32{m, math.Nextafter32(m, 0), math.Nextafter32(m, 100)} {
			edges = append(edges, v, -v)
		}
	}
	edges = append(edges, 0, float32(math.Copysign(0, -1)), float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 17, -40, 1e-45)
	for i := 0; i < len(edges); i += 32 {
		cases = append(cases, edges[i:min(i+32, len(edges))])
	}
	ds := []float32{1, 0.5, 0x1p-20, 0x1p-100, 0x1p100, 0x1p-101, 0x1p101, 0x1p-126, 0x1p-140, 0x1p127}
	for _, x := range cases {
		for _, d := range ds {
			var want, got [32]uint8
			nearestCodes(x, d, KValuesMXFP4[:], want[:len(x)])
			nearestMXFP4(x, d, got[:len(x)])
			if want != got {
				t.Fatalf("d %g, x %v:\ncodes %v,\nwant  %v", d, x, got[:len(x)], want[:len(x)])
			}
		}
		if len(x) == 32 { // and scaled by the encoder's own exponent
			var amax float32
			for _, v := range x {
				amax = max(amax, abs32(v))
			}
			if amax > 0 && amax < float32(math.Inf(1)) {
				e := uint8(min(max(128+math.Ceil(math.Log2(float64(amax)/12)), 1), 254))
				var want, got [32]uint8
				nearestCodes(x, E8M0Half(e), KValuesMXFP4[:], want[:])
				nearestMXFP4(x, E8M0Half(e), got[:])
				if want != got {
					t.Fatalf("e %d, x %v: codes %v, want %v", e, x, got, want)
				}
			}
		}
	}
}

// FuzzNearestMXFP4: any block of values at any power-of-two scale.
func FuzzNearestMXFP4(f *testing.F) {
	f.Add(uint32(0x3f000000), uint32(0xbfc00000), uint8(128))
	f.Add(uint32(0x7fc00000), uint32(0x80000000), uint8(1))
	f.Fuzz(func(t *testing.T, a, b uint32, e uint8) {
		x := make([]float32, 32)
		for i := range x {
			bits := a + uint32(i)*b
			x[i] = math.Float32frombits(bits)
		}
		var want, got [32]uint8
		d := E8M0Half(e)
		nearestCodes(x, d, KValuesMXFP4[:], want[:])
		nearestMXFP4(x, d, got[:])
		if want != got {
			t.Fatalf("e %d, x %v: codes %v, want %v", e, x, got, want)
		}
	})
}

// BenchmarkQuantizeMXFP4 encodes 1M weights (a 32-expert layer of
// gpt-oss-20b holds 796M).
func BenchmarkQuantizeMXFP4(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, 1<<20)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 0.02)
	}
	b.SetBytes(int64(len(x)) * 4)
	for b.Loop() {
		Quantize(MXFP4, x)
	}
}

// BenchmarkNearestMXFP4 sets the codes of 1M weights at the encoder's
// scales by the search and by the midpoint rule.
func BenchmarkNearestMXFP4(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, 1<<20)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 0.02)
	}
	u := make([]uint8, 32)
	for _, c := range []struct {
		name  string
		codes func(x []float32, d float32, u []uint8)
	}{
		{"search", func(x []float32, d float32, u []uint8) { nearestCodes(x, d, KValuesMXFP4[:], u) }},
		{"midpoint", nearestMXFP4},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(x)) * 4)
			for b.Loop() {
				for i := 0; i < len(x); i += 32 {
					c.codes(x[i:i+32], 0x1p-9, u)
				}
			}
		})
	}
}
