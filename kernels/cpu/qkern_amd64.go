package cpu

import (
	"golang.org/x/sys/cpu"

	"jspark/kernels/quant"
)

var hasVNNI = cpu.X86.HasAVX512VNNI

var (
	qkernVNNI = map[quant.Type]*[qRows + 1]qkernFn{
		quant.Q8_0: {1: qdotvnniQ8_0x1, 2: qdotvnniQ8_0x2, 3: qdotvnniQ8_0x3, 4: qdotvnniQ8_0x4},
		quant.Q4_0: {1: qdotvnniQ4_0x1, 2: qdotvnniQ4_0x2, 3: qdotvnniQ4_0x3, 4: qdotvnniQ4_0x4},
		quant.Q4_K: {1: qdotvnniQ4Kx1, 2: qdotvnniQ4Kx2, 3: qdotvnniQ4Kx3, 4: qdotvnniQ4Kx4},
		quant.Q6_K: {1: qdotvnniQ6Kx1, 2: qdotvnniQ6Kx2, 3: qdotvnniQ6Kx3, 4: qdotvnniQ6Kx4},
	}
	qkernAVX2 = map[quant.Type]*[qRows + 1]qkernFn{
		quant.Q8_0: {1: qdotavx2Q8_0x1, 2: qdotavx2Q8_0x2, 3: qdotavx2Q8_0x3, 4: qdotavx2Q8_0x4},
		quant.Q4_0: {1: qdotavx2Q4_0x1, 2: qdotavx2Q4_0x2, 3: qdotavx2Q4_0x3, 4: qdotavx2Q4_0x4},
		quant.Q4_K: {1: qdotavx2Q4Kx1, 2: qdotavx2Q4Kx2, 3: qdotavx2Q4Kx3, 4: qdotavx2Q4Kx4},
		quant.Q6_K: {1: qdotavx2Q6Kx1, 2: qdotavx2Q6Kx2, 3: qdotavx2Q6Kx3, 4: qdotavx2Q6Kx4},
	}
)

// qkernels returns the assembly kernels of type t by row count, or nil
// where the portable dots run. AVX-512 without VNNI takes the AVX2
// kernels; both give the same lanes (qdot.go).
func qkernels(i isa, t quant.Type) *[qRows + 1]qkernFn {
	switch {
	case i == isaAVX512 && hasVNNI:
		return qkernVNNI[t]
	case i >= isaAVX2:
		return qkernAVX2[t]
	}
	return nil
}
