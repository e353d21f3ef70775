// Package cpu is the multi-threaded CPU implementation of kernels.Kernels.
// On AVX-512 and AVX2, weight matrices are packed at load into groups of
// 16 rows (packed.go; in memory outside the Go heap that takes the place
// of the file's pages, pagemem_linux.go) and multiplied by register tiles
// of tokens × groups, the same arithmetic on both, every weight type
// (AVX-VNNI CPUs without AVX-512 run AVX2's tiles, those of Q8_0, Q4_0,
// Q4_1, Q4_K and Q6_K with VEX VPDPBUSD). One token reads Q8_0 and Q4_0
// down 8 groups at once (8 memory streams a thread, the hardware's pace
// where one stream is not) on every instruction set with tiles. The
// plain-Go fallback multiplies the rows as the file encodes them
// (matmul.go, qmatmul.go). JSPARK_ISA forces an instruction set (isa.go).
// Products split groups (rows) across goroutines
// and tile the tokens; attention splits (run of tokens, head) pairs.
// Each output element is computed by one goroutine in a fixed order,
// which keeps results batch-invariant.
package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"

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
	rec         recurrent  // the recurrent and hybrid kernels' (recurrent.go)
	mu          sync.Mutex // one parallel kernel at a time owns the scratch
	mem         packMem
	strips      [][]byte // each worker's unpacked weights (strip.go)
}

// packMem counts the packed copies made and the file pages given back.
type packMem struct{ packed, released atomic.Int64 }

// PackedMemory is the bytes of packed weights this device made (outside
// the Go heap) and the bytes of the file's pages it gave back once they
// were packed (packed.go): what a memory plan reports.
func (k *Kernels) PackedMemory() (packed, released int64) {
	return k.mem.packed.Load(), k.mem.released.Load()
}

type scratch struct {
	panel  [rowBlock * kChunk]float32
	acc    [tokBlock * rowBlock * maxLanes]float32
	scores []float32
	o      []float32    // one head's output accumulator
	s64    [64]float32  // attention scores (16 per query)
	states [][2]float32 // attention's running max and sum, a query each
	rope   []float32    // one token's RoPE cosines and sines
	row    []float32    // an F16 key or value row as floats (attendOneF16)
	kv     []byte       // a chunk's key and value strips as floats (AVX2 attention)
}

var _ kernels.Kernels = (*Kernels)(nil)

// New returns CPU kernels on threads goroutines (0 means GOMAXPROCS), with
// the best instruction set this CPU has, or the one JSPARK_ISA names
// (ISAEnv; New ignores a value it cannot use, Open reports it).
func New(threads int) *Kernels { return newISA(threads, envISA) }

func newISA(threads int, i isa) *Kernels {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	return &Kernels{pool: newPool(threads), scratch: make([]scratch, threads), isa: i}
}

// Threads is the number of goroutines used.
func (k *Kernels) Threads() int { return k.pool.workers }

// ISA names the instruction set in use: avx512, avxvnni, avx2 or go.
func (k *Kernels) ISA() string { return k.isa.String() }
