package model

import (
	"fmt"

	"jspark/kernels"
)

// KVStore is where the forward pass keeps keys and values: per layer, a pool
// of slots grouped in blocks of BlockSize() tokens. Which block holds which
// positions of a sequence is the batch's block table, so a paged cache owns
// the mapping and the model only reads and writes slots.
type KVStore interface {
	Layer(l int) (k, v []float32) // each (slots, kv_dim)
	BlockSize() int
}

// Batch is one forward step: tokens from any number of sequences.
type Batch struct {
	Tokens []int     // (n)
	Pos    []int     // (n) position of each token in its sequence
	Table  [][]int32 // (n) block table of each token's sequence; shared slices are fine
	// Logits lists the batch indices whose next-token logits are wanted, in
	// the order they are returned.
	Logits []int
}

// Validate checks the batch against the model and the store.
func (b *Batch) Validate(kv KVStore) error {
	n := len(b.Tokens)
	if len(b.Pos) != n || len(b.Table) != n {
		return fmt.Errorf("batch: %d tokens, %d positions, %d tables", n, len(b.Pos), len(b.Table))
	}
	bs := kv.BlockSize()
	for i, p := range b.Pos {
		if p < 0 || p/bs >= len(b.Table[i]) {
			return fmt.Errorf("batch: token %d at position %d has %d blocks of %d", i, p, len(b.Table[i]), bs)
		}
	}
	for _, i := range b.Logits {
		if i < 0 || i >= n {
			return fmt.Errorf("batch: logits for token %d of %d", i, n)
		}
	}
	return nil
}

type scratch struct {
	x, h, q, k, v, attn, gate, up, last []float32
	logits                              []float32
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// Forward runs the batch through the model, writing each token's keys and
// values into kv, and returns len(b.Logits) rows of Vocab logits. The
// returned slice is reused by the next call.
func (m *Model) Forward(b *Batch, kv KVStore) ([]float32, error) {
	if err := b.Validate(kv); err != nil {
		return nil, err
	}
	for _, t := range b.Tokens {
		if t < 0 || t >= m.Vocab {
			return nil, fmt.Errorf("batch: token id %d outside the vocabulary of %d", t, m.Vocab)
		}
	}
	c := m.Config
	k := m.K
	n := len(b.Tokens)
	qDim, kvDim := c.Heads*c.HeadDim, c.KVDim()
	if m.scratch == nil {
		m.scratch = &scratch{}
	}
	s := m.scratch
	s.x, s.h = grow(s.x, n*c.Dim), grow(s.h, n*c.Dim)
	s.q, s.attn = grow(s.q, n*qDim), grow(s.attn, n*qDim)
	s.k, s.v = grow(s.k, n*kvDim), grow(s.v, n*kvDim)
	s.gate, s.up = grow(s.gate, n*c.FF), grow(s.up, n*c.FF)

	k.Embed(s.x, m.TokenEmbd, b.Tokens)
	att := &kernels.Attention{
		Out: s.attn, Q: s.q, Pos: b.Pos, Table: b.Table, BlockSize: kv.BlockSize(),
		Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim, Scale: c.AttnScale(), N: n,
	}
	for li := range m.Layers {
		l := &m.Layers[li]
		k.RMSNorm(s.h, s.x, l.AttnNorm, c.Dim, c.RMSEps)
		k.MatMul(s.q, s.h, n, l.Q)
		k.MatMul(s.k, s.h, n, l.K)
		k.MatMul(s.v, s.h, n, l.V)
		if l.QBias != nil {
			k.AddBias(s.q, l.QBias)
			k.AddBias(s.k, l.KBias)
			k.AddBias(s.v, l.VBias)
		}
		if l.QNorm != nil {
			k.RMSNorm(s.q, s.q, l.QNorm, c.HeadDim, c.RMSEps)
			k.RMSNorm(s.k, s.k, l.KNorm, c.HeadDim, c.RMSEps)
		}
		k.RoPE(s.q, b.Pos, c.Heads, c.HeadDim, c.RopeDim, c.RopeBase, c.RopeNeox)
		k.RoPE(s.k, b.Pos, c.KVHeads, c.HeadDim, c.RopeDim, c.RopeBase, c.RopeNeox)
		poolK, poolV := kv.Layer(li)
		for i := 0; i < n; i++ {
			slot := att.Slot(i, b.Pos[i])
			copy(poolK[slot*kvDim:(slot+1)*kvDim], s.k[i*kvDim:(i+1)*kvDim])
			copy(poolV[slot*kvDim:(slot+1)*kvDim], s.v[i*kvDim:(i+1)*kvDim])
		}
		att.K, att.V = poolK, poolV
		k.Attend(att)
		k.MatMul(s.h, s.attn, n, l.O)
		k.Add(s.x, s.h)

		k.RMSNorm(s.h, s.x, l.FFNNorm, c.Dim, c.RMSEps)
		k.MatMul(s.gate, s.h, n, l.Gate)
		k.MatMul(s.up, s.h, n, l.Up)
		k.SiLUMul(s.gate, s.up)
		k.MatMul(s.h, s.gate, n, l.Down)
		k.Add(s.x, s.h)
	}
	nl := len(b.Logits)
	s.last = grow(s.last, nl*c.Dim)
	for j, i := range b.Logits {
		copy(s.last[j*c.Dim:(j+1)*c.Dim], s.x[i*c.Dim:(i+1)*c.Dim])
	}
	k.RMSNorm(s.last, s.last, m.OutputNorm, c.Dim, c.RMSEps)
	s.logits = grow(s.logits, nl*c.Vocab)
	k.MatMul(s.logits, s.last, nl, m.Output)
	return s.logits, nil
}

// Pool is a plain KV store: Blocks blocks of BlockSize slots per layer.
// The engine's paged cache hands out its block ids; simple callers use
// Contiguous to get a table over all of them.
type Pool struct {
	K, V      [][]float32 // (layer) → (slots, kv_dim)
	Blocks    int
	blockSize int
}

// NewPool allocates a store for the given number of blocks.
func NewPool(c Config, blocks, blockSize int) *Pool {
	p := &Pool{Blocks: blocks, blockSize: blockSize, K: make([][]float32, c.Layers), V: make([][]float32, c.Layers)}
	for l := range p.K {
		p.K[l] = make([]float32, blocks*blockSize*c.KVDim())
		p.V[l] = make([]float32, blocks*blockSize*c.KVDim())
	}
	return p
}

func (p *Pool) Layer(l int) (k, v []float32) { return p.K[l], p.V[l] }
func (p *Pool) BlockSize() int               { return p.blockSize }

// Contiguous is the block table 0, 1, …, Blocks-1.
func (p *Pool) Contiguous() []int32 {
	t := make([]int32, p.Blocks)
	for i := range t {
		t[i] = int32(i)
	}
	return t
}
