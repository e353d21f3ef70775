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
// layers (q, k, v, o, stacked gate|up, down; q|k|v stacked where one type),
// as GB/s of weights read per wall second (packed bytes): what decode's
// products reach, dispatch and small matrices included, beside
// DecodeBandwidth's one large matrix. Each iteration also reads the same
// packed bytes with read512 (as ReadBandwidth does), so "%read" is
// decode's rate against the machine's in the same seconds, on the same
// pages, both per CPU second: the ratio a busy machine, whose bandwidth
// and free cores move from run to run, distorts least; "%read-T" is that
// of type T's products alone, in a mix. The 1B shape runs 8 layers (25-50
// MB each), the 8B 4 (230 MB each in Q8_0); 8B-Q4_K_M mixes types as
// llama.cpp's q4_k_m does (v and down in Q6_K every other layer here).
func BenchmarkDecodeLayers(b *testing.B) {
	type shape struct {
		name                string
		dim, ff, kv, layers int
		types               []quant.Type
	}
	for _, sh := range []shape{
		{"", 2048, 5632, 512, 8, []quant.Type{quant.Q8_0, quant.Q4_K, quant.Q6_K}},
		{"8B-", 4096, 14336, 1024, 4, []quant.Type{quant.Q8_0, quant.Q4_K, q4KM}},
	} {
		for _, typ := range sh.types {
			name := sh.name + typ.String()
			if typ == q4KM {
				name = sh.name + "Q4_K_M"
			}
			b.Run(name, func(b *testing.B) {
				ws := decodeLayers(typ, sh.dim, sh.ff, sh.kv, sh.layers)
				k := New(0)
				ps := make([]*packed, len(ws))
				bytes := 0
				typeBytes := map[quant.Type]int{}
				for i, w := range ws {
					ps[i], _ = k.packedOf(w)
					bytes += len(ps[i].data)
					typeBytes[w.Type] += len(ps[i].data)
				}
				x := f32(randVec(rand.New(rand.NewPCG(12, 12)), sh.ff))
				dst := f32(make([]float32, 2*sh.ff))
				var dec, decCPU, readCPU time.Duration
				typeCPU := map[quant.Type]time.Duration{}
				var sink atomic.Uint32
				for b.Loop() {
					c0, t0 := cpuTime(), time.Now()
					for _, w := range ws {
						c := cpuTime()
						k.MatMul(dst, x, 1, w)
						typeCPU[w.Type] += cpuTime() - c
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
				if len(typeBytes) > 1 {
					for t, n := range typeBytes {
						// the type's rate against read512's over all the bytes
						rate := float64(n) * float64(b.N) / typeCPU[t].Seconds()
						b.ReportMetric(100*rate*readCPU.Seconds()/(float64(bytes)*float64(b.N)), "%read-"+t.String())
					}
				}
			})
		}
	}
}

// q4KM stands for llama.cpp's q4_k_m mix in decodeLayers.
const q4KM = quant.Type(255)

// decodeLayers returns layers × a layer's products of typ (tiled: each
// shape's rows repeat those of one small random matrix; every matrix
// packs into its own memory), layer by layer as a forward reads them.
// For q4KM, v and down are Q6_K in even layers, Q4_K in odd ones, and
// q, k, v are separate products (as a model that cannot stack them).
func decodeLayers(typ quant.Type, dim, ff, kv, layers int) []*kernels.Matrix {
	r := rand.New(rand.NewPCG(12, 12))
	type prod struct {
		rows, cols int
		typ        [2]quant.Type // even and odd layers'
	}
	prods := []prod{{dim + 2*kv, dim, [2]quant.Type{typ, typ}}, {dim, dim, [2]quant.Type{typ, typ}},
		{2 * ff, dim, [2]quant.Type{typ, typ}}, {dim, ff, [2]quant.Type{typ, typ}}}
	if typ == q4KM {
		k4, k6 := [2]quant.Type{quant.Q4_K, quant.Q4_K}, [2]quant.Type{quant.Q6_K, quant.Q4_K}
		prods = []prod{{dim, dim, k4}, {kv, dim, k4}, {kv, dim, k6}, {dim, dim, k4}, {2 * ff, dim, k4}, {dim, ff, k6}}
	}
	srcs := map[[3]int]*kernels.Matrix{}
	var order []*kernels.Matrix
	for l := range layers {
		for _, p := range prods {
			t := p.typ[l%2]
			key := [3]int{p.rows, p.cols, int(t)}
			src := srcs[key]
			if src == nil {
				src = tiledMatrix(r, t, p.rows, p.cols)
				srcs[key] = src
			}
			w := *src
			w.Buf = kernels.NewHostBuffer(t, p.rows*p.cols, src.Data)
			order = append(order, &w)
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
