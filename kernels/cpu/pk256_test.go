package cpu

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestRecords256MatchesGo: the AVX2 record writer writes recordsGo's
// bytes for every offset kind, blocks of zeros and of mixed magnitudes
// included.
func TestRecords256MatchesGo(t *testing.T) {
	if bestISA < isaAVX2 {
		t.Skip("no AVX2 here")
	}
	r := rand.New(rand.NewPCG(12, 12))
	const nb = 37
	x := randVec(r, nb*32)
	for i := range 32 { // block 3: zeros; block 5: one large value
		x[3*32+i] = 0
	}
	x[5*32+7] = 1e4
	for b := 6; b < nb; b++ { // scale blocks apart, so rounding ties vary
		for i := range 32 {
			x[b*32+i] *= float32(b) / 3
		}
	}
	for _, o := range []struct {
		c      int32
		halves bool
	}{{-128, false}, {-8, false}, {0, false}, {-32, true}, {1, true}} {
		t.Run(fmt.Sprintf("c%d/halves=%v", o.c, o.halves), func(t *testing.T) {
			want, got := make([]byte, nb*recBytes), make([]byte, nb*recBytes)
			recordsGo(&x[0], &want[0], nb, o.c, o.halves)
			quant256Q8R(&x[0], &got[0], nb, o.c, o.halves)
			for b := 0; b < nb; b++ {
				w, g := want[b*recBytes:(b+1)*recBytes], got[b*recBytes:(b+1)*recBytes]
				if !bytes.Equal(w, g) {
					t.Fatalf("block %d:\n got %v\nwant %v", b, g, w)
				}
			}
		})
	}
}
