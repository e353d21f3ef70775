//go:build !amd64

package cpu

import "jspark/kernels/quant"

const hasVNNI = false

// qkernels: no assembly here; the portable dots run.
func qkernels(isa, quant.Type) *qtiles { return nil }
