package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"jspark/kernels"
	"jspark/kernels/quant"
	"jspark/kernels/ref"
)

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = r.Float32()*2 - 1
	}
	return v
}

func matrix(r *rand.Rand, t quant.Type, rows, cols int) *kernels.Matrix {
	data := quant.Quantize(t, randVec(r, rows*cols))
	return &kernels.Matrix{Type: t, Rows: rows, Cols: cols, Data: data, Buf: kernels.NewHostBuffer(t, rows*cols, data)}
}

// f32 wraps v as a host buffer sharing its memory.
func f32(v []float32) *kernels.Buffer {
	return kernels.NewHostBuffer(quant.F32, len(v), kernels.F32Bytes(v))
}

func i32(v []int32) *kernels.Buffer {
	return kernels.NewHostBuffer(quant.I32, len(v), kernels.I32Bytes(v))
}

// q8Round returns x as the quantized activations the integer path sees.
func q8Round(x []float32) []float32 {
	q := make([]int8, len(x))
	d := make([]float32, len(x)/quant.Q8Block)
	s := make([]int32, len(d))
	quant.QuantizeQ8(x, q, d, s)
	out := make([]float32, len(x))
	for i := range out {
		out[i] = d[i/quant.Q8Block] * float32(q[i])
	}
	return out
}

func relL2(got, want []float32) float64 {
	var num, den float64
	for i := range got {
		d := float64(got[i] - want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / math.Max(den, 1e-30))
}

// isas are the instruction sets this machine can run, best first.
func isas() []isa {
	var out []isa
	for i := bestISA; i >= isaGo; i-- {
		if i.usable() {
			out = append(out, i)
		}
	}
	return out
}

// TestMatMulMatchesReference: every type on every instruction set, with
// batches that fill and miss the 4-token tiles and the 64-token blocks,
// rows that miss the 12-row blocks, and K with and without a vector tail.
func TestMatMulMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, is := range isas() {
		k := newISA(3, is)
		for _, typ := range quant.WeightTypes() {
			cols := []int{512, 768}
			if typ.BlockElems() == 1 {
				cols = append(cols, 172, 8)
			}
			for _, c := range cols {
				for _, n := range []int{1, 3, 6, 70} {
					t.Run(fmt.Sprintf("%v/%v/k%d/n%d", is, typ, c, n), func(t *testing.T) {
						w := matrix(r, typ, 45, c)
						x := randVec(r, n*w.Cols)
						got := make([]float32, n*w.Rows)
						want := make([]float32, n*w.Rows)
						k.MatMul(f32(got), f32(x), n, w)
						ref.Kernels{}.MatMul(f32(want), f32(x), n, w)
						bound := 1e-6
						if intPath(typ) {
							// Activations are quantized to 8 bits first (as
							// llama.cpp does): against float activations the
							// error is that of Q8 activations; against the
							// quantized activations, float rounding only.
							if e := relL2(got, want); e > 1e-2 {
								t.Fatalf("relative L2 error %g against float activations", e)
							}
							ref.Kernels{}.MatMul(f32(want), f32(q8Round(x)), n, w)
							bound = 2e-6
						}
						if e := relL2(got, want); e > bound {
							t.Fatalf("relative L2 error %g", e)
						}
					})
				}
			}
		}
	}
}

// TestBatchInvariant: a token's output bits do not depend on the batch, the
// tile it falls in or the thread count.
func TestBatchInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	for _, is := range isas() {
		for _, typ := range quant.WeightTypes() {
			w := matrix(r, typ, 70, 768)
			const n = 71
			x := randVec(r, n*w.Cols)
			all := make([]float32, n*w.Rows)
			newISA(3, is).MatMul(f32(all), f32(x), n, w)
			k := newISA(1, is)
			for tok := 0; tok < n; tok += 5 {
				one := make([]float32, w.Rows)
				k.MatMul(f32(one), f32(x[tok*w.Cols:(tok+1)*w.Cols]), 1, w)
				for i := range one {
					if one[i] != all[tok*w.Rows+i] {
						t.Fatalf("%v %v token %d row %d: %v alone, %v in batch", is, typ, tok, i, one[i], all[tok*w.Rows+i])
					}
				}
			}
		}
	}
}

func attention(r *rand.Rand, n, heads, kvHeads, headDim, bs int) *kernels.Attention {
	kvDim := kvHeads * headDim
	blocks := (n + bs - 1) / bs
	// Scatter the blocks to prove the table is honoured.
	table := make([]int32, blocks)
	for i := range table {
		table[i] = int32(blocks - 1 - i)
	}
	pos, seq := make([]int32, n), make([]int32, n)
	for i := range pos {
		pos[i] = int32(i)
	}
	return &kernels.Attention{
		Q: f32(randVec(r, n*heads*headDim)), Out: f32(make([]float32, n*heads*headDim)),
		K: f32(randVec(r, blocks*bs*kvDim)), V: f32(randVec(r, blocks*bs*kvDim)),
		Pos: i32(pos), Seq: i32(seq), Table: i32(table), TableStride: blocks, MaxPos: n - 1,
		BlockSize: bs, Heads: heads, KVHeads: kvHeads, HeadDim: headDim,
		Scale: float32(1 / math.Sqrt(float64(headDim))), N: n,
	}
}

// toF16 re-encodes an F32 pool buffer as F16.
func toF16(b *kernels.Buffer) *kernels.Buffer {
	data := quant.Quantize(quant.F16, kernels.HostF32(b))
	return kernels.NewHostBuffer(quant.F16, b.Len, data)
}

func TestAttendMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	// Head dims 8 (the fixed-size path), 24 (inlined dot), 16, 64 and 128
	// (fused, AVX-512); block sizes that do and do not divide the length,
	// and one wider than a 16-slot step; F32 and F16 keys and values.
	for _, is := range isas() {
		for _, c := range []struct{ n, heads, kvHeads, headDim, bs int }{
			{50, 8, 2, 16, 16}, {77, 8, 8, 8, 16}, {33, 4, 2, 8, 5}, {40, 4, 1, 64, 16},
			{70, 4, 2, 128, 32}, {21, 2, 2, 64, 7}, {19, 3, 1, 24, 16}, {45, 2, 1, 96, 16}, {38, 2, 2, 32, 24},
			// grouped queries: 4 and 8 heads a KV head, stepped together
			{37, 8, 2, 64, 16}, {29, 16, 2, 64, 16}, {35, 8, 2, 128, 16}, {26, 12, 2, 32, 16},
		} {
			for _, kv := range []quant.Type{quant.F32, quant.F16} {
				a := attention(r, c.n, c.heads, c.kvHeads, c.headDim, c.bs)
				if kv == quant.F16 {
					a.K, a.V = toF16(a.K), toF16(a.V)
				}
				newISA(3, is).Attend(a)
				got := append([]float32(nil), kernels.HostF32(a.Out)...)
				ref.Kernels{}.Attend(a)
				if e := relL2(got, kernels.HostF32(a.Out)); e > 2e-6 {
					t.Errorf("%v %v %+v: relative L2 error %g", is, kv, c, e)
				}
			}
		}
	}
}

// TestAttendBatchInvariant: a query's output bits are the same alone and in
// a batch with other queries of its sequence.
func TestAttendBatchInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	// Head widths with one-query and several-query steps (64: 4 at once,
	// 128: 2) and the any-width step (24, 8); blocks that hold a 16-slot
	// chunk, and 7 and 24 that cut chunks short; runs longer than one
	// qBlock; F32 and F16 keys and values.
	for _, c := range []struct{ n, heads, kvHeads, hd, bs int }{
		{40, 4, 2, 64, 16}, {77, 2, 1, 128, 24}, {50, 2, 2, 64, 7}, {45, 3, 1, 24, 16}, {33, 2, 2, 8, 16}, {70, 2, 2, 96, 32},
		// grouped queries, whose heads step together alone (decode) and
		// one by one in a batch: 4 (of 64 wide), 8, 4 (of 128), 6 (of 32)
		{40, 8, 2, 64, 16}, {35, 16, 2, 64, 16}, {34, 8, 2, 128, 24}, {34, 12, 2, 32, 16},
	} {
		for _, kv := range []quant.Type{quant.F32, quant.F16} {
			for _, is := range isas() {
				a := attention(r, c.n, c.heads, c.kvHeads, c.hd, c.bs)
				if kv == quant.F16 {
					a.K, a.V = toF16(a.K), toF16(a.V)
				}
				k := newISA(2, is)
				k.Attend(a)
				all := append([]float32(nil), kernels.HostF32(a.Out)...)
				dim := a.Heads * a.HeadDim
				for _, tok := range []int{0, 17, 31, 32, 33, c.n - 1} {
					if tok >= c.n {
						continue
					}
					for d, v := range attendAlone(k, a, tok) {
						if v != all[tok*dim+d] {
							t.Fatalf("%v %+v %v token %d dim %d: %v alone, %v in batch", is, c, kv, tok, d, v, all[tok*dim+d])
						}
					}
				}
			}
		}
	}
}

// attendAlone is the output of a's token tok (of sequence 0, at position
// tok) attended as a batch of one.
func attendAlone(k *Kernels, a *kernels.Attention, tok int) []float32 {
	dim := a.Heads * a.HeadDim
	one := *a
	one.N, one.MaxPos = 1, tok
	one.Q = f32(kernels.HostF32(a.Q)[tok*dim : (tok+1)*dim])
	one.Out = f32(make([]float32, dim))
	one.Pos, one.Seq = i32([]int32{int32(tok)}), i32([]int32{0})
	k.Attend(&one)
	return kernels.HostF32(one.Out)
}

// TestQuantizeQ8: the activation quantizer gives quant.QuantizeQ8's bits on
// every ISA, zero blocks and ties included.
func TestQuantizeQ8(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	x := randVec(r, 32*40)
	clear(x[64:96]) // a zero block
	for i := 128; i < 160; i++ {
		x[i] = float32(i-144) * 0.5 // ties at every other element
	}
	n := len(x) / quant.Q8Block
	wq, wd, ws := make([]int8, len(x)), make([]float32, n), make([]int32, n)
	quant.QuantizeQ8(x, wq, wd, ws)
	for _, is := range isas() {
		q, d, s := make([]int8, len(x)), make([]float32, n), make([]int32, n)
		quantizeQ8(is, x, q, d, s)
		if !slices.Equal(q, wq) || !slices.Equal(d, wd) || !slices.Equal(s, ws) {
			t.Errorf("%v: quantized activations differ from quant.QuantizeQ8", is)
		}
	}
}

// TestElementwise: RoPE gives ref's bits; SiLUMul is within expf's error
// (up to ~8e-6 relative where e^-x is huge and the result tiny).
func TestElementwise(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	const n, heads, hd = 37, 4, 64
	pos := make([]int32, n)
	for i := range pos {
		pos[i] = int32(r.IntN(5000))
	}
	k := New(2)
	for _, neox := range []bool{false, true} {
		x := randVec(r, n*heads*hd)
		want := append([]float32(nil), x...)
		k.RoPE(f32(x), i32(pos), n, heads, hd, kernels.PlainRope(48, 10000, neox))
		ref.Kernels{}.RoPE(f32(want), i32(pos), n, heads, hd, kernels.PlainRope(48, 10000, neox))
		if !slices.Equal(x, want) {
			t.Errorf("neox %v: RoPE differs from ref", neox)
		}
	}
	g, u := randVec(r, 10000), randVec(r, 10000)
	for i := range g {
		g[i] *= 100
	}
	g[0], g[1] = -200, 200
	want := append([]float32(nil), g...)
	ref.Kernels{}.SiLUMul(f32(want), f32(u), len(g))
	for _, is := range isas() {
		got := append([]float32(nil), g[:len(g)-3]...) // a tail past the vectors
		newISA(2, is).SiLUMul(f32(got), f32(u), len(got))
		for i := range got {
			if d := math.Abs(float64(got[i] - want[i])); d > 1e-5*math.Abs(float64(want[i]))+1e-30 {
				t.Fatalf("%v: SiLUMul element %d: %v, ref %v", is, i, got[i], want[i])
			}
		}
	}
}

// TestDecodeAllocs: a decode step's kernels (one token's products of every
// weight type, its attention, plain and windowed with sinks) allocate
// nothing once scratch has grown.
func TestDecodeAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for _, is := range isas() {
		k := newISA(2, is)
		var ws []*kernels.Matrix
		for _, typ := range quant.WeightTypes() {
			ws = append(ws, matrix(r, typ, 96, 512))
		}
		x, dst := f32(randVec(r, 512)), f32(make([]float32, 96))
		a := attention(r, 40, 4, 2, 64, 16)
		one := *a
		one.N, one.MaxPos = 1, 39
		one.Pos, one.Seq = i32([]int32{39}), i32([]int32{0})
		// A sliding window with sinks (gpt-oss, gemma3), over an F16 pool too.
		win := one
		windowed(r, &win, 20, true)
		win16 := win
		win16.K, win16.V = toF16(a.K), toF16(a.V)
		step := func() {
			for _, w := range ws {
				k.MatMul(dst, x, 1, w)
			}
			k.Attend(&one)
			k.Attend(&win)
			k.Attend(&win16)
		}
		step()
		if n := testing.AllocsPerRun(20, step); n != 0 {
			t.Errorf("%v: %v allocations per decode step", is, n)
		}
	}
}

// BenchmarkDecodeBandwidth: one token through a 64 MiB matrix, twice the
// L3, as GB/s of weights read per wall second (the packed form's bytes
// on AVX-512, which differ from the file's by at most 3%).
func BenchmarkDecodeBandwidth(b *testing.B) {
	r := rand.New(rand.NewPCG(8, 8))
	for _, typ := range []quant.Type{quant.F32, quant.F16, quant.Q8_0, quant.Q4_0, quant.Q4_K, quant.Q6_K,
		quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.IQ4_NL, quant.MXFP4, quant.Q2_K, quant.Q3_K, quant.Q5_K, quant.IQ4_XS} {
		rows := (64 << 20) / typ.RowBytes(1024) / groupRows * groupRows
		// the matrix is made inside Run: quantizing 64M values takes a
		// while, and -bench picks a few types
		b.Run(typ.String(), func(b *testing.B) {
			w := matrix(r, typ, rows, 1024)
			x, dst := f32(randVec(r, 1024)), f32(make([]float32, rows))
			k := New(0)
			k.MatMul(dst, x, 1, w) // packs
			c0 := cpuTime()
			for b.Loop() {
				k.MatMul(dst, x, 1, w)
			}
			bytes := float64(len(w.Data)) * float64(b.N)
			b.ReportMetric(bytes/b.Elapsed().Seconds()/1e9, "GB/s")
			b.ReportMetric(bytes/(cpuTime()-c0).Seconds()/1e9*float64(k.Threads()), "GB/cpu-s")
		})
	}
}

func BenchmarkMatMul(b *testing.B) {
	r := rand.New(rand.NewPCG(4, 4))
	k := New(0)
	for _, typ := range quant.WeightTypes() {
		w := matrix(r, typ, 1024, 1024)
		for _, n := range []int{1, 64} {
			x := randVec(r, n*w.Cols)
			dst := make([]float32, n*w.Rows)
			b.Run(fmt.Sprintf("%v/n%d", typ, n), func(b *testing.B) {
				c0 := cpuTime()
				for b.Loop() {
					k.MatMul(f32(dst), f32(x), n, w)
				}
				flops := 2 * float64(n*w.Rows*w.Cols) * float64(b.N)
				b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				// On a shared machine wall time counts other processes'
				// time; CPU time per core does not.
				b.ReportMetric(flops/(cpuTime()-c0).Seconds()/1e9*float64(k.Threads()), "GFLOP/cpu-s")
			})
		}
	}
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestExpf(t *testing.T) {
	// Rounding t = x·log2(e) to float32 costs up to ~5e-6 relative at |x| near
	// 87; near 0, where softmax weights matter, the polynomial's 2e-7 shows.
	for _, c := range []struct{ lo, bound float64 }{{-87, 8e-6}, {-8, 1e-6}} {
		worst := 0.0
		for x := float32(c.lo); x <= 0; x += 0.00137 {
			want := math.Exp(float64(x))
			worst = max(worst, math.Abs(float64(expf(x))-want)/want)
		}
		if worst > c.bound {
			t.Errorf("x in [%g, 0]: worst relative error %g, bound %g", c.lo, worst, c.bound)
		}
	}
	if expf(-100) != 0 || expf(0) != 1 {
		t.Errorf("edges: %g %g", expf(-100), expf(0))
	}
}

// BenchmarkReadBandwidth: the machine's read bandwidth as the kernels see
// it, what decode's weight streaming is measured against: read512 (zmm
// loads from 4 streams a thread, nothing else) over 256 MiB on huge pages
// (as packed weights are), far past the caches, in 16 MiB pieces across
// the pool's threads.
func BenchmarkReadBandwidth(b *testing.B) {
	if !hasAsm {
		b.Skip("no assembly here")
	}
	const size, pieces = 256 << 20, 16
	k := New(0)
	b32, _ := k.Alloc(quant.F32, size/4) // on huge pages, as packed weights are
	buf := kernels.HostBytes(b32)
	for i := range buf {
		buf[i] = byte(i)
	}
	var sink atomic.Uint32
	const piece = size / pieces
	run := funcRunner(func(w, i int) { sink.Add(read512(&buf[i*piece], piece/4, piece/4)) })
	c0 := cpuTime()
	for b.Loop() {
		k.pool.runSized(pieces, size, run)
	}
	b.ReportMetric(float64(size)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
	b.ReportMetric(float64(size)*float64(b.N)/(cpuTime()-c0).Seconds()/1e9*float64(k.Threads()), "GB/cpu-s")
}

// BenchmarkAttendDecode: one token's attention over a long context (the
// 1B shape's 32 query heads of 64 over 8 KV heads), KV F32 and F16, as
// GB/s of keys and values read (GB/cpu-s: per second of the process's CPU
// time, times the threads, what a busy machine distorts least); "split"
// reads every slot once, a task per segment of positions, "grouped" a
// task per KV head (each KV head's strip of every slot), "per-head" a KV
// head once per query head; "-nopf" without prefetching the next chunk.
func BenchmarkAttendDecode(b *testing.B) {
	r := rand.New(rand.NewPCG(9, 9))
	for _, ctx := range []int{8192, 32768} {
		for _, kv := range []quant.Type{quant.F32, quant.F16} {
			a := attention(r, ctx, 32, 8, 64, 16)
			if kv == quant.F16 {
				a.K, a.V = toF16(a.K), toF16(a.V)
			}
			dim := a.Heads * a.HeadDim
			one := *a
			one.N, one.MaxPos = 1, ctx-1
			one.Q = f32(kernels.HostF32(a.Q)[(ctx-1)*dim:])
			one.Out = f32(make([]float32, dim))
			one.Pos, one.Seq = i32([]int32{int32(ctx - 1)}), i32([]int32{0})
			k := New(0)
			for _, how := range []string{"split", "split-nopf", "grouped", "grouped-nopf", "per-head"} {
				b.Run(fmt.Sprintf("ctx%d/%v/%s", ctx, kv, how), func(b *testing.B) {
					noSplit, oneHeadPerTask = strings.HasPrefix(how, "grouped"), how == "per-head"
					noPrefetch = strings.HasSuffix(how, "-nopf")
					defer func() { noSplit, oneHeadPerTask, noPrefetch = false, false, false }()
					c0 := cpuTime()
					for b.Loop() {
						k.Attend(&one)
					}
					bytes := float64(a.K.Bytes()+a.V.Bytes()) * float64(b.N)
					b.ReportMetric(bytes/b.Elapsed().Seconds()/1e9, "GB/s")
					b.ReportMetric(bytes/(cpuTime()-c0).Seconds()/1e9*float64(k.Threads()), "GB/cpu-s")
				})
			}
		}
	}
}

// TestParseISA: JSPARK_ISA's values, in any case; a set this CPU lacks or
// an unknown name is an error that names the variable.
func TestParseISA(t *testing.T) {
	for _, c := range []struct {
		in   string
		want isa
		err  bool
	}{{"", bestISA, false}, {"go", isaGo, false}, {"GO", isaGo, false}, {"sse4", bestISA, true}} {
		got, err := parseISA(c.in)
		if got != c.want || (err != nil) != c.err {
			t.Errorf("parseISA(%q) = %v, %v; want %v, error %v", c.in, got, err, c.want, c.err)
		}
		if err != nil && !strings.Contains(err.Error(), ISAEnv) {
			t.Errorf("parseISA(%q): %v does not name %s", c.in, err, ISAEnv)
		}
	}
	if bestISA >= isaAVX2 {
		if got, err := parseISA("avx2"); got != isaAVX2 || err != nil {
			t.Errorf("parseISA(avx2) = %v, %v", got, err)
		}
	}
	if bestISA < isaAVX512 {
		if _, err := parseISA("avx512"); err == nil {
			t.Errorf("parseISA(avx512) on a %v CPU: no error", bestISA)
		}
	}
	// avxvnni: taken exactly where the CPU has AVX-VNNI, whatever else
	// it has (AVX-512 does not imply it)
	got, err := parseISA("AVXVNNI")
	if hasAVXVNNI != (err == nil) || (err == nil) != (got == isaAVXVNNI) {
		t.Errorf("parseISA(AVXVNNI) = %v, %v on a CPU with AVX-VNNI %v", got, err, hasAVXVNNI)
	}
	if hasAVXVNNI && bestISA < isaAVXVNNI {
		t.Errorf("AVX-VNNI CPU: best %v", bestISA)
	}
}
