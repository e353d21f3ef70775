package cpu

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestAVXVNNITilesAreVEX: the AVX-VNNI tiles (pk256v*) must run on a CPU
// without AVX-512, so none of their instructions may need EVEX: VPDPBUSD
// only as the VEX bytes the generator writes, no register past Y15, no
// mask, zmm or embedded broadcast. Go's assembler would encode a
// VPDPBUSD on ymm as EVEX (AVX512_VNNI + AVX512VL) and fault there.
func TestAVXVNNITilesAreVEX(t *testing.T) {
	src, err := os.ReadFile("kernels_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	evex := regexp.MustCompile(`\b(Y(1[6-9]|2\d|3[01])|X(1[6-9]|2\d|3[01])|Z\d+|K[1-7])\b|_BCST|\.Z\b|^\s*VPDPBUSD|^\s*VPDPWSSD`)
	tiles, vex := 0, 0
	in := ""
	for n, l := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(l, "TEXT ") {
			in = ""
			if strings.HasPrefix(l, "TEXT ·pk256v") {
				in, tiles = l, tiles+1
			}
			continue
		}
		if in == "" {
			continue
		}
		if strings.Contains(l, "(VEX)") {
			vex++
		}
		if code, _, _ := strings.Cut(l, "//"); evex.MatchString(code) {
			t.Errorf("kernels_amd64.s:%d in %s: %q needs EVEX", n+1, in, strings.TrimSpace(code))
		}
	}
	if tiles == 0 || vex < tiles {
		t.Errorf("%d AVX-VNNI tiles with %d VEX VPDPBUSD: the generator's rewrite did not run", tiles, vex)
	}
}
