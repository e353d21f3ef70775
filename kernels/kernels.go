// Package kernels is the compute boundary: model code calls the Kernels
// interface and never loops over weights itself. Implementations: ref (plain
// scalar, the reference every other one is tested against) and cpu
// (multi-threaded). A CUDA implementation sits behind the build tag cuda.
//
// NOTE: every kernel must be batch-invariant: the arithmetic for one token
// (one row of activations) may not depend on which other tokens share the
// call. Greedy outputs then do not depend on batching or caching.
package kernels

import (
	"fmt"

	"jspark/kernels/quant"
)

// Matrix is a weight matrix: Rows output rows of Cols inputs each, encoded
// as Type, row-major (a GGUF tensor with dims [Cols, Rows]).
type Matrix struct {
	Name       string
	Type       quant.Type
	Rows, Cols int
	Data       []byte
}

// Row returns the encoded bytes of row i.
func (m *Matrix) Row(i int) []byte {
	rb := m.Type.RowBytes(m.Cols)
	return m.Data[i*rb : (i+1)*rb]
}

// Check reports a data length that does not match the shape.
func (m *Matrix) Check() error {
	if !m.Type.FitsRow(m.Cols) {
		return fmt.Errorf("%s: %d columns is not a whole number of %v blocks", m.Name, m.Cols, m.Type)
	}
	if want := m.Type.RowBytes(m.Cols) * m.Rows; len(m.Data) != want {
		return fmt.Errorf("%s: %d bytes for %dx%d %v, want %d", m.Name, len(m.Data), m.Rows, m.Cols, m.Type, want)
	}
	return nil
}

// Attention describes causal attention of N query tokens over a paged
// KV store. Slot s of the store holds one token's keys at
// K[s*KVHeads*HeadDim:], values likewise; token i of the batch sees the
// positions 0..Pos[i] of its sequence, whose logical block b lives in
// physical block Table[i][b].
type Attention struct {
	Out, Q    []float32 // (N, Heads*HeadDim)
	K, V      []float32 // (slots, KVHeads*HeadDim) for one layer
	Pos       []int     // (N) position of each query token
	Table     [][]int32 // (N) block table of each query token's sequence
	BlockSize int
	Heads     int
	KVHeads   int
	HeadDim   int
	Scale     float32
	N         int
}

// Slot maps a token's position to its physical KV slot.
func (a *Attention) Slot(i, pos int) int {
	return int(a.Table[i][pos/a.BlockSize])*a.BlockSize + pos%a.BlockSize
}

// Kernels is the compute interface the models use. Shapes are row-major:
// n tokens × dim. Slices are never retained.
type Kernels interface {
	// MatMul sets dst (n, w.Rows) = x (n, w.Cols) · wᵀ.
	MatMul(dst, x []float32, n int, w *Matrix)
	// Embed copies the dequantized rows ids of w into dst (len(ids), w.Cols).
	Embed(dst []float32, w *Matrix, ids []int)
	// RMSNorm sets each dim-long row of dst to x/rms(x)·weight.
	RMSNorm(dst, x, weight []float32, dim int, eps float32)
	// RoPE rotates the first ropeDim dims of each head of x (n, heads*headDim)
	// by its token's position; neox pairs i with i+ropeDim/2, normal pairs
	// 2i with 2i+1.
	RoPE(x []float32, pos []int, heads, headDim, ropeDim int, base float32, neox bool)
	// Attend computes causal attention.
	Attend(a *Attention)
	// SiLUMul sets gate = silu(gate)·up element-wise.
	SiLUMul(gate, up []float32)
	// Add sets dst += src element-wise.
	Add(dst, src []float32)
	// AddBias adds bias (dim) to every dim-long row of x.
	AddBias(x, bias []float32)
}
