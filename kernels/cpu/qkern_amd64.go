package cpu

import (
	"golang.org/x/sys/cpu"

	"jspark/kernels/quant"
)

var hasVNNI = cpu.X86.HasAVX512VNNI

// qkernels returns the unpacked assembly tiles of type t, or nil where the
// portable dots run. AVX-512 with VNNI multiplies packed weights instead
// (packed.go); without VNNI it takes the AVX2 tiles.
func qkernels(i isa, t quant.Type) *qtiles {
	if i >= isaAVX2 {
		return qkernAVX2[t]
	}
	return nil
}
