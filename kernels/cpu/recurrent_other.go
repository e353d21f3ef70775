//go:build !amd64

package cpu

func vecmat512(acc *float32, x *float32, m *float32, rows int, cols int, stride int, a float32) {
	panic("cpu: no assembly")
}

func update512(s *float32, k *float32, q *float32, u *float32, o *float32, a float32, rows int, cols int) {
	panic("cpu: no assembly")
}

func dot512(x *float32, y *float32, n int) float32 { panic("cpu: no assembly") }
