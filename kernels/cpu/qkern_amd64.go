package cpu

import (
	"golang.org/x/sys/cpu"

	"jspark/kernels/quant"
)

var hasVNNI = cpu.X86.HasAVX512VNNI

// qkernels returns the assembly tiles of type t, or nil where the portable
// dots run. AVX-512 without VNNI takes the AVX2 tiles; both give the same
// lanes (qdot.go).
func qkernels(i isa, t quant.Type) *qtiles {
	switch {
	case i == isaAVX512 && hasVNNI:
		return qkernVNNI[t]
	case i >= isaAVX2:
		return qkernAVX2[t]
	}
	return nil
}
