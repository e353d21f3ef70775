//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"jspark/kernels"
	"jspark/kernels/quant"
	"jspark/kernels/ref"
)

// NOTE: gorgonia.org/cu's init() exits the process when the machine has no
// GPU, so this file's binary only runs on one (scripts/gpu-check.sh builds
// it anywhere and runs it on the device machine). A GPU that will not start
// skips every test with the driver's reason.
var (
	dev    *Device
	devErr error
)

func TestMain(m *testing.M) {
	dev, devErr = New(0)
	if devErr == nil {
		fmt.Fprintf(os.Stderr, "kernels/cuda: testing on %s\n", dev.Name())
	}
	os.Exit(m.Run())
}

func device(t testing.TB) *Device {
	t.Helper()
	if devErr != nil {
		t.Skipf("no usable GPU: %v", devErr)
	}
	return dev
}

var weightTypes = quant.WeightTypes()

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = r.Float32()*2 - 1
	}
	return v
}

// host buffers for the reference, sharing the slices' memory.
func hf32(v []float32) *kernels.Buffer {
	return kernels.NewHostBuffer(quant.F32, len(v), kernels.F32Bytes(v))
}
func hi32(v []int32) *kernels.Buffer {
	return kernels.NewHostBuffer(quant.I32, len(v), kernels.I32Bytes(v))
}

// up puts host values on the device.
func up(t testing.TB, d *Device, v []float32) *kernels.Buffer {
	t.Helper()
	b, err := d.Alloc(quant.F32, len(v))
	if err != nil {
		t.Fatal(err)
	}
	d.Write(b, 0, kernels.F32Bytes(v))
	t.Cleanup(func() { d.Free(b) })
	return b
}

func upI32(t testing.TB, d *Device, v []int32) *kernels.Buffer {
	t.Helper()
	b, err := d.Alloc(quant.I32, max(len(v), 1))
	if err != nil {
		t.Fatal(err)
	}
	d.Write(b, 0, kernels.I32Bytes(v))
	t.Cleanup(func() { d.Free(b) })
	return b
}

func down(d *Device, b *kernels.Buffer, n int) []float32 {
	v := make([]float32, n)
	d.Read(kernels.F32Bytes(v), b, 0)
	return v
}

// matrices returns the same random weights for the host and the device.
func matrices(t testing.TB, d *Device, r *rand.Rand, typ quant.Type, rows, cols int) (host, gpu *kernels.Matrix) {
	t.Helper()
	data := quant.Quantize(typ, randVec(r, rows*cols))
	host = &kernels.Matrix{Name: "w", Type: typ, Rows: rows, Cols: cols, Data: data, Buf: kernels.NewHostBuffer(typ, rows*cols, data)}
	buf, err := d.Upload(typ, rows*cols, data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Free(buf) })
	gpu = &kernels.Matrix{Name: "w", Type: typ, Rows: rows, Cols: cols, Data: data, Buf: buf}
	return host, gpu
}

func relL2(got, want []float32) float64 {
	var num, den float64
	for i := range got {
		e := float64(got[i] - want[i])
		num += e * e
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / math.Max(den, 1e-30))
}

func maxAbs(got, want []float32) float64 {
	var m float64
	for i := range got {
		m = math.Max(m, math.Abs(float64(got[i]-want[i])))
	}
	return m
}

// sameBits reports the first element whose bits differ.
func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: element %d is %v, want %v (bit for bit)", what, i, got[i], want[i])
		}
	}
}

// TestMatMulMatchesReference: every weight type, batches of one, of a
// partial tile and of several tiles, row counts that miss the 4-row blocks,
// and float rows with a tail shorter than a 32-element chunk.
func TestMatMulMatchesReference(t *testing.T) {
	d := device(t)
	r := rand.New(rand.NewPCG(1, 1))
	for _, typ := range weightTypes {
		cols := []int{512, 768}
		if typ.BlockElems() == 1 {
			cols = append(cols, 172, 8)
		}
		for _, c := range cols {
			for _, n := range []int{1, 3, 8, 70} {
				t.Run(fmt.Sprintf("%v/k%d/n%d", typ, c, n), func(t *testing.T) {
					hw, gw := matrices(t, d, r, typ, 45, c)
					x := randVec(r, n*c)
					want := make([]float32, n*hw.Rows)
					ref.Kernels{}.MatMul(hf32(want), hf32(x), n, hw)
					dst := up(t, d, make([]float32, n*hw.Rows))
					d.MatMul(dst, up(t, d, x), n, gw)
					if e := relL2(down(d, dst, len(want)), want); e > 1e-6 {
						t.Fatalf("relative L2 error %g", e)
					}
				})
			}
		}
	}
}

// TestMatMulBatchInvariant: a token's row has the same bits alone, at any
// place in a tile, and in batches of any size.
func TestMatMulBatchInvariant(t *testing.T) {
	d := device(t)
	r := rand.New(rand.NewPCG(2, 2))
	for _, typ := range weightTypes {
		t.Run(typ.String(), func(t *testing.T) {
			const n, rows, cols = 19, 37, 512
			_, gw := matrices(t, d, r, typ, rows, cols)
			x := randVec(r, n*cols)
			all := up(t, d, make([]float32, n*rows))
			d.MatMul(all, up(t, d, x), n, gw)
			batch := down(d, all, n*rows)
			one := up(t, d, make([]float32, rows))
			for _, i := range []int{0, 7, 8, 18} {
				d.MatMul(one, up(t, d, x[i*cols:(i+1)*cols]), 1, gw)
				sameBits(t, fmt.Sprintf("token %d alone", i), down(d, one, rows), batch[i*rows:(i+1)*rows])
			}
			for _, m := range []int{2, 9, 17} {
				part := up(t, d, make([]float32, m*rows))
				d.MatMul(part, up(t, d, x[(n-m)*cols:]), m, gw)
				sameBits(t, fmt.Sprintf("last %d tokens", m), down(d, part, m*rows), batch[(n-m)*rows:])
			}
		})
	}
}

// TestEmbedMatchesReference: dequantized rows have the host's bits.
func TestEmbedMatchesReference(t *testing.T) {
	d := device(t)
	r := rand.New(rand.NewPCG(3, 3))
	for _, typ := range weightTypes {
		cols := []int{256, 512}
		if typ.BlockElems() == 1 {
			cols = append(cols, 172)
		}
		for _, c := range cols {
			t.Run(fmt.Sprintf("%v/k%d", typ, c), func(t *testing.T) {
				hw, gw := matrices(t, d, r, typ, 50, c)
				ids := []int32{3, 0, 49, 3, 17, 28, 1}
				want := make([]float32, len(ids)*c)
				ref.Kernels{}.Embed(hf32(want), hw, hi32(ids), len(ids))
				dst := up(t, d, make([]float32, len(want)))
				d.Embed(dst, gw, upI32(t, d, ids), len(ids))
				sameBits(t, "embedding", down(d, dst, len(want)), want)
			})
		}
	}
}

func TestRMSNormMatchesReference(t *testing.T) {
	d := device(t)
	r := rand.New(rand.NewPCG(4, 4))
	for _, dim := range []int{8, 64, 172, 4096} {
		t.Run(fmt.Sprint(dim), func(t *testing.T) {
			const n = 9
			x, w := randVec(r, n*dim), randVec(r, dim)
			want := make([]float32, n*dim)
			ref.Kernels{}.RMSNorm(hf32(want), hf32(x), hf32(w), n, dim, 1e-5)
			dst := up(t, d, make([]float32, n*dim))
			d.RMSNorm(dst, up(t, d, x), up(t, d, w), n, dim, 1e-5)
			if e := maxAbs(down(d, dst, len(want)), want); e > 1e-6 {
				t.Fatalf("max error %g", e)
			}
		})
	}
}

func TestRoPEMatchesReference(t *testing.T) {
	d := device(t)
	r := rand.New(rand.NewPCG(5, 5))
	for _, neox := range []bool{false, true} {
		for _, c := range []struct{ heads, headDim, ropeDim int }{{8, 8, 8}, {4, 64, 64}, {32, 128, 128}, {2, 128, 64}} {
			t.Run(fmt.Sprintf("neox=%v/h%d/d%d/r%d", neox, c.heads, c.headDim, c.ropeDim), func(t *testing.T) {
				pos := []int32{0, 1, 5, 77, 1000, 4095, 31000}
				n := len(pos)
				x := randVec(r, n*c.heads*c.headDim)
				want := slices.Clone(x)
				ref.Kernels{}.RoPE(hf32(want), hi32(pos), n, c.heads, c.headDim, kernels.PlainRope(c.ropeDim, 10000, neox))
				gx := up(t, d, x)
				d.RoPE(gx, upI32(t, d, pos), n, c.heads, c.headDim, kernels.PlainRope(c.ropeDim, 10000, neox))
				if e := maxAbs(down(d, gx, len(x)), want); e > 1e-6 {
					t.Fatalf("max error %g", e)
				}
			})
		}
	}
}

// TestElementwiseMatchesReference: SiLUMul, Add, AddBias, Gather and
// Scatter (F32 and F16 pools) against ref.
func TestElementwiseMatchesReference(t *testing.T) {
	d := device(t)
	r := rand.New(rand.NewPCG(6, 6))
	const n, dim = 7, 300
	a, b, bias := randVec(r, n*dim), randVec(r, n*dim), randVec(r, dim)
	check := func(name string, got, want []float32, tol float64) {
		t.Helper()
		if e := maxAbs(got, want); e > tol {
			t.Errorf("%s: max error %g", name, e)
		}
	}

	want := slices.Clone(a)
	ref.Kernels{}.SiLUMul(hf32(want), hf32(b), n*dim)
	g := up(t, d, a)
	d.SiLUMul(g, up(t, d, b), n*dim)
	check("SiLUMul", down(d, g, n*dim), want, 1e-6)

	want = slices.Clone(a)
	ref.Kernels{}.Add(hf32(want), hf32(b), n*dim)
	g = up(t, d, a)
	d.Add(g, up(t, d, b), n*dim)
	check("Add", down(d, g, n*dim), want, 0)

	want = slices.Clone(a)
	ref.Kernels{}.AddBias(hf32(want), hf32(bias), n, dim)
	g = up(t, d, a)
	d.AddBias(g, up(t, d, bias), n, dim)
	check("AddBias", down(d, g, n*dim), want, 0)

	rows := []int32{6, 0, 3, 3}
	want = make([]float32, len(rows)*dim)
	ref.Kernels{}.Gather(hf32(want), hf32(a), hi32(rows), len(rows), dim)
	g = up(t, d, make([]float32, len(want)))
	d.Gather(g, up(t, d, a), upI32(t, d, rows), len(rows), dim)
	check("Gather", down(d, g, len(want)), want, 0)

	slots := []int32{9, 2, 0, 5, 11, 4, 7}
	for _, typ := range []quant.Type{quant.F32, quant.F16} {
		host, err := kernels.HostMemory{}.Alloc(typ, 12*dim)
		if err != nil {
			t.Fatal(err)
		}
		ref.Kernels{}.Scatter(host, hf32(a), hi32(slots), n, dim)
		pool, err := d.Alloc(typ, 12*dim)
		if err != nil {
			t.Fatal(err)
		}
		d.Scatter(pool, up(t, d, a), upI32(t, d, slots), n, dim)
		got := make([]byte, typ.RowBytes(12*dim))
		d.Read(got, pool, 0)
		d.Free(pool)
		if !slices.Equal(got, kernels.HostBytes(host)) {
			t.Errorf("Scatter into %v: the pool's bytes differ from ref's", typ)
		}
	}
}

// attInputs builds a paged pool of three sequences whose blocks are
// scattered over the pool, and a batch mixing decode tokens and a prefill
// chunk. Long cases reach past one 256-position segment: a decode at 600
// and a prefill chunk across the segment boundary at 256.
type attCase struct {
	heads, kvHeads, headDim int
	pool                    quant.Type
	long                    bool
}

func attInputs(r *rand.Rand, c attCase) (a kernels.Attention, q []float32, k, v []float32, pos, seq, table []int32) {
	bs, stride := 16, 8 // 8 blocks a sequence: positions up to 127
	decode, prefill := int32(100), int32(40)
	if c.long {
		stride, decode, prefill = 40, 600, 245
	}
	kvDim := c.kvHeads * c.headDim
	slots := 3 * stride * bs
	k, v = randVec(r, slots*kvDim), randVec(r, slots*kvDim)
	for _, b := range r.Perm(3 * stride) {
		table = append(table, int32(b))
	}
	// Sequence 0 decodes, 1 decodes its first token, 2 runs a prefill chunk.
	pos, seq = []int32{decode, 0}, []int32{0, 1}
	for p := prefill; p < prefill+20; p++ {
		pos, seq = append(pos, p), append(seq, 2)
	}
	n := len(pos)
	q = randVec(r, n*c.heads*c.headDim)
	a = kernels.Attention{TableStride: stride, BlockSize: bs, Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.headDim,
		Scale: float32(1 / math.Sqrt(float64(c.headDim))), N: n, MaxPos: int(slices.Max(pos))}
	return a, q, k, v, pos, seq, table
}

// kvBuffers holds a pool's keys or values both on the host (for ref) and
// on the device, in the pool's type.
func kvBuffers(t *testing.T, d *Device, typ quant.Type, v []float32) (host, gpu *kernels.Buffer) {
	t.Helper()
	data := quant.Quantize(typ, v)
	host = kernels.NewHostBuffer(typ, len(v), data)
	gpu, err := d.Alloc(typ, len(v))
	if err != nil {
		t.Fatal(err)
	}
	d.Write(gpu, 0, data)
	t.Cleanup(func() { d.Free(gpu) })
	return host, gpu
}

func TestAttendMatchesReference(t *testing.T) {
	d := device(t)
	r := rand.New(rand.NewPCG(7, 7))
	for _, c := range []attCase{{8, 4, 8, quant.F32, false}, {8, 2, 64, quant.F32, false}, {32, 8, 128, quant.F32, false},
		{32, 8, 128, quant.F16, false}, {4, 4, 256, quant.F16, false}, {4, 2, 12, quant.F16, false}, {8, 4, 8, quant.F32, true}, {8, 2, 128, quant.F16, true}} {
		t.Run(fmt.Sprintf("h%d/kv%d/d%d/%v/long=%v", c.heads, c.kvHeads, c.headDim, c.pool, c.long), func(t *testing.T) {
			a, q, k, v, pos, seq, table := attInputs(r, c)
			hk, gk := kvBuffers(t, d, c.pool, k)
			hv, gv := kvBuffers(t, d, c.pool, v)
			want := make([]float32, len(q))
			h := a
			h.Out, h.Q, h.K, h.V, h.Pos, h.Seq, h.Table = hf32(want), hf32(q), hk, hv, hi32(pos), hi32(seq), hi32(table)
			ref.Kernels{}.Attend(&h)
			g := a
			out := up(t, d, make([]float32, len(q)))
			g.Out, g.Q, g.K, g.V, g.Pos, g.Seq, g.Table = out, up(t, d, q), gk, gv, upI32(t, d, pos), upI32(t, d, seq), upI32(t, d, table)
			d.Attend(&g)
			if e := relL2(down(d, out, len(q)), want); e > 1e-5 {
				t.Fatalf("relative L2 error %g", e)
			}
		})
	}
}

// TestAttendBatchInvariant: each token's output alone has the bits it has
// in the mixed batch, and in a batch run in small groups of (token, head)
// pairs.
func TestAttendBatchInvariant(t *testing.T) {
	for _, long := range []bool{false, true} {
		t.Run(fmt.Sprintf("long=%v", long), func(t *testing.T) { testAttendBatchInvariant(t, long) })
	}
}

func testAttendBatchInvariant(t *testing.T, long bool) {
	d := device(t)
	r := rand.New(rand.NewPCG(8, 8))
	c := attCase{32, 8, 128, quant.F16, long}
	a, q, k, v, pos, seq, table := attInputs(r, c)
	_, gk := kvBuffers(t, d, c.pool, k)
	_, gv := kvBuffers(t, d, c.pool, v)
	dim := c.heads * c.headDim
	g := a
	out := up(t, d, make([]float32, len(q)))
	gTable := upI32(t, d, table)
	g.Out, g.Q, g.K, g.V, g.Pos, g.Seq, g.Table = out, up(t, d, q), gk, gv, upI32(t, d, pos), upI32(t, d, seq), gTable
	d.Attend(&g)
	batch := down(d, out, len(q))
	for _, i := range []int{0, 1, 2, 13, len(pos) - 1} {
		one := g
		one.N, one.MaxPos = 1, int(pos[i])
		one.Out = up(t, d, make([]float32, dim))
		one.Q, one.Pos, one.Seq = up(t, d, q[i*dim:(i+1)*dim]), upI32(t, d, pos[i:i+1]), upI32(t, d, seq[i:i+1])
		d.Attend(&one)
		sameBits(t, fmt.Sprintf("token %d alone", i), down(d, one.Out, dim), batch[i*dim:(i+1)*dim])
	}
	defer func(s int) { attScratch = s }(attScratch)
	attScratch = 7 * (a.MaxPos/attSeg + 1) * (c.headDim + 2) // 7 pairs a group
	g.Out = up(t, d, make([]float32, len(q)))
	d.Attend(&g)
	sameBits(t, "the batch in groups of 7 pairs", down(d, g.Out, len(q)), batch)
}

func TestArgmaxAndSoftmax(t *testing.T) {
	d := device(t)
	r := rand.New(rand.NewPCG(9, 9))
	const n, width = 5, 32000
	x := randVec(r, n*width)
	x[1*width+7], x[1*width+9000] = 3, 3 // a tie: the lower index wins
	x[3*width+width-1] = 2
	ids := upI32(t, d, make([]int32, n))
	gx := up(t, d, x)
	d.Argmax(ids, gx, n, width)
	got := make([]int32, n)
	d.Read(kernels.I32Bytes(got), ids, 0)
	for i := range n {
		row := x[i*width : (i+1)*width]
		want := 0
		for j, v := range row {
			if v > row[want] {
				want = j
			}
		}
		if int(got[i]) != want {
			t.Errorf("row %d: argmax %d, want %d", i, got[i], want)
		}
	}

	d.Softmax(gx, n, width)
	p := down(d, gx, n*width)
	for i := range n {
		row := x[i*width : (i+1)*width]
		m := slices.Max(row)
		var sum float64
		for _, v := range row {
			sum += math.Exp(float64(v - m))
		}
		for j, v := range row {
			want := math.Exp(float64(v-m)) / sum
			if e := math.Abs(float64(p[i*width+j]) - want); e > 1e-6*want+1e-12 {
				t.Fatalf("row %d, %d: p = %g, want %g", i, j, p[i*width+j], want)
			}
		}
	}
}

// TestUploadRefusesUnknownTypes: a weight type without kernels fails at
// load, naming the type.
func TestUploadRefusesUnknownTypes(t *testing.T) {
	d := device(t)
	if _, err := d.Upload(quant.Type(99), 32, make([]byte, 1024)); err == nil {
		t.Fatal("Upload of an unknown type succeeded")
	}
}
