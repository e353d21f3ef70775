package quant

import (
	"math"
	"unsafe"
)

// Chunk is how many elements Dot decodes at a time into a stack buffer; it
// is a whole number of blocks of every type.
const Chunk = QK_K

// Dot returns row·x where row holds len(x) elements of type t.
//
// NOTE: the summation order depends only on len(x) and t, never on which
// other rows or tokens are being computed, so a result is bit-identical in a
// batch of one and a batch of many.
func Dot(t Type, row []byte, x []float32) float32 {
	if t == F32 {
		return DotChunked(F32s(row[:4*len(x)]), x)
	}
	var buf [Chunk]float32
	var sum float32
	for off := 0; off < len(x); off += Chunk {
		n := min(Chunk, len(x)-off)
		bytesOff := t.RowBytes(off)
		Dequantize(t, row[bytesOff:bytesOff+t.RowBytes(n)], buf[:n])
		sum += DotF32(buf[:n], x[off:off+n])
	}
	return sum
}

// DotChunked sums DotF32 over Chunk-long pieces: the same arithmetic as Dot
// on a row that was dequantized beforehand, so a matmul may decode a row once
// and reuse it for many tokens without changing any result bit.
func DotChunked(w, x []float32) float32 {
	var sum float32
	for off := 0; off < len(x); off += Chunk {
		n := min(Chunk, len(x)-off)
		sum += DotF32(w[off:off+n], x[off:off+n])
	}
	return sum
}

// F32s reinterprets little-endian float32 bytes in place. GGUF aligns tensor
// data to at least 4 bytes, so the cast is safe on the mapped file.
func F32s(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	if uintptr(unsafe.Pointer(&b[0]))%4 != 0 {
		out := make([]float32, len(b)/4)
		Dequantize(F32, b, out)
		return out
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// ReferenceDot is the scalar reference for Dot: decode everything, then sum
// in float64.
func ReferenceDot(t Type, row []byte, x []float32) float64 {
	w := make([]float32, len(x))
	Dequantize(t, row, w)
	var s float64
	for i := range x {
		s += float64(w[i]) * float64(x[i])
	}
	return s
}

// MaxError is the largest per-element error that quantizing values of
// magnitude up to amax with type t can make; tests size tolerances with it.
func MaxError(t Type, amax float32) float32 {
	switch t {
	case F32:
		return 0
	case F16:
		return amax / 1024
	case BF16:
		return amax / 128
	case Q8_0:
		return amax / 127
	case Q4_0:
		return amax / 7
	case Q4_K:
		return 2 * amax / 15 * 1.2
	case Q6_K:
		return amax / 31 * 1.2
	case Q4_1:
		return amax / 12
	case Q5_0:
		return amax / 16 * 1.1
	case Q5_1:
		return amax / 31 * 1.2
	case Q5_K:
		return 2 * amax / 31 * 1.2
	case IQ4_NL:
		return amax / 8
	case IQ4_XS:
		return amax / 6
	case MXFP4, Q3_K:
		return amax / 3
	case Q2_K:
		return amax / 2
	}
	return float32(math.Inf(1))
}
