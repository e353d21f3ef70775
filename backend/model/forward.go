package model

import (
	"fmt"

	"jspark/kernels"
	"jspark/kernels/quant"
)

// KVStore is where the forward pass keeps keys and values: per layer, a pool
// of slots grouped in blocks of BlockSize() tokens, in the memory of the
// model's device. Which block holds which positions of a sequence is the
// batch's block table, so a paged cache owns the mapping and the model only
// reads and writes slots.
type KVStore interface {
	// Buffers returns the keys and the values of every layer on k's device,
	// each (slots, kv_dim) of the store's element type (F32 or F16). The
	// first call allocates them.
	Buffers(k kernels.Kernels) (keys, values []*kernels.Buffer, err error)
	BlockSize() int
}

// Batch is one forward step: tokens from any number of sequences.
type Batch struct {
	Tokens []int     // (n)
	Pos    []int     // (n) position of each token in its sequence
	Table  [][]int32 // (n) block table of each token's sequence; shared slices are fine
	// Groups holds the block tables of KV groups 1, 2, … (KVLayout), each
	// (n) as Table is group 0's, for a store of several groups; nil for
	// one. A sliding-window group's entries before every window of its
	// sequence in the batch may be -1 (freed).
	Groups [][][]int32
	// Slot is each token's recurrent state slot (StateStore), for a model
	// with recurrent layers; nil gives the batch's sequences (its tables
	// of distinct contents) slots 0, 1, … in order of appearance.
	Slot []int
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

// Forward runs the batch through the model, writing each token's keys and
// values into kv, and returns len(b.Logits) rows of Vocab logits. The
// returned slice is reused by the next call. A device failure during the
// step is its error (the step's keys and values are then undefined).
func (m *Model) Forward(b *Batch, kv KVStore) ([]float32, error) {
	if err := b.Validate(kv); err != nil {
		return nil, err
	}
	for _, t := range b.Tokens {
		if t < 0 || t >= m.Vocab {
			return nil, fmt.Errorf("batch: token id %d outside the vocabulary of %d", t, m.Vocab)
		}
	}
	lay := m.dev.layoutOf(kv, m.Config)
	if err := b.checkGroups(lay, kv.BlockSize()); err != nil {
		return nil, err
	}
	keys, values, err := kv.Buffers(m.K)
	if err != nil {
		return nil, err
	}
	c := m.Config
	var states []*kernels.Buffer
	var slots []int
	if c.RecurrentLayers() > 0 {
		ss, ok := kv.(StateStore)
		if !ok {
			return nil, fmt.Errorf("batch: %s has recurrent layers and the store keeps no states", c.Arch)
		}
		if slots, err = b.checkSlots(ss, &m.dev.hyb.seen); err != nil {
			return nil, err
		}
		if states, err = ss.States(m.K); err != nil {
			return nil, err
		}
	}
	k, d := m.K, m.dev
	n, nl := len(b.Tokens), len(b.Logits)
	if err := d.reserve(k, c, n, max(nl, 1), tableLen(b)); err != nil {
		return nil, err
	}
	stride := d.stage(k, b, kv.BlockSize())
	if states != nil {
		d.hyb.stageRuns(k, slots, d.pos)
	}
	maxPos := 0
	for _, p := range b.Pos {
		maxPos = max(maxPos, p)
	}
	d.att = kernels.Attention{
		Out: d.attn, Q: d.q, Pos: d.pos, Seq: d.seq, Table: d.table, TableStride: stride, MaxPos: maxPos,
		BlockSize: kv.BlockSize(), Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim, Scale: c.AttnScale(), N: n,
	}
	if err := d.stageGroups(k, b, lay, kv.BlockSize()); err != nil {
		return nil, err
	}
	s := &d.step // kept in the device: a block's forward takes it through an interface
	*s = step{m: m, k: k, d: d, c: &m.Config, n: n, keys: keys, values: values, states: states, chunk: kv.BlockSize(), group: lay.Group}
	k.Embed(d.x, m.TokenEmbd, d.ids, n)
	if c.EmbedScale != 0 {
		k.Scale(d.x, n*c.Dim, c.EmbedScale)
	}
	for li, blk := range m.Blocks {
		s.layer = li
		blk.forward(s)
	}
	if nl == 0 {
		return d.hLogits[:0], k.Err()
	}
	k.Gather(d.last, d.x, d.rows, nl, c.Dim)
	k.RMSNorm(d.last, d.last, m.OutputNorm.Buf, nl, c.Dim, c.RMSEps)
	k.MatMul(d.logits, d.last, nl, m.Output)
	out := d.hLogits[:nl*c.Vocab]
	k.Read(kernels.F32Bytes(out), d.logits, 0)
	// A device failure anywhere in the step (a queued kernel's fault
	// surfaces at the Read) leaves out stale: the step fails instead.
	if err := k.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// Pool is a store of keys and values of type Type (F32 or F16), in Blocks
// pages of BlockSize slots laid out by its KVLayout, and of the recurrent
// layers' states of Slots() sequences (StateStore), allocated on the
// device of the first model that runs with it. The engine's paged cache
// hands out its page ids and state slots; simple callers use Contiguous
// to get a table over all blocks, and slot 0.
type Pool struct {
	Type      quant.Type
	Blocks    int
	blockSize int
	kvDim     int
	layers    []LayerState
	layout    KVLayout
	slots     int
	k         kernels.Kernels   // the device holding keys and values
	kt, vt    []*kernels.Buffer // the layout's key and value buffers
	keys      []*kernels.Buffer // each layer's (of kt), nil for a recurrent layer
	values    []*kernels.Buffer
	states    []*kernels.Buffer
	scratch   []byte // CopyState's
}

// NewPool describes an F32 store for the given number of blocks.
func NewPool(c Config, blocks, blockSize int) *Pool {
	return NewTypedPool(c, blocks, blockSize, quant.F32)
}

// NewTypedPool describes a store of keys and values of type t (F32 or F16)
// and, for a model with recurrent layers, one state slot.
func NewTypedPool(c Config, blocks, blockSize int, t quant.Type) *Pool {
	return NewStatePool(c, blocks, blockSize, t, 1)
}

// NewStatePool describes a store of keys and values of type t, one group
// of every attention layer (one block table), and, for a model with
// recurrent layers, slots recurrent states.
func NewStatePool(c Config, blocks, blockSize int, t quant.Type, slots int) *Pool {
	return newPool(c, c.singleLayout(), blocks, blockSize, t, slots)
}

// NewPagedPool describes a store of pages pages in the model's
// PagedLayout: a block table per KV group (Batch.Groups), the groups'
// blocks drawn from the one set of pages.
func NewPagedPool(c Config, pages, blockSize int, t quant.Type, slots int) *Pool {
	return newPool(c, c.PagedLayout(), pages, blockSize, t, slots)
}

func newPool(c Config, lay KVLayout, blocks, blockSize int, t quant.Type, slots int) *Pool {
	return &Pool{Type: t, Blocks: blocks, blockSize: blockSize, kvDim: c.KVDim(), layers: c.states(), layout: lay, slots: slots,
		kt: make([]*kernels.Buffer, lay.Tensors), vt: make([]*kernels.Buffer, lay.Tensors),
		keys: make([]*kernels.Buffer, c.Layers), values: make([]*kernels.Buffer, c.Layers), states: make([]*kernels.Buffer, c.Layers)}
}

// Layout is how the pool keeps the attention layers.
func (p *Pool) Layout() *KVLayout { return &p.layout }

func (p *Pool) Buffers(k kernels.Kernels) (keys, values []*kernels.Buffer, err error) {
	if err := p.alloc(k); err != nil {
		return nil, nil, err
	}
	return p.keys, p.values, nil
}

// Tensors returns the layout's key and value buffers on k's device, each
// (Blocks·BlockSize(), kv_dim): a page's slots in buffer j are layer j's
// of whichever group holds the page.
func (p *Pool) Tensors(k kernels.Kernels) (keys, values []*kernels.Buffer, err error) {
	if err := p.alloc(k); err != nil {
		return nil, nil, err
	}
	return p.kt, p.vt, nil
}

func (p *Pool) States(k kernels.Kernels) ([]*kernels.Buffer, error) {
	if err := p.alloc(k); err != nil {
		return nil, err
	}
	return p.states, nil
}

func (p *Pool) Slots() int { return p.slots }

// alloc makes every layer's buffers on k, the first time.
func (p *Pool) alloc(k kernels.Kernels) (err error) {
	if p.k == k {
		return nil
	}
	if p.k != nil {
		return fmt.Errorf("kv pool: allocated on another device")
	}
	if p.Type != quant.F32 && p.Type != quant.F16 {
		return fmt.Errorf("kv pool: element type %v (want F32 or F16)", p.Type)
	}
	p.k = k
	slots := p.Blocks * p.blockSize * p.kvDim
	for j := range p.kt {
		if p.kt[j], err = k.Alloc(p.Type, slots); err == nil {
			p.vt[j], err = k.Alloc(p.Type, slots)
		}
		if err != nil {
			p.Free()
			return fmt.Errorf("kv pool: %w", err)
		}
	}
	for l, ls := range p.layers {
		if ls.Kind == Recurrent {
			if p.states[l], err = k.Alloc(quant.F32, p.slots*ls.StateFloats); err != nil {
				p.Free()
				return fmt.Errorf("kv pool: %w", err)
			}
		} else if j := p.layout.Tensor[l]; j >= 0 {
			p.keys[l], p.values[l] = p.kt[j], p.vt[j]
		}
	}
	return nil
}

func (p *Pool) BlockSize() int { return p.blockSize }

// Free releases the pool's device memory; it may be allocated again.
func (p *Pool) Free() {
	if p.k == nil {
		return
	}
	for _, bs := range [][]*kernels.Buffer{p.kt, p.vt, p.states} {
		for i, b := range bs {
			if b != nil {
				p.k.Free(b)
			}
			bs[i] = nil
		}
	}
	clear(p.keys)
	clear(p.values)
	p.k = nil
}

// Contiguous is the block table 0, 1, …, Blocks-1.
func (p *Pool) Contiguous() []int32 {
	t := make([]int32, p.Blocks)
	for i := range t {
		t[i] = int32(i)
	}
	return t
}
