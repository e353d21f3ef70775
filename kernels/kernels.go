// Package kernels is the compute boundary: model code calls the Kernels
// interface and never touches weights, activations or the KV cache itself.
//
// Implementations: ref (plain scalar, single-threaded, the reference every
// other one is tested against) and cpu (SIMD, multi-threaded), both host
// devices whose buffers are ordinary Go memory; and cuda (kernels/cuda,
// build tag cuda: device memory through gorgonia.org/cu), written from this
// comment and tested against ref on a host emulator, not yet on a GPU (see
// scripts/gpu-check.sh). A device's failures reach its caller as errors
// (Memory.Err), never as a crash.
//
// # Buffers
//
// Every operand is a *Buffer: an array of Len elements of one Type that
// lives in the memory of the device that made it (Alloc or Upload). Types in
// use: F32 for activations, logits and norm weights; I32 for token ids,
// positions, KV slots and block tables; F32 or F16 for a KV pool (the
// element type is the pool buffer's Type, so attention reads what the pool
// holds); any quant type for weight matrices.
//
// Ownership and lifetimes:
//   - A buffer belongs to the device that made it and is passed only to that
//     device's methods. The caller owns it until Free; after Free it must not
//     be used (host devices clear it, so a use panics).
//   - Upload(t, data) makes a weight buffer once, at load. The device may
//     copy data (CUDA) or keep a reference to it (host devices, which read a
//     memory-mapped file in place); either way the caller keeps data alive
//     and unchanged until Free. The device may store the weights in its own
//     layout: only the device reads a weight buffer.
//   - Write copies host bytes into a buffer; the host slice may be reused as
//     soon as Write returns. Read copies buffer elements into host memory.
//
// Ordering: the device runs calls in the order they are made (one stream).
// Kernel calls and Write may be asynchronous: they return once queued. Read
// is the synchronisation point: it returns after every earlier call has
// finished and its bytes are in dst. A forward step therefore writes its
// inputs (ids, positions, slots, tables), queues every kernel, and makes one
// Read for the logits. Host devices run everything synchronously.
//
// Concurrency: one goroutine drives a device at a time (the engine's step
// loop); implementations need not be safe for concurrent calls.
//
// # Errors
//
// Misuse (a buffer of another type or device, a range past a buffer's end,
// a shape a kernel cannot take) is a bug in the caller and panics. A device
// failure is an error: a launch or copy the device refuses, a kernel that
// faults, memory that runs out inside a call. The calls without an error
// result record the first such failure and from then on do nothing (their
// results stay stale, and nothing takes them for real ones) until Err
// reports it; Err returns it and clears it, so a device that recovers
// serves the next step and one that stays broken fails it again. A queued
// kernel's fault surfaces at the next Read, so a forward step checks Err
// once, after its Read of the logits (or at its end when it reads none).
// Host devices (ref, cpu) meet no device failures: their Err is nil.
//
// # Determinism
//
// NOTE: every kernel must be deterministic and batch-invariant: the bits of
// one token's result (one row of activations) may not depend on which other
// tokens share the call, on the number of threads, or on run-to-run
// scheduling. Concretely, each output element is reduced in a fixed order
// that depends only on the shapes of the weights (never on n), and a
// reduction is never split across threads or accumulated with atomics.
// Greedy outputs then do not depend on batching or caching, which the engine
// tests check.
//
// # Fused operations
//
// A device may offer optional interfaces that run several kernels as one;
// model code then calls them through helpers in this package that fall back
// to the composed kernels when the device lacks them. A fused kernel must
// give the same bits as the composition.
package kernels

import (
	"fmt"

	"jspark/kernels/quant"
)

// Buffer is an array of Len elements of Type in one device's memory. Host
// devices fill host; other devices keep their handle in Dev.
type Buffer struct {
	Type quant.Type
	Len  int
	Dev  any // the device's own handle (a device pointer); on host devices nil, or a weight matrix's own layout (cpu)

	host []byte
	f32  []float32 // views of host for host kernels; nil when the type differs
	i32  []int32
	u16  []uint16
}

// Bytes is the size of the buffer's elements in Type's encoding.
func (b *Buffer) Bytes() int { return b.Type.RowBytes(b.Len) }

// Matrix is a weight matrix: Rows output rows of Cols inputs each, encoded
// as Type, row-major (a GGUF tensor with dims [Cols, Rows]). Data is the
// host copy as read from the file; Buf is the same weights on the device,
// set once at load by Upload.
type Matrix struct {
	Name       string
	Type       quant.Type
	Rows, Cols int
	Data       []byte
	Buf        *Buffer
}

// Row returns the encoded host bytes of row i.
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

// Attention describes causal attention of N query tokens over one layer of
// a paged KV pool. Slot s of the pool holds one token's keys at
// K[s*KVHeads*HeadDim:], values likewise. Token i is at position Pos[i] of
// the sequence whose block table is row Seq[i] of Table (TableStride block
// ids a row); it sees positions 0..Pos[i], position p living in slot
// Table[Seq[i]][p/BlockSize]*BlockSize + p%BlockSize. The host writes Pos,
// Seq and Table once per step; every layer reuses them.
type Attention struct {
	Out, Q      *Buffer // F32 (N, Heads*HeadDim)
	K, V        *Buffer // F32 or F16 (slots, KVHeads*HeadDim), one layer
	Pos, Seq    *Buffer // I32 (N)
	Table       *Buffer // I32 (sequences, TableStride)
	TableStride int
	MaxPos      int // the largest Pos (host devices size scratch by it)
	BlockSize   int
	Heads       int
	KVHeads     int
	HeadDim     int
	Scale       float32
	N           int
	// Sinks, when not nil, is F32 (Heads): each head's sink logit, a score
	// that joins the softmax's denominator but has no value (gpt-oss), so
	// a head may attend to nothing.
	Sinks *Buffer
	// Window, when positive, limits token i to the Window positions
	// Pos[i]-Window+1..Pos[i] (sliding-window layers); 0 sees every earlier
	// position.
	Window int
}

// Rope is a rotary embedding as ggml's rope_ext computes it. Pair i of a
// head's first Dim dims (2i and 2i+1, or i and i+Dim/2 when Neox) turns by
// θ = pos·Base^(-2i/Dim), carried in float32 as ggml does. Scaled
// contexts (linear, YaRN) interpolate: θ' = FreqScale·θ, mixed back
// towards θ by ExtFactor·ramp(i) between the correction dims Corr, and
// both cos and sin are multiplied by Mscale (YaRN's magnitude
// correction, 1 + 0.1·ln(1/FreqScale) when ExtFactor is not 0, times the
// file's attention factor). A plain rotation is PlainRope.
type Rope struct {
	Dim       int
	Base      float32
	Neox      bool
	FreqScale float32
	ExtFactor float32
	Mscale    float32
	Corr      [2]float32
}

// PlainRope is an unscaled rotation of the first dim dims.
func PlainRope(dim int, base float32, neox bool) Rope {
	return Rope{Dim: dim, Base: base, Neox: neox, FreqScale: 1, Mscale: 1}
}

// Runs are a step's sequences as the recurrent kernels see them: run r is
// the tokens Start[r]..Start[r+1]-1, consecutive positions of one
// sequence, whose state is slot Slot[r] of a layer's state buffer. A run
// whose first token is at position 0 (Pos) starts its sequence: it reads
// its state as zeros, whatever the slot held.
type Runs struct {
	N     int
	Start *Buffer // I32 (N+1)
	Slot  *Buffer // I32 (N)
	Pos   *Buffer // I32 (tokens): each token's position
}

// Conv is a causal depthwise convolution over each run, from the state of
// the Width-1 inputs before it, and a SiLU (the short convolution of Mamba
// and Gated DeltaNet):
//
//	Out[t][c] = silu(Σ_j W[c·Width+j] · in(t−Width+1+j)[c]),  j in order
//
// where in(u) is row u of X for a token of the run and, before the run's
// first token, the inputs its slot keeps (oldest first). Afterwards the
// slot holds the run's last Width-1 inputs. Out and X may not overlap.
type Conv struct {
	Out, X *Buffer // F32 (N, Channels)
	W      *Buffer // F32 (Channels, Width)
	// State holds a slot's inputs at StateOff, (Width-1, Channels)
	// row-major, oldest first; slots are StateStride floats apart.
	State                 *Buffer
	StateStride, StateOff int
	Runs                  *Runs
	Channels, Width, N    int
}

// DeltaNet is the gated delta rule of one layer over each run (Yang, Kautz
// and Hatamizadeh 2024, "Gated Delta Networks"). Value head h keeps a
// state S (Dim × Dim, indexed [key dim][value dim]). Token t's row of X is
// its queries and keys (KHeads heads of Dim each) then its values (VHeads
// heads); value head h reads key head h % KHeads when Tiled, else
// h / (VHeads/KHeads). With q and k that key head's query and key divided
// by max(‖·‖, Eps), v head h's value, the decay a = exp(A[h] ·
// softplus(Alpha[t,h] + DT[h])) and b = sigmoid(Beta[t,h]), each token of a
// run in order does
//
//	u = b·(v − a·Sᵀk),   S ← a·S + k uᵀ,   Out[t,h] = Sᵀq / √Dim
//
// A whole chunk of Chunk positions aligned to a multiple of Chunk that lies
// in one run is computed in the chunked form (WY representation: the
// chunk's u by one triangular solve, its outputs and the state after it
// from the state before it), every other token one step at a time; the
// two agree within float rounding. So a token's bits depend only on its
// sequence and on which of its aligned chunks were whole in one run.
type DeltaNet struct {
	Out         *Buffer // F32 (N, VHeads·Dim)
	X           *Buffer // F32 (N, (2·KHeads+VHeads)·Dim)
	Alpha, Beta *Buffer // F32 (N, VHeads)
	DT, A       *Buffer // F32 (VHeads)
	// State holds a slot's VHeads states at StateOff, each Dim × Dim
	// row-major by key dim; slots are StateStride floats apart.
	State                 *Buffer
	StateStride, StateOff int
	Runs                  *Runs
	KHeads, VHeads, Dim   int
	Tiled                 bool
	Chunk                 int
	Eps                   float32
	N                     int
}

// Memory is the buffer half of a device.
type Memory interface {
	// Alloc returns n zeroed elements of type t (F32, F16 or I32); it fails
	// only when the device is out of memory.
	Alloc(t quant.Type, n int) (*Buffer, error)
	// Upload makes a buffer of n weights of type t from their encoding data
	// (see the package doc for who keeps data alive).
	Upload(t quant.Type, n int, data []byte) (*Buffer, error)
	// Write copies src, the encoding of whole elements, into dst from
	// element off on.
	Write(dst *Buffer, off int, src []byte)
	// Read copies len(dst) bytes of src's elements from element off on into
	// dst, after every earlier call has finished.
	Read(dst []byte, src *Buffer, off int)
	// Free releases b.
	Free(b *Buffer)
	// Err returns the first device failure since the previous Err, naming
	// the device, and clears it; nil when there was none (see Errors).
	Err() error
}

// Preparer is a device that keeps weight matrices in a layout of its own
// for its products: Prepare makes w's (already uploaded) now, at load,
// rather than at its first product. Products of an unprepared matrix
// still work.
type Preparer interface {
	Prepare(w *Matrix) error
}

// Kernels is the compute interface the models use. Shapes are row-major:
// n tokens × width. Buffers may be longer than a call uses (scratch is
// allocated for the largest batch); a call touches only its first rows.
type Kernels interface {
	Memory
	// MatMul sets dst (n, w.Rows) = x (n, w.Cols) · wᵀ.
	MatMul(dst, x *Buffer, n int, w *Matrix)
	// Embed sets row i of dst (n, w.Cols) to the dequantized row ids[i] of w.
	Embed(dst *Buffer, w *Matrix, ids *Buffer, n int)
	// RMSNorm sets each of the n dim-long rows of dst to x/rms(x)·weight.
	RMSNorm(dst, x, weight *Buffer, n, dim int, eps float32)
	// RoPE rotates the first r.Dim dims of each head of x (n, heads*headDim)
	// by its token's position pos (I32, n), as Rope says.
	RoPE(x, pos *Buffer, n, heads, headDim int, r Rope)
	// Attend computes causal attention.
	Attend(a *Attention)
	// SiLUMul sets gate = silu(gate)·up over the first n elements.
	SiLUMul(gate, up *Buffer, n int)
	// SwiGLUOAI sets gate = g·σ(alpha·g)·(u+1) over the first n elements,
	// with g = min(gate, limit) and u = up clamped to ±limit: gpt-oss's
	// clamped SwiGLU.
	SwiGLUOAI(gate, up *Buffer, n int, alpha, limit float32)
	// MatMulGroups multiplies consecutive groups of rows by their own
	// matrices: rows start[g]..start[g+1]-1 of dst (·, ws[g].Rows) are the
	// same rows of x (·, ws[g].Cols) · ws[g]ᵀ. Every ws[g] has one shape;
	// len(start) is len(ws)+1, non-decreasing, and groups without rows are
	// skipped. A mixture of experts' step: its token rows sorted by
	// expert, one product per expert that has tokens.
	MatMulGroups(dst, x *Buffer, ws []*Matrix, start []int)
	// WeightedSum adds to each of the n width-long rows t of dst the sum
	// over j < k of weights[t*k+j] · row rows[t*k+j] of src, summed in j
	// order before it is added: the routed experts' outputs of a token
	// brought back to its row. weights F32, rows I32, both (n*k).
	WeightedSum(dst, src, rows, weights *Buffer, n, k, width int)
	// Add sets dst += src over the first n elements.
	Add(dst, src *Buffer, n int)
	// AddBias adds bias (dim) to each of the n dim-long rows of x.
	AddBias(x, bias *Buffer, n, dim int)
	// Gather sets row i of dst (n, width) to row rows[i] of src; both F32.
	Gather(dst, src, rows *Buffer, n, width int)
	// Scatter sets row slots[i] of dst to row i of src (n, width), converting
	// F32 to dst's type (F32 or F16): how a step stores its keys and values.
	Scatter(dst, src, slots *Buffer, n, width int)

	// GELUMul sets gate = gelu(gate)·up over the first n elements, gelu by
	// its tanh form 0.5x(1+tanh(√(2/π)(x+0.044715x³))) (GeGLU, Gemma).
	GELUMul(gate, up *Buffer, n int)
	// SigmoidMul sets x[i] *= sigmoid(gate[i/per]) over the first n
	// elements of x: an output gate per element (per 1) or one per row of
	// per elements.
	SigmoidMul(x, gate *Buffer, n, per int)
	// Scale sets x *= s over the first n elements.
	Scale(x *Buffer, n int, s float32)
	// Conv runs a causal convolution over a step's runs (see Conv).
	Conv(c *Conv)
	// DeltaNet runs the gated delta rule over a step's runs (see DeltaNet).
	DeltaNet(d *DeltaNet)
}
