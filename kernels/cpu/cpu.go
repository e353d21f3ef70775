// Package cpu is the multi-threaded CPU implementation of kernels.Kernels.
// On AVX-512, weight matrices are packed at load into groups of 16 rows
// (packed.go) and multiplied by register tiles of tokens × groups; AVX2 and
// the plain-Go fallback multiply the rows as the file encodes them
// (matmul.go, qmatmul.go). Products split groups (rows) across goroutines
// and tile the tokens; attention splits (run of tokens, head) pairs.
// Each output element is computed by one goroutine in a fixed order,
// which keeps results batch-invariant.
package cpu

import (
	"runtime"
	"sync"

	"jspark/kernels"
	"jspark/kernels/ref"
)

// Kernels is the CPU implementation. The zero value is not usable; call New.
type Kernels struct {
	ref.Kernels // element-wise ops: cheap, memory-bound, shared with ref
	pool        *pool
	scratch     []scratch
	isa         isa
	mm          matmul
	qm          qmm
	pm          pmm
	xq          qscratch // quantized activations of the current product
	at          attend
	ag          attendGo
	rope        rope
	silu        siluMul
	moe         moeState   // the mixture-of-experts kernels' state (moe.go)
	mu          sync.Mutex // one parallel kernel at a time owns the scratch
}

type scratch struct {
	panel  [rowBlock * kChunk]float32
	acc    [tokBlock * rowBlock * maxLanes]float32
	scores []float32
	o      []float32          // one head's output accumulator
	s64    [64]float32        // attention scores (16 per query)
	states [qBlock][2]float32 // attention's running max and sum, a token each
	rope   []float32          // one token's RoPE cosines and sines
}

var _ kernels.Kernels = (*Kernels)(nil)

// New returns CPU kernels on threads goroutines (0 means GOMAXPROCS), with
// the best instruction set this CPU has.
func New(threads int) *Kernels { return newISA(threads, bestISA) }

func newISA(threads int, i isa) *Kernels {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	return &Kernels{pool: newPool(threads), scratch: make([]scratch, threads), isa: i}
}

// Threads is the number of goroutines used.
func (k *Kernels) Threads() int { return k.pool.workers }

// ISA names the instruction set in use: avx512, avx2 or go.
func (k *Kernels) ISA() string { return k.isa.String() }
