//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"jspark/backend/model"
	"jspark/kernels"
	"jspark/kernels/quant"
	"jspark/kernels/ref"
)

// TestAttendWindowSinks: sliding windows (inside a tile, across the
// 256-position segments, longer than the context) and per-head sinks
// against ref, and a token's bits alone as in the batch.
func TestAttendWindowSinks(t *testing.T) {
	d := device(t)
	r := rand.New(rand.NewPCG(17, 17))
	for _, c := range []struct {
		attCase
		window int
		sinks  bool
	}{
		{attCase{8, 4, 64, quant.F32, false}, 5, false}, {attCase{8, 4, 64, quant.F32, false}, 40, true},
		{attCase{8, 2, 64, quant.F16, true}, 128, true}, {attCase{8, 2, 64, quant.F16, true}, 300, false},
		{attCase{4, 4, 64, quant.F32, true}, 1000, true}, {attCase{4, 4, 64, quant.F32, false}, 0, true},
	} {
		t.Run(fmt.Sprintf("d%d/%v/long=%v/w%d/sinks=%v", c.headDim, c.pool, c.long, c.window, c.sinks), func(t *testing.T) {
			a, q, k, v, pos, seq, table := attInputs(r, c.attCase)
			a.Window = c.window
			hk, gk := kvBuffers(t, d, c.pool, k)
			hv, gv := kvBuffers(t, d, c.pool, v)
			want := make([]float32, len(q))
			h := a
			h.Out, h.Q, h.K, h.V, h.Pos, h.Seq, h.Table = hf32(want), hf32(q), hk, hv, hi32(pos), hi32(seq), hi32(table)
			g := a
			out := up(t, d, make([]float32, len(q)))
			g.Out, g.Q, g.K, g.V, g.Pos, g.Seq, g.Table = out, up(t, d, q), gk, gv, upI32(t, d, pos), upI32(t, d, seq), upI32(t, d, table)
			if c.sinks {
				s := randVec(r, c.heads)
				for i := range s {
					s[i] *= 4
				}
				h.Sinks, g.Sinks = hf32(s), up(t, d, s)
			}
			ref.Kernels{}.Attend(&h)
			d.Attend(&g)
			batch := down(d, out, len(q))
			if e := relL2(batch, want); e > 1e-5 {
				t.Fatalf("relative L2 error %g", e)
			}
			dim := c.heads * c.headDim
			for _, i := range []int{0, 2, len(pos) - 1} {
				one := g
				one.N, one.MaxPos = 1, int(pos[i])
				one.Out = up(t, d, make([]float32, dim))
				one.Q, one.Pos, one.Seq = up(t, d, q[i*dim:(i+1)*dim]), upI32(t, d, pos[i:i+1]), upI32(t, d, seq[i:i+1])
				d.Attend(&one)
				sameBits(t, fmt.Sprintf("token %d alone", i), down(d, one.Out, dim), batch[i*dim:(i+1)*dim])
			}
		})
	}
}

// TestRoPEYaRN: gpt-oss's YaRN rotation and a partial one against ref.
func TestRoPEYaRN(t *testing.T) {
	d := device(t)
	r := rand.New(rand.NewPCG(18, 18))
	pos := []int32{0, 1, 5, 77, 1000, 4095, 31000}
	n, heads, hd := len(pos), 4, 64
	for _, rp := range []kernels.Rope{
		{Dim: 64, Base: 150000, Neox: true, FreqScale: 1. / 32, ExtFactor: 1, Mscale: 1.3465736, Corr: [2]float32{8, 18}},
		kernels.PlainRope(32, 10000, true),
	} {
		x := randVec(r, n*heads*hd)
		want := slices.Clone(x)
		ref.Kernels{}.RoPE(hf32(want), hi32(pos), n, heads, hd, rp)
		gx := up(t, d, x)
		d.RoPE(gx, upI32(t, d, pos), n, heads, hd, rp)
		if e := maxAbs(down(d, gx, len(x)), want); e > 2e-6 {
			t.Errorf("%+v: max error %g", rp, e)
		}
	}
}

// TestMoEOps: MatMulGroups (each group's bits those of its own product),
// WeightedSum and SwiGLUOAI against ref.
func TestMoEOps(t *testing.T) {
	d := device(t)
	r := rand.New(rand.NewPCG(19, 19))
	for _, typ := range []quant.Type{quant.F32, quant.Q8_0, quant.Q4_K} {
		const rows, cols = 40, 256
		var hws, gws []*kernels.Matrix
		for range 4 {
			h, g := matrices(t, d, r, typ, rows, cols)
			hws, gws = append(hws, h), append(gws, g)
		}
		start := []int{0, 9, 9, 10, 19}
		n := start[4]
		x := randVec(r, n*cols)
		gout := up(t, d, make([]float32, n*rows))
		d.MatMulGroups(gout, up(t, d, x), gws, start)
		got := down(d, gout, n*rows)
		for g := range gws {
			m := start[g+1] - start[g]
			if m == 0 {
				continue
			}
			one := up(t, d, make([]float32, m*rows))
			d.MatMul(one, up(t, d, x[start[g]*cols:start[g+1]*cols]), m, gws[g])
			sameBits(t, fmt.Sprintf("%v group %d", typ, g), got[start[g]*rows:start[g+1]*rows], down(d, one, m*rows))
			want := make([]float32, m*rows)
			ref.Kernels{}.MatMul(hf32(want), hf32(x[start[g]*cols:start[g+1]*cols]), m, hws[g])
			if e := relL2(got[start[g]*rows:start[g+1]*rows], want); e > 1e-5 {
				t.Errorf("%v group %d: relative L2 error %g from ref", typ, g, e)
			}
		}
	}
	const n, k, width, rows = 7, 3, 72, 20
	src, w, base := randVec(r, rows*width), randVec(r, n*k), randVec(r, n*width)
	idx := make([]int32, n*k)
	for i := range idx {
		idx[i] = int32(r.IntN(rows))
	}
	want := slices.Clone(base)
	ref.Kernels{}.WeightedSum(hf32(want), hf32(src), hi32(idx), hf32(w), n, k, width)
	gd := up(t, d, base)
	d.WeightedSum(gd, up(t, d, src), upI32(t, d, idx), up(t, d, w), n, k, width)
	sameBits(t, "WeightedSum", down(d, gd, n*width), want)

	g, u := randVec(r, 5000), randVec(r, 5000)
	for i := range g {
		g[i] *= 20
		u[i] *= 20
	}
	wantG := slices.Clone(g)
	ref.Kernels{}.SwiGLUOAI(hf32(wantG), hf32(u), len(g), 1.702, 7)
	gg := up(t, d, g)
	d.SwiGLUOAI(gg, up(t, d, u), len(g), 1.702, 7)
	if e := maxAbs(down(d, gg, len(g)), wantG); e > 1e-5 {
		t.Errorf("SwiGLUOAI: max error %g", e)
	}
}

// TestMoEModels: each mixture-of-experts family's small model gives the
// reference device's logits (every token of a prompt) and the CPU's greedy
// ids on the GPU.
func TestMoEModels(t *testing.T) {
	d := device(t)
	for _, arch := range []string{"qwen3moe", "glm4moe", "gpt-oss"} {
		t.Run(arch, func(t *testing.T) {
			o := model.SynthOptions{Arch: arch, Layers: 2, Dim: 64, Heads: 4, KVHeads: 2, FF: 128, Type: quant.F32, Seed: 9}
			model.DefaultMoE(&o)
			if arch == "gpt-oss" {
				o.SlidingWindow = 6
			}
			ids := []int{1, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100}
			synthAgrees(t, d, o, ids, 12)
		})
	}
}
