package cpu

import "jspark/kernels/quant"

// qkernels returns the assembly kernels of type t by row count, or nil
// where the portable dots run.
func qkernels(i isa, t quant.Type) *[qRows + 1]qkernFn { return nil }
