//go:build !amd64

package quant

// DotF32 is a·b. The assembly path is amd64 only (dot_amd64.s).
func DotF32(a, b []float32) float32 { return dotGeneric(a, b) }
