//go:build goexperiment.simd && amd64

package cpu

import (
	"math/rand/v2"
	"simd/archsimd"
	"testing"
)

// tileArchsimd4x6 is tile512x4x6 written with simd/archsimd (mode 2, no
// tail): the measurement behind the choice of avo-generated assembly.
func tileArchsimd4x6(x []float32, xs int, w []float32, ws, steps int, dst []float32, ds int) {
	var acc [4][6]archsimd.Float32x16
	for s := 0; s < steps; s++ {
		o := s * 16
		x0 := archsimd.LoadFloat32x16Slice(x[o:])
		x1 := archsimd.LoadFloat32x16Slice(x[xs+o:])
		x2 := archsimd.LoadFloat32x16Slice(x[2*xs+o:])
		x3 := archsimd.LoadFloat32x16Slice(x[3*xs+o:])
		for r := 0; r < 6; r++ {
			wv := archsimd.LoadFloat32x16Slice(w[r*ws+o:])
			acc[0][r] = x0.MulAdd(wv, acc[0][r])
			acc[1][r] = x1.MulAdd(wv, acc[1][r])
			acc[2][r] = x2.MulAdd(wv, acc[2][r])
			acc[3][r] = x3.MulAdd(wv, acc[3][r])
		}
	}
	for t := range acc {
		for r := range acc[t] {
			var a [16]float32
			acc[t][r].Store(&a)
			dst[t*ds+r] = laneSum(&a)
		}
	}
}

// tileArchsimd1x6 keeps its six accumulators in named variables, which the
// compiler can hold in registers.
func tileArchsimd1x6(x []float32, w []float32, ws, steps int, dst []float32) {
	var a0, a1, a2, a3, a4, a5 archsimd.Float32x16
	for s := 0; s < steps; s++ {
		o := s * 16
		xv := archsimd.LoadFloat32x16((*[16]float32)(x[o:]))
		a0 = xv.MulAdd(archsimd.LoadFloat32x16((*[16]float32)(w[o:])), a0)
		a1 = xv.MulAdd(archsimd.LoadFloat32x16((*[16]float32)(w[ws+o:])), a1)
		a2 = xv.MulAdd(archsimd.LoadFloat32x16((*[16]float32)(w[2*ws+o:])), a2)
		a3 = xv.MulAdd(archsimd.LoadFloat32x16((*[16]float32)(w[3*ws+o:])), a3)
		a4 = xv.MulAdd(archsimd.LoadFloat32x16((*[16]float32)(w[4*ws+o:])), a4)
		a5 = xv.MulAdd(archsimd.LoadFloat32x16((*[16]float32)(w[5*ws+o:])), a5)
	}
	for r, a := range [6]archsimd.Float32x16{a0, a1, a2, a3, a4, a5} {
		var l [16]float32
		a.Store(&l)
		dst[r] = laneSum(&l)
	}
}

// BenchmarkTile1x6: the decode shape, both ways.
func BenchmarkTile1x6(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const k = 1024
	x, w := randVec(r, k), randVec(r, 6*k)
	dst := make([]float32, 6)
	var acc [6 * 16]float32
	b.Run("avo", func(b *testing.B) {
		for b.Loop() {
			tile512x1x6(&x[0], k, &w[0], k, k/16, 0, &acc[0], &dst[0], 6, modeLast)
		}
		b.ReportMetric(2*6*k*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	b.Run("archsimd", func(b *testing.B) {
		for b.Loop() {
			tileArchsimd1x6(x, w, k, k/16, dst)
		}
		b.ReportMetric(2*6*k*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
}

// BenchmarkTile4x6: ns per 4×6×1024 tile, assembly vs archsimd.
func BenchmarkTile4x6(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const k = 1024
	x, w := randVec(r, 4*k), randVec(r, 6*k)
	dst := make([]float32, 4*6)
	var acc [4 * 6 * 16]float32
	b.Run("avo", func(b *testing.B) {
		for b.Loop() {
			tile512x4x6(&x[0], k, &w[0], k, k/16, 0, &acc[0], &dst[0], 6, modeLast)
		}
		b.ReportMetric(2*4*6*k*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	b.Run("archsimd", func(b *testing.B) {
		for b.Loop() {
			tileArchsimd4x6(x, k, w, k, k/16, dst, 6)
		}
		b.ReportMetric(2*4*6*k*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
}
