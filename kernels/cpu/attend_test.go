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

// fusedISAs are the instruction sets of this machine with fused
// attention steps of their own, whose segments the tests cross (the
// portable path attends each query whole; AVX-VNNI runs AVX2's steps).
func fusedISAs() []isa {
	var out []isa
	for _, is := range isas() {
		if is != isaGo && is != isaAVXVNNI {
			out = append(out, is)
		}
	}
	return out
}

// withSegment runs f with attention segments of about seg positions.
func withSegment(seg int, f func()) {
	defer func(was int) { attnSegment = was }(attnSegment)
	attnSegment = seg
	f()
}

// tail is the attention of n of a's tokens from from on alone (a's keys,
// values and table; its own queries and outputs), as a later step of the
// sequence.
func tail(a *kernels.Attention, from, n int) *kernels.Attention {
	pos := make([]int, n)
	for i := range pos {
		pos[i] = from + i
	}
	return pick(a, pos)
}

// pick is the attention of a's tokens at positions pos, in one batch.
func pick(a *kernels.Attention, pos []int) *kernels.Attention {
	dim := a.Heads * a.HeadDim
	one := *a
	one.N, one.MaxPos = len(pos), slices.Max(pos)
	q, p := make([]float32, 0, len(pos)*dim), make([]int32, len(pos))
	for i, x := range pos {
		q = append(q, kernels.HostF32(a.Q)[x*dim:(x+1)*dim]...)
		p[i] = int32(x)
	}
	one.Q, one.Out = f32(q), f32(make([]float32, len(pos)*dim))
	one.Pos, one.Seq = i32(p), i32(make([]int32, len(pos)))
	return &one
}

// TestAttendSegmentsInvariant: with short segments (many boundaries), a
// query's bits are the same computed in a prefill run (one task folds its
// segments as it goes), alone or in a short run (a task per segment,
// folded afterwards), on one thread or three; and the result is the
// reference's. On each instruction set with fused steps: AVX-512's (head
// widths of multiples of 16), AVX2's (multiples of 8, on AVX-512 machines
// too: 8, 24, 40, 136).
func TestAttendSegmentsInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 21))
	for _, is := range fusedISAs() {
		for _, c := range []struct{ n, heads, kvHeads, hd, bs, window int }{
			{100, 8, 2, 64, 16, 0}, {90, 32, 8, 64, 16, 0}, {77, 2, 1, 128, 24, 0}, {70, 4, 2, 64, 7, 0},
			{60, 3, 1, 16, 16, 0}, {85, 4, 4, 128, 32, 0}, {90, 12, 2, 32, 16, 0},
			{100, 4, 2, 64, 16, 40}, {90, 16, 2, 64, 16, 20}, {77, 2, 1, 128, 24, 33}, {70, 4, 2, 64, 16, 200},
			// widths with AVX2 steps only: one at a time and 4 together
			// (8: the embedded model's; 24), 2 together (40; 72, its value
			// sums in two blocks), any width (136); and 256 (AVX2's fixed
			// step, AVX-512's any-width one)
			{90, 8, 4, 8, 16, 0}, {70, 6, 2, 24, 16, 0}, {77, 4, 1, 40, 24, 0}, {100, 2, 1, 136, 16, 0},
			{70, 4, 2, 72, 16, 0}, {100, 4, 2, 256, 16, 0},
			{90, 8, 4, 8, 16, 20}, {70, 6, 2, 24, 7, 33},
		} {
			if is != bestISA && c.hd%16 != 0 {
				continue // the AVX2 steps, as on the best ISA
			}
			for _, kv := range []quant.Type{quant.F32, quant.F16} {
				sinks := c.window > 0 // gpt-oss's layers have both
				t.Run(fmt.Sprintf("%v/%+v/%v", is, c, kv), func(t *testing.T) {
					withSegment(32, func() { checkSegments(t, r, is, c.n, c.heads, c.kvHeads, c.hd, c.bs, c.window, kv, sinks) })
				})
			}
		}
	}
}

func checkSegments(t *testing.T, r *rand.Rand, is isa, n, heads, kvHeads, hd, bs, window int, kv quant.Type, sinks bool) {
	a := windowed(r, attention(r, n, heads, kvHeads, hd, bs), window, sinks)
	if kv == quant.F16 {
		a.K, a.V = toF16(a.K), toF16(a.V)
	}
	newISA(2, is).Attend(a)
	all := append([]float32(nil), kernels.HostF32(a.Out)...)
	ref.Kernels{}.Attend(a)
	if e := relL2(all, kernels.HostF32(a.Out)); e > 2e-6 {
		t.Errorf("relative L2 error %g against the reference", e)
	}
	dim := a.Heads * a.HeadDim
	for _, threads := range []int{1, 3} {
		k := newISA(threads, is)
		for _, run := range []struct{ from, n int }{{n - 1, 1}, {n - 3, 3}, {n - 4, 4}, {40, 2}, {31, 1}, {32, 1}, {0, 1}} {
			one := tail(a, run.from, run.n)
			k.Attend(one)
			if got, want := kernels.HostF32(one.Out), all[run.from*dim:(run.from+run.n)*dim]; !slices.Equal(got, want) {
				t.Fatalf("%d threads, tokens %d..%d alone differ from in the batch", threads, run.from, run.from+run.n-1)
			}
		}
		// One batch of a decode token (split), a prefill chunk across a
		// boundary (whole) and two drafted tokens (split).
		pos := []int{n - 1}
		for p := 20; p < 45; p++ {
			pos = append(pos, p)
		}
		pos = append(pos, n-11, n-10)
		mixed := pick(a, pos)
		k.Attend(mixed)
		for i, p := range pos {
			if got := kernels.HostF32(mixed.Out)[i*dim : (i+1)*dim]; !slices.Equal(got, all[p*dim:(p+1)*dim]) {
				t.Fatalf("%d threads, token %d in a mixed batch differs", threads, p)
			}
		}
	}
}

// TestAttendSegmentsLong: at the real segment length, the last tokens of
// 2,100 positions (three segments) give the same bits one by one (split)
// as in one run (folded as it goes), and the reference's result: on
// each instruction set with fused steps, head widths 64 and (AVX2's
// steps) 8.
func TestAttendSegmentsLong(t *testing.T) {
	r := rand.New(rand.NewPCG(22, 22))
	for _, is := range fusedISAs() {
		for _, c := range []struct{ heads, kvHeads, hd int }{{8, 2, 64}, {8, 4, 8}} {
			if is != bestISA && c.hd%16 != 0 {
				continue // the AVX2 steps, as on the best ISA
			}
			for _, kv := range []quant.Type{quant.F32, quant.F16} {
				const n, last = 2100, 6
				a := attention(r, n, c.heads, c.kvHeads, c.hd, 16)
				if kv == quant.F16 {
					a.K, a.V = toF16(a.K), toF16(a.V)
				}
				run := tail(a, n-last, last)
				k := newISA(2, is)
				k.Attend(run)
				all := append([]float32(nil), kernels.HostF32(run.Out)...)
				ref.Kernels{}.Attend(run)
				if e := relL2(all, kernels.HostF32(run.Out)); e > 2e-6 {
					t.Errorf("%v %+v %v: relative L2 error %g against the reference", is, c, kv, e)
				}
				dim := a.Heads * a.HeadDim
				for i := range last {
					one := tail(a, n-last+i, 1)
					k.Attend(one)
					if !slices.Equal(kernels.HostF32(one.Out), all[i*dim:(i+1)*dim]) {
						t.Fatalf("%v %+v %v: token %d alone differs from in its run", is, c, kv, n-last+i)
					}
				}
			}
		}
	}
}

// BenchmarkAttendPrefill: 512 tokens' attention in one batch (pp512's)
// on each instruction set, as tokens a second: the 1B shape (32 query
// heads of 64 over 8 KV heads), the embedded stories260K's (8 heads of 8
// over 4) and 8 heads of 256 over 4 (Gemma 3's width); KV F16 and F32.
func BenchmarkAttendPrefill(b *testing.B) {
	r := rand.New(rand.NewPCG(23, 23))
	for _, c := range []struct {
		name               string
		heads, kvHeads, hd int
	}{{"1b", 32, 8, 64}, {"hd8", 8, 4, 8}, {"hd256", 8, 4, 256}} {
		for _, kv := range []quant.Type{quant.F16, quant.F32} {
			const n = 512
			a := attention(r, n, c.heads, c.kvHeads, c.hd, 16)
			if kv == quant.F16 {
				a.K, a.V = toF16(a.K), toF16(a.V)
			}
			for _, is := range isas() {
				k := newISA(0, is)
				b.Run(fmt.Sprintf("%s/%v/%v", c.name, kv, is), func(b *testing.B) {
					for b.Loop() {
						k.Attend(a)
					}
					b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
				})
			}
		}
	}
}
