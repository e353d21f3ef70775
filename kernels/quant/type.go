// Package quant owns the GGML tensor element types: their block layouts,
// conversion to float32, quantization from float32, dot products of a
// quantized row with a float32 vector, and the 8-bit quantization of
// activations that integer matrix products use (QuantizeQ8).
//
// Every fast routine here has a plain scalar twin (ReferenceDot beside Dot);
// tests check one against the other. codes.go reads each block layout into
// integers once, for the decoder here and the packers of kernels/cpu.
package quant

import (
	"fmt"
	"sort"
	"strings"
)

// Type is a GGML tensor element type, numbered as in ggml.h.
type Type uint32

const (
	F32    Type = 0
	F16    Type = 1
	Q4_0   Type = 2
	Q4_1   Type = 3
	Q5_0   Type = 6
	Q5_1   Type = 7
	Q8_0   Type = 8
	Q2_K   Type = 10
	Q3_K   Type = 11
	Q4_K   Type = 12
	Q5_K   Type = 13
	Q6_K   Type = 14
	IQ4_NL Type = 20
	IQ4_XS Type = 23
	I32    Type = 26 // indices and positions; never a weight type
	BF16   Type = 30
	MXFP4  Type = 39
)

// QK_K is the super-block length of the K-quants (and IQ4_XS).
const QK_K = 256

type layout struct {
	name       string
	blockElems int
	blockBytes int
}

var layouts = map[Type]layout{
	F32:    {"F32", 1, 4},
	F16:    {"F16", 1, 2},
	BF16:   {"BF16", 1, 2},
	Q4_0:   {"Q4_0", 32, 2 + 16},
	Q4_1:   {"Q4_1", 32, 2 + 2 + 16},
	Q5_0:   {"Q5_0", 32, 2 + 4 + 16},
	Q5_1:   {"Q5_1", 32, 2 + 2 + 4 + 16},
	Q8_0:   {"Q8_0", 32, 2 + 32},
	Q2_K:   {"Q2_K", QK_K, QK_K/16 + QK_K/4 + 2 + 2},
	Q3_K:   {"Q3_K", QK_K, QK_K/8 + QK_K/4 + 12 + 2},
	Q4_K:   {"Q4_K", QK_K, 2 + 2 + 12 + QK_K/2},
	Q5_K:   {"Q5_K", QK_K, 2 + 2 + 12 + QK_K/8 + QK_K/2},
	Q6_K:   {"Q6_K", QK_K, QK_K/2 + QK_K/4 + QK_K/16 + 2},
	IQ4_NL: {"IQ4_NL", 32, 2 + 16},
	IQ4_XS: {"IQ4_XS", QK_K, 2 + 2 + QK_K/64 + QK_K/2},
	MXFP4:  {"MXFP4", 32, 1 + 16},
	I32:    {"I32", 1, 4},
}

// ggmlNames names the ggml types this package does not compute with, so
// that a file holding one is refused by name.
var ggmlNames = map[Type]string{
	9: "Q8_1", 15: "Q8_K", 16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S",
	21: "IQ3_S", 22: "IQ2_S", 24: "I8", 25: "I16", 27: "I64", 28: "F64", 29: "IQ1_M",
	31: "Q4_0_4_4", 32: "Q4_0_4_8", 33: "Q4_0_8_8", 34: "TQ1_0", 35: "TQ2_0", 36: "I2_S",
	133: "Q6_0", 134: "IQ1_BN", 135: "IQ2_BN", 137: "IQ2_K", 138: "IQ3_K", 139: "IQ4_K",
	140: "IQ5_K", 141: "IQ6_K", 144: "IQ4_KS", 145: "IQ2_KS", 146: "IQ4_KSS", 152: "IQ5_KS",
	153: "IQ2_KT", 154: "IQ3_KT", 155: "IQ4_KT", 156: "IQ3_KS", 157: "IQ2_KL", 158: "IQ1_KT",
}

// Known reports whether t is a weight type this package computes with.
func (t Type) Known() bool { _, ok := layouts[t]; return ok && t != I32 }

// String is the type's ggml name ("Q4_K"), "IQ2_XXS (unsupported)" for a
// ggml type jspark cannot compute with, or "type(N)".
func (t Type) String() string {
	if l, ok := layouts[t]; ok {
		return l.name
	}
	if n, ok := ggmlNames[t]; ok {
		return n + " (unsupported)"
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

// WeightTypes lists every weight type, in ggml's numbering order.
func WeightTypes() []Type {
	var ts []Type
	for t := range layouts {
		if t != I32 {
			ts = append(ts, t)
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	return ts
}

// ParseType reads a lower- or upper-case type name such as "q8_0".
func ParseType(s string) (Type, error) {
	for t, l := range layouts {
		if t != I32 && strings.EqualFold(l.name, s) {
			return t, nil
		}
	}
	var names []string
	for _, t := range WeightTypes() {
		names = append(names, strings.ToLower(t.String()))
	}
	return 0, fmt.Errorf("unknown tensor type %q (want one of %s)", s, strings.Join(names, ", "))
}
