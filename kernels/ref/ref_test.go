package ref

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"jspark/kernels"
	"jspark/kernels/quant"
)

func f32(v []float32) *kernels.Buffer {
	return kernels.NewHostBuffer(quant.F32, len(v), kernels.F32Bytes(v))
}

func i32(v []int32) *kernels.Buffer {
	return kernels.NewHostBuffer(quant.I32, len(v), kernels.I32Bytes(v))
}

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// oneSeq is attention of n tokens at positions 0..n-1 of one sequence, its
// slots in order (one block).
func oneSeq(r *rand.Rand, n, heads, kvHeads, hd int) *kernels.Attention {
	pos := make([]int32, n)
	for i := range pos {
		pos[i] = int32(i)
	}
	kv := n * kvHeads * hd
	return &kernels.Attention{Q: f32(randVec(r, n*heads*hd)), Out: f32(make([]float32, n*heads*hd)),
		K: f32(randVec(r, kv)), V: f32(randVec(r, kv)), Pos: i32(pos), Seq: i32(make([]int32, n)),
		Table: i32([]int32{0}), TableStride: 1, MaxPos: n - 1, BlockSize: n,
		Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: 0.25, N: n}
}

func TestAttendWindowAndSinks(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n, heads, kvHeads, hd = 12, 4, 2, 8
	a := oneSeq(r, n, heads, kvHeads, hd)
	Kernels{}.Attend(a)
	full := append([]float32(nil), kernels.HostF32(a.Out)...)

	a.Window = n // covers every position: no change
	Kernels{}.Attend(a)
	if !slices.Equal(kernels.HostF32(a.Out), full) {
		t.Error("a window as long as the context changed the output")
	}
	a.Window = 1 // only itself: the token's own values
	Kernels{}.Attend(a)
	for i := 0; i < n; i++ {
		for h := 0; h < heads; h++ {
			got := kernels.HostF32(a.Out)[(i*heads+h)*hd:][:hd]
			want := kernels.HostF32(a.V)[(i*kvHeads+h/2)*hd:][:hd]
			if !slices.Equal(got, want) {
				t.Fatalf("window 1, token %d head %d: %v, want its own values %v", i, h, got, want)
			}
		}
	}
	// Window 3 equals full attention over a sequence that starts 2 back.
	a.Window = 3
	Kernels{}.Attend(a)
	b := oneSeq(r, 3, heads, kvHeads, hd)
	kvw := kvHeads * hd
	copy(kernels.HostF32(b.K), kernels.HostF32(a.K)[(n-3)*kvw:])
	copy(kernels.HostF32(b.V), kernels.HostF32(a.V)[(n-3)*kvw:])
	copy(kernels.HostF32(b.Q), kernels.HostF32(a.Q)[(n-3)*heads*hd:])
	Kernels{}.Attend(b)
	if got, want := kernels.HostF32(a.Out)[(n-1)*heads*hd:], kernels.HostF32(b.Out)[2*heads*hd:]; !slices.Equal(got, want) {
		t.Errorf("window 3: last token %v, want %v", got, want)
	}

	// A sink far below every score changes nothing measurable; a sink s
	// over one key weighs its value by e^x/(e^x+e^s).
	a.Window = 0
	a.Sinks = f32([]float32{-1e4, -1e4, -1e4, -1e4})
	Kernels{}.Attend(a)
	if !slices.Equal(kernels.HostF32(a.Out), full) {
		t.Error("a sink of -1e4 changed the output")
	}
	a.Sinks = f32([]float32{0.5, -1, 2, 0})
	Kernels{}.Attend(a)
	q, k, v := kernels.HostF32(a.Q), kernels.HostF32(a.K), kernels.HostF32(a.V)
	for h := 0; h < heads; h++ {
		var x float64
		for d := 0; d < hd; d++ {
			x += float64(q[h*hd+d]) * float64(k[(h/2)*hd+d])
		}
		x *= float64(a.Scale)
		s := float64(kernels.HostF32(a.Sinks)[h])
		w := math.Exp(x) / (math.Exp(x) + math.Exp(s))
		for d := 0; d < hd; d++ {
			want := w * float64(v[(h/2)*hd+d])
			if got := float64(kernels.HostF32(a.Out)[h*hd+d]); math.Abs(got-want) > 1e-6 {
				t.Fatalf("sink, token 0 head %d: %v, want %v", h, got, want)
			}
		}
	}
}

// TestRopeYaRN: the angles against ggml's formula in float64, and a
// rope without scaling equals the plain one.
func TestRopeYaRN(t *testing.T) {
	const dim, base = 64, 150000.
	fs, ext := 1./32, 1.
	// ggml_rope_yarn_corr_dims for n_ctx_orig 4096, beta 32 and 1.
	corr := func(beta float64) float64 {
		return dim * math.Log(4096/(beta*2*math.Pi)) / (2 * math.Log(base))
	}
	lo, hi := math.Max(0, math.Floor(corr(32))), math.Min(dim-1, math.Ceil(corr(1)))
	mscale := 1 + 0.1*math.Log(1/fs)
	r := kernels.Rope{Dim: dim, Base: base, Neox: true, FreqScale: float32(fs), ExtFactor: float32(ext), Mscale: float32(mscale), Corr: [2]float32{float32(lo), float32(hi)}}
	cs, sn := make([]float32, dim/2), make([]float32, dim/2)
	for _, pos := range []int{0, 1, 17, 4095, 30000} {
		RopeAngles(cs, sn, pos, r)
		for i := range cs {
			theta := float64(pos) * math.Pow(base, -2*float64(i)/dim)
			y := (float64(i) - lo) / math.Max(0.001, hi-lo)
			mix := (1 - math.Min(1, math.Max(0, y))) * ext
			th := fs*theta*(1-mix) + theta*mix
			// θ is carried in float32 over i steps, as ggml does: at
			// 30000 the angle itself is off by ~2e-7 relative per step.
			tol := 1e-6 + 3e-7*float64(i)*math.Abs(th)
			if math.Abs(float64(cs[i])-math.Cos(th)*mscale) > tol || math.Abs(float64(sn[i])-math.Sin(th)*mscale) > tol {
				t.Fatalf("pos %d pair %d: (%v, %v), want (%v, %v)", pos, i, cs[i], sn[i], math.Cos(th)*mscale, math.Sin(th)*mscale)
			}
		}
	}
	plain := kernels.PlainRope(dim, 10000, false)
	x := randVec(rand.New(rand.NewPCG(3, 4)), 2*dim)
	y := append([]float32(nil), x...)
	scaled := plain
	scaled.Corr = [2]float32{3, 9} // no effect without ExtFactor
	Kernels{}.RoPE(f32(x), i32([]int32{77}), 1, 2, dim, plain)
	Kernels{}.RoPE(f32(y), i32([]int32{77}), 1, 2, dim, scaled)
	if !slices.Equal(x, y) {
		t.Error("correction dims without ExtFactor changed the rotation")
	}
}

func TestSwiGLUOAI(t *testing.T) {
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	for _, c := range []struct{ g, u float32 }{{10, 10}, {-3, -9}, {0.5, 0.25}, {-100, 2}, {7, -7}} {
		x := math.Min(float64(c.g), 7)
		y := math.Max(math.Min(float64(c.u), 7), -7)
		want := x * sig(1.702*x) * (y + 1)
		if got := float64(SwiGLUOAI(c.g, c.u, 1.702, 7)); math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
			t.Errorf("SwiGLUOAI(%v, %v) = %v, want %v", c.g, c.u, got, want)
		}
	}
}

func TestWeightedSumAndGroups(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	src := randVec(r, 5*4)
	dst := []float32{1, 1, 1, 1, 2, 2, 2, 2}
	Kernels{}.WeightedSum(f32(dst), f32(src), i32([]int32{4, 0, 2, 2}), f32([]float32{0.5, 0.25, 1, -1}), 2, 2, 4)
	for i := 0; i < 4; i++ {
		if want := 1 + (0.5*src[16+i] + 0.25*src[i]); dst[i] != want {
			t.Fatalf("row 0 col %d: %v, want %v", i, dst[i], want)
		}
		if dst[4+i] != 2 {
			t.Fatalf("row 1 col %d: %v, want 2 (a row minus itself)", i, dst[4+i])
		}
	}
	w := func(v float32) *kernels.Matrix {
		d := quant.Quantize(quant.F32, []float32{v, 0, 0, v})
		return &kernels.Matrix{Type: quant.F32, Rows: 2, Cols: 2, Data: d, Buf: kernels.NewHostBuffer(quant.F32, 4, d)}
	}
	x := []float32{1, 2, 3, 4, 5, 6}
	out := make([]float32, 6)
	Kernels{}.MatMulGroups(f32(out), f32(x), []*kernels.Matrix{w(2), w(9), w(-1)}, []int{0, 1, 1, 3})
	if want := []float32{2, 4, -3, -4, -5, -6}; !slices.Equal(out, want) {
		t.Errorf("MatMulGroups: %v, want %v", out, want)
	}
}
