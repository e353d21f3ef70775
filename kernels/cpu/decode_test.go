package cpu

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"jspark/kernels"
	"jspark/kernels/quant"
)

// BenchmarkDecodeTile: one token through a matrix that stays in one core's
// L2 (~0.5-1 MB packed), on one thread: the one-token tiles' compute rate
// as GB/s of packed weights per CPU second, the most a core could stream
// (decode at the memory limit wants it well above that limit per core).
func BenchmarkDecodeTile(b *testing.B) {
	r := rand.New(rand.NewPCG(11, 11))
	k := New(1)
	for _, typ := range quant.WeightTypes() {
		if !k.usePacked(typ) || typ == quant.F32 {
			continue
		}
		w := matrix(r, typ, 512, 2048)
		x, dst := f32(randVec(r, 2048)), f32(make([]float32, 512))
		b.Run(typ.String(), func(b *testing.B) {
			k.MatMul(dst, x, 1, w) // packs
			p, _ := k.packedOf(w)
			c0 := cpuTime()
			for b.Loop() {
				k.MatMul(dst, x, 1, w)
			}
			b.ReportMetric(float64(len(p.data))*float64(b.N)/(cpuTime()-c0).Seconds()/1e9, "GB/cpu-s")
		})
	}
}

// BenchmarkDecodeLayers: one token through the products of a model's
// layers (stacked q|k|v, o, stacked gate|up, down), as GB/s of weights
// read per wall second (packed bytes): what decode's products reach, dispatch and small
// matrices included, beside DecodeBandwidth's one large matrix. Each
// iteration also reads the same packed bytes with read512 (as
// ReadBandwidth does), so "%read" is decode's rate against the machine's
// in the same seconds, on the same pages, both per CPU second: the ratio
// a busy machine, whose bandwidth and free cores move from run to run,
// distorts least. The 1B shape runs 8
// layers (25-50 MB each), the 8B 4 (230 MB each in Q8_0).
func BenchmarkDecodeLayers(b *testing.B) {
	type shape struct {
		name                string
		dim, ff, kv, layers int
		types               []quant.Type
	}
	for _, sh := range []shape{
		{"", 2048, 5632, 512, 8, []quant.Type{quant.Q8_0, quant.Q4_K, quant.Q6_K}},
		{"8B-", 4096, 14336, 1024, 4, []quant.Type{quant.Q8_0, quant.Q4_K}},
	} {
		for _, typ := range sh.types {
			b.Run(sh.name+typ.String(), func(b *testing.B) {
				ws := decodeLayers(typ, sh.dim, sh.ff, sh.kv, sh.layers)
				k := New(0)
				ps := make([]*packed, len(ws))
				bytes := 0
				for i, w := range ws {
					ps[i], _ = k.packedOf(w)
					bytes += len(ps[i].data)
				}
				x := f32(randVec(rand.New(rand.NewPCG(12, 12)), sh.ff))
				dst := f32(make([]float32, 2*sh.ff))
				var dec, decCPU, readCPU time.Duration
				var sink atomic.Uint32
				for b.Loop() {
					c0, t0 := cpuTime(), time.Now()
					for _, w := range ws {
						k.MatMul(dst, x, 1, w)
					}
					c1 := cpuTime()
					dec, decCPU = dec+time.Since(t0), decCPU+c1-c0
					for _, p := range ps {
						readAll(k, p.data, &sink)
					}
					readCPU += cpuTime() - c1
				}
				gb := float64(bytes) * float64(b.N) / 1e9
				b.ReportMetric(gb/dec.Seconds(), "GB/s")
				b.ReportMetric(gb/decCPU.Seconds()*float64(k.Threads()), "GB/cpu-s")
				b.ReportMetric(100*readCPU.Seconds()/decCPU.Seconds(), "%read")
				b.ReportMetric(float64(b.N*sh.layers)/dec.Seconds(), "layers/s")
			})
		}
	}
}

// decodeLayers returns layers × a layer's products of typ (tiled: each
// shape's rows repeat those of one small random matrix; every matrix
// packs into its own memory), layer by layer as a forward reads them.
func decodeLayers(typ quant.Type, dim, ff, kv, layers int) []*kernels.Matrix {
	r := rand.New(rand.NewPCG(12, 12))
	var ws []*kernels.Matrix
	for _, s := range [][2]int{{dim + 2*kv, dim}, {dim, dim}, {2 * ff, dim}, {dim, ff}} {
		src := tiledMatrix(r, typ, s[0], s[1])
		for range layers {
			w := *src
			w.Buf = kernels.NewHostBuffer(typ, s[0]*s[1], src.Data)
			ws = append(ws, &w)
		}
	}
	order := make([]*kernels.Matrix, 0, len(ws))
	for l := range layers {
		for s := range 4 {
			order = append(order, ws[s*layers+l])
		}
	}
	return order
}

// readAll reads b (but for under 512 bytes) with read512 on k's pool, in
// pieces of 4 streams.
func readAll(k *Kernels, b []byte, sink *atomic.Uint32) {
	const piece = 1 << 20
	n := (len(b) + piece - 1) / piece
	k.pool.runSized(n, len(b), funcRunner(func(_, i int) {
		size := min(piece, len(b)-i*piece) &^ 511
		if size > 0 {
			sink.Add(read512(&b[i*piece], size/4, size/4))
		}
	}))
}

// tiledMatrix is a rows × cols matrix of typ whose rows repeat those of a
// small random one: quantizing tens of millions of values would take
// longer than the benchmark.
func tiledMatrix(r *rand.Rand, typ quant.Type, rows, cols int) *kernels.Matrix {
	const tile = 64
	small := matrix(r, typ, tile, cols)
	rb := typ.RowBytes(cols)
	data := make([]byte, rows*rb)
	for i := 0; i < rows; i += tile {
		copy(data[i*rb:], small.Data)
	}
	return &kernels.Matrix{Type: typ, Rows: rows, Cols: cols, Data: data, Buf: kernels.NewHostBuffer(typ, rows*cols, data)}
}
