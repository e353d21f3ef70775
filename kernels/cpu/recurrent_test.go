package cpu

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"jspark/kernels"
	"jspark/kernels/ref"
)

// recRun is one sequence of a recurrent test step: its slot, its first
// position and its tokens.
type recRun struct{ slot, pos, n int }

// runsOf builds the step's runs and positions.
func runsOf(runs []recRun) (*kernels.Runs, int) {
	var start, slot, pos []int32
	n := 0
	for _, r := range runs {
		start, slot = append(start, int32(n)), append(slot, int32(r.slot))
		for i := 0; i < r.n; i++ {
			pos = append(pos, int32(r.pos+i))
		}
		n += r.n
	}
	start = append(start, int32(n))
	return &kernels.Runs{N: len(runs), Start: i32(start), Slot: i32(slot), Pos: i32(pos)}, n
}

// deltaCase is a DeltaNet call over runs, its state of slots sequences
// random (the runs that start at 0 must ignore it).
func deltaCase(r *rand.Rand, runs []recRun, kh, vh, d, chunk, slots int, tiled bool) *kernels.DeltaNet {
	rs, n := runsOf(runs)
	stride := vh*d*d + 7 // an offset and a stride not of the state's own size
	state := randVec(r, slots*stride)
	for i := range state {
		state[i] *= 0.1
	}
	alpha, a := randVec(r, n*vh), randVec(r, vh)
	for i := range a {
		a[i] = -0.1 - 0.5*a[i]*a[i]
	}
	return &kernels.DeltaNet{Out: f32(make([]float32, n*vh*d)), X: f32(randVec(r, n*(2*kh+vh)*d)), Alpha: f32(alpha),
		Beta: f32(randVec(r, n*vh)), DT: f32(randVec(r, vh)), A: f32(a), State: f32(state), StateStride: stride, StateOff: 5,
		Runs: rs, KHeads: kh, VHeads: vh, Dim: d, Tiled: tiled, Chunk: chunk, Eps: 1e-6, N: n}
}

func cloneDelta(d *kernels.DeltaNet) *kernels.DeltaNet {
	c := *d
	c.Out = f32(make([]float32, d.Out.Len))
	c.State = f32(slices.Clone(kernels.HostF32(d.State)))
	return &c
}

var deltaRuns = [][]recRun{
	{{0, 0, 40}},                         // fresh: two whole chunks of 16, then steps
	{{1, 5, 30}},                         // from a state, starting mid-chunk: steps, one chunk, steps
	{{2, 16, 1}},                         // a decode step
	{{0, 0, 17}, {2, 32, 16}, {1, 3, 2}}, // several sequences
}

// TestDeltaNetMatchesReference: the CPU's float32 delta rule (chunked and
// stepped) is ref's within float rounding, outputs and states, on runs
// fresh and resumed, whole chunks and parts, grouped and tiled heads.
func TestDeltaNetMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 21))
	for _, runs := range deltaRuns {
		for _, c := range []struct {
			kh, vh, d int
			tiled     bool
		}{{2, 4, 32, true}, {2, 4, 32, false}, {1, 1, 64, false}, {2, 2, 16, true}} {
			t.Run(fmt.Sprintf("%v/%+v", runs, c), func(t *testing.T) {
				in := deltaCase(r, runs, c.kh, c.vh, c.d, 16, 3, c.tiled)
				want := cloneDelta(in)
				ref.Kernels{}.DeltaNet(want)
				for _, is := range isas() {
					got := cloneDelta(in)
					newISA(3, is).DeltaNet(got)
					if e := relL2(kernels.HostF32(got.Out), kernels.HostF32(want.Out)); e > 1e-5 {
						t.Errorf("%v outputs: relative L2 %.2g", is, e)
					}
					if e := relL2(kernels.HostF32(got.State), kernels.HostF32(want.State)); e > 1e-5 {
						t.Errorf("%v states: relative L2 %.2g", is, e)
					}
				}
			})
		}
	}
}

// TestDeltaNetBatchInvariant: a sequence's outputs and state have the same
// bits alone and beside others, on 1 thread or 3, on every instruction
// set.
func TestDeltaNetBatchInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(22, 22))
	in := deltaCase(r, []recRun{{0, 0, 17}, {2, 32, 40}, {1, 3, 2}}, 2, 4, 32, 16, 3, true)
	for _, is := range isas() {
		all, alone := cloneDelta(in), cloneDelta(in)
		// The middle run alone: its rows of X, Alpha, Beta and Out.
		vh, d, w := all.VHeads, all.Dim, (2*all.KHeads+all.VHeads)*all.Dim
		alone.Runs, alone.N = &kernels.Runs{N: 1, Start: i32([]int32{0, 40}), Slot: i32([]int32{2}), Pos: i32(kernels.HostI32(all.Runs.Pos)[17:57])}, 40
		alone.X = f32(kernels.HostF32(all.X)[17*w : 57*w])
		alone.Alpha, alone.Beta = f32(kernels.HostF32(all.Alpha)[17*vh:57*vh]), f32(kernels.HostF32(all.Beta)[17*vh:57*vh])
		alone.Out = f32(make([]float32, 40*vh*d))
		newISA(3, is).DeltaNet(all)
		newISA(1, is).DeltaNet(alone)
		if !slices.Equal(kernels.HostF32(alone.Out), kernels.HostF32(all.Out)[17*vh*d:57*vh*d]) {
			t.Errorf("%v: outputs differ alone and in the batch", is)
		}
		s := all.StateStride
		if !slices.Equal(kernels.HostF32(alone.State)[2*s:3*s], kernels.HostF32(all.State)[2*s:3*s]) {
			t.Errorf("%v: states differ alone and in the batch", is)
		}
	}
}

// TestConvMatchesReference: the convolution is ref's bit for bit, and a
// run's rows the same alone and in a batch.
func TestConvMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 23))
	for _, runs := range deltaRuns {
		for _, ch := range []int{8, 300, 600} {
			rs, n := runsOf(runs)
			stride := 3*ch + 11
			c := &kernels.Conv{Out: f32(make([]float32, n*ch)), X: f32(randVec(r, n*ch)), W: f32(randVec(r, ch*4)),
				State: f32(randVec(r, 3*stride)), StateStride: stride, StateOff: 4, Runs: rs, Channels: ch, Width: 4, N: n}
			want := *c
			want.Out, want.State = f32(make([]float32, n*ch)), f32(slices.Clone(kernels.HostF32(c.State)))
			New(3).Conv(c)
			ref.Kernels{}.Conv(&want)
			if !slices.Equal(kernels.HostF32(c.Out), kernels.HostF32(want.Out)) || !slices.Equal(kernels.HostF32(c.State), kernels.HostF32(want.State)) {
				t.Errorf("%v, %d channels: differs from ref", runs, ch)
			}
		}
	}
}

// TestGatesMatchReference: GELUMul and SigmoidMul are ref's bit for bit.
func TestGatesMatchReference(t *testing.T) {
	r := rand.New(rand.NewPCG(24, 24))
	for _, n := range []int{1, 100, 9000} {
		g, u := randVec(r, n), randVec(r, n)
		got, want := f32(slices.Clone(g)), f32(slices.Clone(g))
		New(3).GELUMul(got, f32(u), n)
		ref.Kernels{}.GELUMul(want, f32(u), n)
		if !slices.Equal(kernels.HostF32(got), kernels.HostF32(want)) {
			t.Errorf("GELUMul %d differs", n)
		}
		for _, per := range []int{1, 7} {
			got, want := f32(slices.Clone(g)), f32(slices.Clone(g))
			New(3).SigmoidMul(got, f32(u), n, per)
			ref.Kernels{}.SigmoidMul(want, f32(u), n, per)
			if !slices.Equal(kernels.HostF32(got), kernels.HostF32(want)) {
				t.Errorf("SigmoidMul %d per %d differs", n, per)
			}
		}
	}
}

func BenchmarkDeltaNet(b *testing.B) {
	r := rand.New(rand.NewPCG(25, 25))
	for _, c := range []struct{ n, chunk int }{{1, 16}, {512, 16}, {512, 1}, {512, 64}} {
		b.Run(fmt.Sprintf("tokens%d/chunk%d", c.n, c.chunk), func(b *testing.B) {
			d := deltaCase(r, []recRun{{0, 16, c.n}}, 16, 32, 128, c.chunk, 1, true)
			k := New(0)
			for b.Loop() {
				k.DeltaNet(d)
			}
			b.ReportMetric(float64(c.n*b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}
