//go:build goexperiment.simd && amd64

package cpu

import (
	"math/rand/v2"
	"simd/archsimd"
	"testing"
	"unsafe"
)

// pkArchsimd1x8 is pk512F32x1x8 written with simd/archsimd: one token
// against 8 packed groups (w: groups gs floats apart, 16 floats a step),
// the measurement behind the choice of avo-generated assembly.
func pkArchsimd1x8(x []float32, w []float32, gs, k int, dst []float32) {
	var a0, a1, a2, a3, a4, a5, a6, a7 archsimd.Float32x16
	at := func(g, i int) archsimd.Float32x16 { return archsimd.LoadFloat32x16((*[16]float32)(w[g*gs+16*i:])) }
	for i := 0; i < k; i++ {
		xv := archsimd.BroadcastFloat32x16(x[i])
		a0 = xv.MulAdd(at(0, i), a0)
		a1 = xv.MulAdd(at(1, i), a1)
		a2 = xv.MulAdd(at(2, i), a2)
		a3 = xv.MulAdd(at(3, i), a3)
		a4 = xv.MulAdd(at(4, i), a4)
		a5 = xv.MulAdd(at(5, i), a5)
		a6 = xv.MulAdd(at(6, i), a6)
		a7 = xv.MulAdd(at(7, i), a7)
	}
	for g, a := range [8]archsimd.Float32x16{a0, a1, a2, a3, a4, a5, a6, a7} {
		a.Store((*[16]float32)(dst[16*g:]))
	}
}

// pkArchsimd6x4 is pk512F32x6x4: 6 tokens (xs floats apart) × 4 groups,
// the accumulators in an array.
func pkArchsimd6x4(x []float32, xs int, w []float32, gs, k int, dst []float32, ds int) {
	var acc [6][4]archsimd.Float32x16
	for i := 0; i < k; i++ {
		var wv [4]archsimd.Float32x16
		for g := range wv {
			wv[g] = archsimd.LoadFloat32x16((*[16]float32)(w[g*gs+16*i:]))
		}
		for t := range acc {
			xv := archsimd.BroadcastFloat32x16(x[t*xs+i])
			for g := range wv {
				acc[t][g] = xv.MulAdd(wv[g], acc[t][g])
			}
		}
	}
	for t := range acc {
		for g := range acc[t] {
			acc[t][g].Store((*[16]float32)(dst[t*ds+16*g:]))
		}
	}
}

func wbytes(w []float32) *byte { return (*byte)(unsafe.Pointer(&w[0])) }

// BenchmarkPacked1x8: the decode shape, both ways.
func BenchmarkPacked1x8(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const k = 1024
	x, w := randVec(r, k), randVec(r, 8*16*k)
	dst := make([]float32, 8*16)
	b.Run("avo", func(b *testing.B) {
		for b.Loop() {
			pk512F32x1x8(&x[0], k, wbytes(w), 64*k, k, &dst[0], 128, 0xffff)
		}
		b.ReportMetric(2*128*k*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	b.Run("archsimd", func(b *testing.B) {
		for b.Loop() {
			pkArchsimd1x8(x, w, 16*k, k, dst)
		}
		b.ReportMetric(2*128*k*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
}

// BenchmarkPacked6x4: the prefill shape, both ways.
func BenchmarkPacked6x4(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const k = 1024
	x, w := randVec(r, 6*k), randVec(r, 4*16*k)
	dst := make([]float32, 6*64)
	b.Run("avo", func(b *testing.B) {
		for b.Loop() {
			pk512F32x6x4(&x[0], k, wbytes(w), 64*k, k, &dst[0], 64, 0xffff)
		}
		b.ReportMetric(2*6*64*k*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	b.Run("archsimd", func(b *testing.B) {
		for b.Loop() {
			pkArchsimd6x4(x, k, w, 16*k, k, dst, 64)
		}
		b.ReportMetric(2*6*64*k*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
}

// TestPackedArchsimdAgrees: the archsimd tiles compute what the assembly
// does, bit for bit (so the benchmark compares equal work).
func TestPackedArchsimdAgrees(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	const k = 96
	x, w := randVec(r, 6*k), randVec(r, 8*16*k)
	a, s := make([]float32, 7*128), make([]float32, 7*128)
	pk512F32x1x8(&x[0], k, wbytes(w), 64*k, k, &a[0], 128, 0xffff)
	pkArchsimd1x8(x, w, 16*k, k, s)
	pk512F32x6x4(&x[0], k, wbytes(w), 64*k, k, &a[128], 128, 0xffff)
	pkArchsimd6x4(x, k, w, 16*k, k, s[128:], 128)
	for i := range a {
		if a[i] != s[i] {
			t.Fatalf("output %d: avo %v, archsimd %v", i, a[i], s[i])
		}
	}
}
