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

// recRuns are a step's sequences: slot, first position, tokens.
type recRuns []struct{ slot, pos, n int }

func (rs recRuns) host() (start, slot, pos []int32, n int) {
	for _, r := range rs {
		start, slot = append(start, int32(n)), append(slot, int32(r.slot))
		for i := 0; i < r.n; i++ {
			pos = append(pos, int32(r.pos+i))
		}
		n += r.n
	}
	return append(start, int32(n)), slot, pos, n
}

var recCases = []recRuns{
	{{0, 0, 40}},                         // fresh: two whole chunks of 16, then steps
	{{1, 5, 30}},                         // from a state, starting mid-chunk
	{{2, 16, 1}},                         // a decode step
	{{0, 0, 17}, {2, 32, 16}, {1, 3, 2}}, // several sequences
}

// TestConvAndGates: the convolution, GeGLU, the sigmoid gate and Scale
// give ref's bits.
func TestConvAndGates(t *testing.T) {
	d := device(t)
	r := rand.New(rand.NewPCG(31, 31))
	for _, rs := range recCases {
		for _, ch := range []int{8, 300} {
			start, slot, pos, n := rs.host()
			stride := 3*ch + 11
			x, w, st := randVec(r, n*ch), randVec(r, ch*4), randVec(r, 3*stride)
			want := make([]float32, n*ch)
			hs := slices.Clone(st)
			ref.Kernels{}.Conv(&kernels.Conv{Out: hf32(want), X: hf32(x), W: hf32(w), State: hf32(hs), StateStride: stride, StateOff: 4,
				Runs: &kernels.Runs{N: len(rs), Start: hi32(start), Slot: hi32(slot), Pos: hi32(pos)}, Channels: ch, Width: 4, N: n})
			out, gs := up(t, d, make([]float32, n*ch)), up(t, d, st)
			d.Conv(&kernels.Conv{Out: out, X: up(t, d, x), W: up(t, d, w), State: gs, StateStride: stride, StateOff: 4,
				Runs: &kernels.Runs{N: len(rs), Start: upI32(t, d, start), Slot: upI32(t, d, slot), Pos: upI32(t, d, pos)}, Channels: ch, Width: 4, N: n})
			sameBits(t, fmt.Sprintf("conv %v %d", rs, ch), down(d, out, n*ch), want)
			sameBits(t, fmt.Sprintf("conv state %v %d", rs, ch), down(d, gs, len(st)), hs)
		}
	}
	g, u := randVec(r, 3000), randVec(r, 3000)
	for i := range g {
		g[i] *= 4
	}
	want := slices.Clone(g)
	ref.Kernels{}.GELUMul(hf32(want), hf32(u), len(g))
	gb := up(t, d, g)
	d.GELUMul(gb, up(t, d, u), len(g))
	sameBits(t, "GELUMul", down(d, gb, len(g)), want)
	for _, per := range []int{1, 64} {
		want := slices.Clone(g)
		ref.Kernels{}.SigmoidMul(hf32(want), hf32(u), len(g), per)
		gb := up(t, d, g)
		d.SigmoidMul(gb, up(t, d, u), len(g), per)
		sameBits(t, fmt.Sprintf("SigmoidMul per %d", per), down(d, gb, len(g)), want)
	}
	want = slices.Clone(g)
	ref.Kernels{}.Scale(hf32(want), len(g), 1.7)
	gb = up(t, d, g)
	d.Scale(gb, len(g), 1.7)
	sameBits(t, "Scale", down(d, gb, len(g)), want)
}

// deltaOn runs the delta rule of one case on device k over its own copies
// of the inputs (uploaded by put), returning the outputs and the states.
func deltaOn(k kernels.Kernels, put func([]float32) *kernels.Buffer, puti func([]int32) *kernels.Buffer, read func(*kernels.Buffer, int) []float32,
	rs recRuns, in map[string][]float32, kh, vh, dim int, tiled bool) (out, state []float32) {
	start, slot, pos, n := rs.host()
	o, st := put(make([]float32, n*vh*dim)), put(in["state"])
	k.DeltaNet(&kernels.DeltaNet{Out: o, X: put(in["x"]), Alpha: put(in["alpha"]), Beta: put(in["beta"]), DT: put(in["dt"]), A: put(in["a"]),
		State: st, StateStride: vh*dim*dim + 7, StateOff: 5, Runs: &kernels.Runs{N: len(rs), Start: puti(start), Slot: puti(slot), Pos: puti(pos)},
		KHeads: kh, VHeads: vh, Dim: dim, Tiled: tiled, Chunk: 16, Eps: 1e-6, N: n})
	return read(o, n*vh*dim), read(st, len(in["state"]))
}

// TestDeltaNet: the device's delta rule within 1e-5 of ref's float64
// (outputs and states; runs fresh and resumed, chunks whole and cut), and
// a run's bits the same alone as in a batch.
func TestDeltaNet(t *testing.T) {
	d := device(t)
	r := rand.New(rand.NewPCG(32, 32))
	put := func(v []float32) *kernels.Buffer { return up(t, d, v) }
	puti := func(v []int32) *kernels.Buffer { return upI32(t, d, v) }
	read := func(b *kernels.Buffer, n int) []float32 { return down(d, b, n) }
	hput := func(v []float32) *kernels.Buffer { return hf32(slices.Clone(v)) }
	hread := func(b *kernels.Buffer, n int) []float32 { return kernels.HostF32(b)[:n] }
	for _, rs := range recCases {
		for _, c := range []struct {
			kh, vh, dim int
			tiled       bool
		}{{2, 4, 32, true}, {1, 2, 64, false}} {
			_, _, _, n := rs.host()
			in := map[string][]float32{"x": randVec(r, n*(2*c.kh+c.vh)*c.dim), "alpha": randVec(r, n*c.vh), "beta": randVec(r, n*c.vh),
				"dt": randVec(r, c.vh), "a": randVec(r, c.vh), "state": randVec(r, 3*(c.vh*c.dim*c.dim+7))}
			for i := range in["a"] {
				in["a"][i] = -0.1 - 0.5*in["a"][i]*in["a"][i]
			}
			for i := range in["state"] {
				in["state"][i] *= 0.1
			}
			wo, ws := deltaOn(ref.Kernels{}, hput, hi32, hread, rs, in, c.kh, c.vh, c.dim, c.tiled)
			go_, gs := deltaOn(d, put, puti, read, rs, in, c.kh, c.vh, c.dim, c.tiled)
			if e := relL2(go_, wo); e > 1e-5 {
				t.Errorf("%v %+v: outputs relative L2 %.2g", rs, c, e)
			}
			if e := relL2(gs, ws); e > 1e-5 {
				t.Errorf("%v %+v: states relative L2 %.2g", rs, c, e)
			}
		}
	}
	// The middle run of the batch alone.
	rs := recCases[3]
	_, _, _, n := rs.host()
	kh, vh, dim := 2, 4, 32
	w := (2*kh + vh) * dim
	in := map[string][]float32{"x": randVec(r, n*w), "alpha": randVec(r, n*vh), "beta": randVec(r, n*vh),
		"dt": randVec(r, vh), "a": randVec(r, vh), "state": randVec(r, 3*(vh*dim*dim+7))}
	for i := range in["a"] {
		in["a"][i] = -0.2
	}
	bo, bs := deltaOn(d, put, puti, read, rs, in, kh, vh, dim, true)
	alone := map[string][]float32{"x": in["x"][17*w : 33*w], "alpha": in["alpha"][17*vh : 33*vh], "beta": in["beta"][17*vh : 33*vh],
		"dt": in["dt"], "a": in["a"], "state": in["state"]}
	ao, as := deltaOn(d, put, puti, read, recRuns{rs[1]}, alone, kh, vh, dim, true)
	sameBits(t, "a run alone", ao, bo[17*vh*dim:33*vh*dim])
	s := vh*dim*dim + 7
	sameBits(t, "its state alone", as[2*s:3*s], bs[2*s:3*s])
}

// TestHybridModels: each hybrid family's small model gives the reference
// device's logits (every token of a prompt longer than two blocks) and
// the CPU's greedy ids on the GPU.
func TestHybridModels(t *testing.T) {
	d := device(t)
	for _, arch := range []string{"gemma3", "qwen35", "qwen35moe", "qwen3next"} {
		t.Run(arch, func(t *testing.T) {
			o := model.SynthOptions{Arch: arch, Layers: 4, Dim: 64, Heads: 2, KVHeads: 1, FF: 128, Type: quant.F32, Seed: 9}
			model.DefaultMoE(&o)
			if arch == "gemma3" {
				o.Layers, o.SlidingWindow = 6, 6
			}
			var ids []int
			for i := 0; i < 37; i++ {
				ids = append(ids, 3+(i*37)%250)
			}
			synthAgrees(t, d, o, ids, 8)
		})
	}
}
