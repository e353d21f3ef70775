package quant

import "golang.org/x/sys/cpu"

var hasFMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func dotAVX2(a, b *float32, n int) float32

// DotF32 is a·b: AVX2 fused multiply-adds over the longest multiple of 32,
// then the plain loop over the tail. The order depends only on len(a).
func DotF32(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	body := n &^ 31
	if !hasFMA || body == 0 {
		return dotGeneric(a, b)
	}
	s := dotAVX2(&a[0], &b[0], body)
	if body < n {
		s += dotGeneric(a[body:], b[body:])
	}
	return s
}
