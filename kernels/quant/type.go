// Package quant owns the GGML tensor element types: their block layouts,
// conversion to float32, quantization from float32, dot products of a
// quantized row with a float32 vector, and the 8-bit quantization of
// activations that integer matrix products use (QuantizeQ8).
//
// Every fast routine here has a plain scalar twin in reference.go; tests
// check one against the other.
package quant

import "fmt"

// Type is a GGML tensor element type, numbered as in ggml.h.
type Type uint32

const (
	F32  Type = 0
	F16  Type = 1
	Q4_0 Type = 2
	Q8_0 Type = 8
	Q4_K Type = 12
	Q6_K Type = 14
	I32  Type = 26 // indices and positions; never a weight type
	BF16 Type = 30
)

// QK_K is the super-block length of the K-quants.
const QK_K = 256

type layout struct {
	name       string
	blockElems int
	blockBytes int
}

var layouts = map[Type]layout{
	F32:  {"F32", 1, 4},
	F16:  {"F16", 1, 2},
	BF16: {"BF16", 1, 2},
	Q4_0: {"Q4_0", 32, 2 + 16},
	Q8_0: {"Q8_0", 32, 2 + 32},
	Q4_K: {"Q4_K", QK_K, 2 + 2 + 12 + QK_K/2},
	Q6_K: {"Q6_K", QK_K, QK_K/2 + QK_K/4 + QK_K/16 + 2},
	I32:  {"I32", 1, 4},
}

// Known reports whether t is a weight type this package computes with.
func (t Type) Known() bool { _, ok := layouts[t]; return ok && t != I32 }

func (t Type) String() string {
	if l, ok := layouts[t]; ok {
		return l.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockElems is the number of elements one block encodes.
func (t Type) BlockElems() int { return layouts[t].blockElems }

// BlockBytes is the encoded size of one block.
func (t Type) BlockBytes() int { return layouts[t].blockBytes }

// RowBytes is the encoded size of n elements; n must be a multiple of the
// block length (check with FitsRow).
func (t Type) RowBytes(n int) int {
	l := layouts[t]
	return n / l.blockElems * l.blockBytes
}

// FitsRow reports whether a row of n elements is a whole number of blocks.
func (t Type) FitsRow(n int) bool {
	l, ok := layouts[t]
	return ok && n%l.blockElems == 0
}

// ParseType reads a lower- or upper-case type name such as "q8_0".
func ParseType(s string) (Type, error) {
	for t, l := range layouts {
		if t != I32 && equalFold(l.name, s) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown tensor type %q (want f32, f16, bf16, q4_0, q8_0, q4_k or q6_k)", s)
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'a' <= x && x <= 'z' {
			x -= 'a' - 'A'
		}
		if 'a' <= y && y <= 'z' {
			y -= 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
