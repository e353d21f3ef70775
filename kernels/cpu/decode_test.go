package cpu

import (
	"math/rand/v2"
	"testing"

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

// BenchmarkDecodeLayers: one token through 8 layers of the 1B shape's
// products (dim 2048, ff 5632, GQA 32/8: stacked q|k|v, o, stacked
// gate|up, down), 25-50 MB a layer, as GB/s of weights read per wall
// second: what decode's products reach, dispatch and small matrices
// included, beside DecodeBandwidth's one large matrix.
func BenchmarkDecodeLayers(b *testing.B) {
	const dim, ff, kv, layers = 2048, 5632, 512, 8
	shapes := [][2]int{{dim + 2*kv, dim}, {dim, dim}, {2 * ff, dim}, {dim, ff}}
	r := rand.New(rand.NewPCG(12, 12))
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_K, quant.Q6_K} {
		b.Run(typ.String(), func(b *testing.B) {
			k := New(0)
			var ws []*kernels.Matrix
			bytes := 0
			for range layers {
				for _, s := range shapes {
					w := tiledMatrix(r, typ, s[0], s[1])
					k.Prepare(w)
					ws = append(ws, w)
					bytes += len(w.Data)
				}
			}
			x := f32(randVec(r, ff))
			dst := f32(make([]float32, 2*ff))
			c0 := cpuTime()
			for b.Loop() {
				for _, w := range ws {
					k.MatMul(dst, x, 1, w)
				}
			}
			b.ReportMetric(float64(bytes)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			b.ReportMetric(float64(bytes)*float64(b.N)/(cpuTime()-c0).Seconds()/1e9*float64(k.Threads()), "GB/cpu-s")
			b.ReportMetric(float64(b.N*layers)/b.Elapsed().Seconds(), "layers/s")
		})
	}
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
