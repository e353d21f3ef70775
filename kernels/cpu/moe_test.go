package cpu

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"jspark/kernels"
	"jspark/kernels/quant"
	"jspark/kernels/ref"
)

// windowed adds a sliding window and per-head sinks to a test attention.
func windowed(r *rand.Rand, a *kernels.Attention, window int, sinks bool) *kernels.Attention {
	a.Window = window
	if sinks {
		s := randVec(r, a.Heads)
		for i := range s {
			s[i] *= 3
		}
		a.Sinks = f32(s)
	}
	return a
}

// TestAttendWindowSinksMatchReference: sliding windows (shorter than a
// block, a 16-slot chunk, a run; wider than the context) and sinks on
// every instruction set, F32 and F16.
func TestAttendWindowSinksMatchReference(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 13))
	for _, is := range isas() {
		for _, c := range []struct{ n, heads, kvHeads, hd, bs, window int }{
			{70, 4, 2, 64, 16, 5}, {70, 4, 2, 64, 16, 20}, {90, 2, 1, 128, 32, 40}, {50, 2, 2, 64, 7, 9},
			{45, 3, 1, 24, 16, 12}, {33, 2, 2, 8, 16, 3}, {40, 2, 1, 64, 16, 1}, {40, 2, 1, 64, 16, 100},
			{40, 16, 2, 64, 16, 20}, // gpt-oss's grouping: 8 heads a KV head
		} {
			for _, sinks := range []bool{false, true} {
				for _, kv := range []quant.Type{quant.F32, quant.F16} {
					a := windowed(r, attention(r, c.n, c.heads, c.kvHeads, c.hd, c.bs), c.window, sinks)
					if kv == quant.F16 {
						a.K, a.V = toF16(a.K), toF16(a.V)
					}
					newISA(3, is).Attend(a)
					got := append([]float32(nil), kernels.HostF32(a.Out)...)
					ref.Kernels{}.Attend(a)
					if e := relL2(got, kernels.HostF32(a.Out)); e > 2e-6 {
						t.Errorf("%v %v %+v sinks %v: relative L2 error %g", is, kv, c, sinks, e)
					}
				}
			}
		}
	}
}

// TestAttendWindowBatchInvariant: with a window and sinks, a query's bits
// are the same alone and among the other queries of its run.
func TestAttendWindowBatchInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 14))
	for _, c := range []struct{ n, heads, kvHeads, hd, bs, window int }{
		{70, 4, 2, 64, 16, 20}, {77, 2, 1, 128, 24, 33}, {50, 2, 2, 64, 7, 9}, {45, 3, 1, 24, 16, 12},
		{40, 16, 2, 64, 16, 20},
	} {
		for _, is := range isas() {
			a := windowed(r, attention(r, c.n, c.heads, c.kvHeads, c.hd, c.bs), c.window, true)
			k := newISA(2, is)
			k.Attend(a)
			all := append([]float32(nil), kernels.HostF32(a.Out)...)
			dim := a.Heads * a.HeadDim
			for _, tok := range []int{0, c.window - 1, c.window, 31, 32, 33, c.n - 1} {
				if got := attendAlone(k, a, tok); !slices.Equal(got, all[tok*dim:(tok+1)*dim]) {
					t.Fatalf("%v %+v token %d: alone differs from in the batch", is, c, tok)
				}
			}
		}
	}
}

// TestRoPEYaRNMatchesReference: a YaRN rotation (gpt-oss's) and a partial
// one give ref's bits.
func TestRoPEYaRNMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 15))
	const n, heads, hd = 29, 3, 64
	pos := make([]int32, n)
	for i := range pos {
		pos[i] = int32(r.IntN(20000))
	}
	yarn := kernels.Rope{Dim: hd, Base: 150000, Neox: true, FreqScale: 1. / 32, ExtFactor: 1, Mscale: 1.3465736, Corr: [2]float32{8, 18}}
	for _, rp := range []kernels.Rope{yarn, kernels.PlainRope(32, 10000, true), kernels.PlainRope(32, 10000, false)} {
		x := randVec(r, n*heads*hd)
		want := append([]float32(nil), x...)
		New(2).RoPE(f32(x), i32(pos), n, heads, hd, rp)
		ref.Kernels{}.RoPE(f32(want), i32(pos), n, heads, hd, rp)
		if !slices.Equal(x, want) {
			t.Errorf("%+v: RoPE differs from ref", rp)
		}
	}
}

// TestMatMulGroups: each group's rows are their expert's product, bit for
// bit what a product over those rows alone gives, for every type of the
// packed and unpacked paths; empty groups are skipped.
func TestMatMulGroups(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 16))
	for _, is := range isas() {
		for _, typ := range []quant.Type{quant.F32, quant.F16, quant.Q8_0, quant.Q4_K} {
			t.Run(fmt.Sprintf("%v/%v", is, typ), func(t *testing.T) {
				k := newISA(2, is)
				const rows, cols = 40, 256
				ws := []*kernels.Matrix{matrix(r, typ, rows, cols), matrix(r, typ, rows, cols), matrix(r, typ, rows, cols), matrix(r, typ, rows, cols)}
				start := []int{0, 3, 3, 10, 11}
				n := start[len(start)-1]
				x := randVec(r, n*cols)
				got := make([]float32, n*rows)
				k.MatMulGroups(f32(got), f32(x), ws, start)
				for g, w := range ws {
					m := start[g+1] - start[g]
					if m == 0 {
						continue
					}
					want := make([]float32, m*rows)
					k.MatMul(f32(want), f32(x[start[g]*cols:start[g+1]*cols]), m, w)
					if !slices.Equal(got[start[g]*rows:start[g+1]*rows], want) {
						t.Fatalf("group %d differs from its own product", g)
					}
				}
			})
		}
	}
}

// TestWeightedSumAndSwiGLU: both give ref's bits.
func TestWeightedSumAndSwiGLU(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 17))
	const n, kk, width, rows = 13, 3, 72, 40
	src, w := randVec(r, rows*width), randVec(r, n*kk)
	idx := make([]int32, n*kk)
	for i := range idx {
		idx[i] = int32(r.IntN(rows))
	}
	base := randVec(r, n*width)
	got, want := append([]float32(nil), base...), append([]float32(nil), base...)
	New(2).WeightedSum(f32(got), f32(src), i32(idx), f32(w), n, kk, width)
	ref.Kernels{}.WeightedSum(f32(want), f32(src), i32(idx), f32(w), n, kk, width)
	if !slices.Equal(got, want) {
		t.Error("WeightedSum differs from ref")
	}
	g, u := randVec(r, 9000), randVec(r, 9000)
	for i := range g {
		g[i] *= 20
		u[i] *= 20
	}
	gw := append([]float32(nil), g...)
	New(2).SwiGLUOAI(f32(g), f32(u), len(g), 1.702, 7)
	ref.Kernels{}.SwiGLUOAI(f32(gw), f32(u), len(gw), 1.702, 7)
	if !slices.Equal(g, gw) {
		t.Error("SwiGLUOAI differs from ref")
	}
}
