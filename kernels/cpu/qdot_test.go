package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"jspark/kernels/quant"
)

// TestQDotIsPacked: the portable integer products (qdot.go) give the
// packed assembly's bits, every type, one token and several, on every
// instruction set this CPU runs with packed tiles, so that a machine
// without them (arm64) computes what AVX-512 does.
func TestQDotIsPacked(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 31))
	for _, typ := range quant.WeightTypes() {
		if !intPath(typ) {
			continue
		}
		for _, c := range []struct{ rows, cols, n int }{{48, 512, 1}, {37, 768, 5}, {16, 256, 70}} {
			w := matrix(r, typ, c.rows, c.cols)
			x := randVec(r, c.n*c.cols)
			want := make([]float32, c.n*c.rows)
			newISA(2, isaGo).MatMul(f32(want), f32(x), c.n, w)
			for _, is := range isas() {
				if !newISA(1, is).usePacked(typ) {
					continue
				}
				got := make([]float32, c.n*c.rows)
				newISA(2, is).MatMul(f32(got), f32(x), c.n, w)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Errorf("%v %v %+v: output %d is %v, the portable path's %v", typ, is, c, i, got[i], want[i])
						break
					}
				}
			}
		}
	}
}
