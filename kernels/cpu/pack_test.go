//go:build linux

package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"jspark/kernels/quant"

	"golang.org/x/sys/unix"
)

// BenchmarkPack: packing one 2048 × 2048 matrix on one thread, as MB/s of
// the file's bytes (a model's load is mostly this).
func BenchmarkPack(b *testing.B) {
	r := rand.New(rand.NewPCG(12, 12))
	k := New(1)
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_K, quant.Q6_K, quant.Q5_K, quant.MXFP4, quant.F16} {
		w := matrix(r, typ, 2048, 2048)
		b.Run(fmt.Sprint(typ), func(b *testing.B) {
			c0 := cpuTime()
			for b.Loop() {
				p, err := k.pack(w)
				if err != nil {
					b.Fatal(err)
				}
				freePacked(p)
			}
			b.ReportMetric(float64(len(w.Data))*float64(b.N)/b.Elapsed().Seconds()/1e6, "MB/s")
			b.ReportMetric(float64(len(w.Data))*float64(b.N)/(cpuTime()-c0).Seconds()/1e6, "MB/cpu-s")
		})
	}
}

// freePacked unmaps a packed copy (a model's never are).
func freePacked(p *packed) { _ = unix.Munmap(p.data) }
