//go:build !linux

package cpu

// packMemory returns n zeroed bytes for a packed matrix.
func packMemory(n int) []byte { return make([]byte, n) }

// releaseSource gives nothing back off Linux.
func releaseSource(b []byte) int { return 0 }
