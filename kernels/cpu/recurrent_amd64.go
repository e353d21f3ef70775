package cpu

// The delta rule's AVX-512 loops (recurrent_amd64.s).

//go:noescape
func vecmat512(acc *float32, x *float32, m *float32, rows int, cols int, stride int, a float32)

//go:noescape
func update512(s *float32, k *float32, q *float32, u *float32, o *float32, a float32, rows int, cols int)

//go:noescape
func dot512(x *float32, y *float32, n int) float32
