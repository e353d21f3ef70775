package model

import (
	"fmt"
	"slices"

	"jspark/kernels"
)

// LayerKind is what a layer keeps of each sequence between steps.
type LayerKind uint8

const (
	// FullAttention keeps the keys and values of every position, in the
	// store's paged blocks.
	FullAttention LayerKind = iota
	// SlidingWindow keeps keys and values in the paged blocks too, but a
	// token reads only the last Window positions (itself included): a
	// block wholly before a sequence's last Window positions is never read
	// again by that sequence.
	SlidingWindow
	// Recurrent keeps no keys or values: one fixed-size state per sequence
	// (a short convolution's last inputs and a delta-rule matrix per
	// head), which a step reads and overwrites in place.
	Recurrent
)

func (k LayerKind) String() string {
	return [...]string{"full", "sliding", "recurrent"}[k]
}

// LayerState is what one layer keeps of a sequence.
type LayerState struct {
	Kind   LayerKind
	Window int // SlidingWindow: the positions a token sees, itself included
	// StateFloats is, for a Recurrent layer, the F32 elements of one
	// sequence's state in it.
	StateFloats int
}

// RecurrentLayers counts the layers that keep a recurrent state.
func (c Config) RecurrentLayers() int {
	n := 0
	for _, s := range c.States {
		if s.Kind == Recurrent {
			n++
		}
	}
	return n
}

// StateBytes is the memory of one sequence's recurrent state over all
// layers (0 for a model without recurrent layers).
func (c Config) StateBytes() int {
	n := 0
	for _, s := range c.States {
		n += 4 * s.StateFloats
	}
	return n
}

// StateStore is the store of a model with recurrent layers: besides the
// paged keys and values of its attention layers (KVStore; a recurrent
// layer's entries there are nil), it holds Slots() recurrent states, each
// one sequence's state in every recurrent layer. It is the contract
// between the model and whoever schedules sequences onto it:
//
//   - Each sequence of a batch runs in a slot of its own (Batch.Slot),
//     kept for as long as the sequence runs: two sequences of one batch
//     never share a slot.
//   - A slot holds the state after its sequence's last computed position:
//     a step with the sequence's tokens at positions p..q reads the state
//     after p-1 and leaves the state after q, in place. A step whose run
//     starts at position 0 ignores what the slot holds (it starts from
//     zeros), so a slot needs no clearing between sequences.
//   - The state is not positional: it cannot be rewound. To resume a
//     sequence at an earlier position (a prefix-cache hit, a rejected
//     draft token, a preemption) the scheduler restores a copy taken at
//     that position (CopyState to and from a spare slot) or recomputes
//     from position 0.
//   - Bits: a recurrent layer runs each whole chunk of BlockSize()
//     positions aligned to multiples of BlockSize() that lies in one run
//     of a batch in the chunked form, and every other token one step at a
//     time; the two agree within float rounding, not bit for bit. So a
//     token's bits are the same in every batch only when the sequence's
//     prefill is split at multiples of BlockSize() (the last piece ending
//     anywhere), and a copy resumes exactly only when taken at such a
//     position. Decode steps (one token) are always single steps.
//
// LayerState (Config.States) gives each layer's kind and the size of its
// state, so the scheduler can budget memory: sliding-window layers read
// only their window's blocks, recurrent layers cost StateBytes per slot
// and nothing per token.
type StateStore interface {
	KVStore
	// States returns each layer's recurrent state on k's device, F32
	// (Slots(), StateFloats), for a recurrent layer, and nil for the
	// others. The first call of States or Buffers allocates both.
	States(k kernels.Kernels) ([]*kernels.Buffer, error)
	Slots() int
}

// CopyState copies every recurrent layer's state of slot src into slot dst
// (a checkpoint, or its restore). Both must be allocated slots.
func (p *Pool) CopyState(dst, src int) error {
	if p.k == nil {
		return fmt.Errorf("kv pool: copy of a state before any step")
	}
	if dst < 0 || src < 0 || dst >= p.slots || src >= p.slots {
		return fmt.Errorf("kv pool: copy of state slot %d to %d of %d", src, dst, p.slots)
	}
	for l, b := range p.states {
		if b == nil || dst == src {
			continue
		}
		n := p.layers[l].StateFloats
		if len(p.scratch) < 4*n {
			p.scratch = make([]byte, 4*n)
		}
		// NOTE: through host memory, the one copy every device has; a
		// device copy would save the round trip where it matters (CUDA).
		p.k.Read(p.scratch[:4*n], b, src*n)
		p.k.Write(b, dst*n, p.scratch[:4*n])
	}
	return nil
}

// checkSlots validates the batch's state slots against the store, for a
// model with recurrent layers: one slot per token, each within the store,
// and each slot's tokens one run of consecutive positions. Batch.Slot nil
// gives the batch's sequences (its tables of distinct contents) slots 0,
// 1, … in order of appearance.
func (b *Batch) checkSlots(ss StateStore, seen *[]bool) ([]int, error) {
	n := len(b.Tokens)
	slots := b.Slot
	if slots == nil {
		slots = make([]int, n)
		var seen [][]int32
		for i, t := range b.Table {
			s := 0
			for s < len(seen) && !slices.Equal(seen[s], t) {
				s++
			}
			if s == len(seen) {
				seen = append(seen, t)
			}
			slots[i] = s
		}
	}
	if len(slots) != n {
		return nil, fmt.Errorf("batch: %d tokens, %d state slots", n, len(slots))
	}
	if len(*seen) < ss.Slots() {
		*seen = make([]bool, ss.Slots())
	}
	runs := (*seen)[:ss.Slots()] // runs[s]: slot s has had a run
	clear(runs)
	for i, s := range slots {
		if s < 0 || s >= ss.Slots() {
			return nil, fmt.Errorf("batch: token %d in state slot %d of %d", i, s, ss.Slots())
		}
		if i > 0 && slots[i-1] == s {
			if b.Pos[i] != b.Pos[i-1]+1 {
				return nil, fmt.Errorf("batch: token %d of state slot %d at position %d after %d", i, s, b.Pos[i], b.Pos[i-1])
			}
			continue
		}
		if runs[s] {
			return nil, fmt.Errorf("batch: state slot %d holds two runs of tokens", s)
		}
		runs[s] = true
	}
	return slots, nil
}

// PageBytes is the memory of one page of the store: a block of
// BlockSize() positions of every buffer of its layout, keys and values.
func (p *Pool) PageBytes() int {
	return 2 * p.layout.Tensors * p.blockSize * p.Type.RowBytes(p.kvDim)
}

// StatePages is how many pages hold one sequence's recurrent state (0 for
// a model without recurrent layers, or a store without attention layers).
func (p *Pool) StatePages() int {
	n := 0
	for _, s := range p.layers {
		n += 4 * s.StateFloats
	}
	if n == 0 || p.PageBytes() == 0 {
		return 0
	}
	return (n + p.PageBytes() - 1) / p.PageBytes()
}

// SaveState copies slot's recurrent state into pages (StatePages of them,
// a checkpoint), byte for byte: every recurrent layer's F32 state in layer
// order, laid over each page's rows of the key and value buffers in turn.
// The pages' keys and values are lost; a page read as keys or values
// again must be written first.
func (p *Pool) SaveState(slot int, pages []int32) error {
	return p.moveState(slot, pages, true)
}

// LoadState copies a checkpoint that SaveState wrote into pages back into
// slot.
func (p *Pool) LoadState(pages []int32, slot int) error {
	return p.moveState(slot, pages, false)
}

func (p *Pool) moveState(slot int, pages []int32, save bool) error {
	if p.k == nil {
		return fmt.Errorf("kv pool: a state checkpoint before any step")
	}
	if slot < 0 || slot >= p.slots || len(pages) != p.StatePages() {
		return fmt.Errorf("kv pool: state slot %d of %d over %d pages (want %d)", slot, p.slots, len(pages), p.StatePages())
	}
	for _, pg := range pages {
		if pg < 0 || int(pg) >= p.Blocks {
			return fmt.Errorf("kv pool: page %d of %d", pg, p.Blocks)
		}
	}
	n := p.StatePages() * p.PageBytes()
	if len(p.scratch) < n {
		p.scratch = make([]byte, n)
	}
	buf := p.scratch[:n]
	// NOTE: through host memory, as CopyState.
	if save {
		at := 0
		for l, b := range p.states {
			if b != nil {
				m := 4 * p.layers[l].StateFloats
				p.k.Read(buf[at:at+m], b, slot*p.layers[l].StateFloats)
				at += m
			}
		}
	}
	region, rows := p.blockSize*p.Type.RowBytes(p.kvDim), p.blockSize*p.kvDim
	at := 0
	for _, pg := range pages {
		for j := range p.kt {
			for _, b := range []*kernels.Buffer{p.kt[j], p.vt[j]} {
				if save {
					p.k.Write(b, int(pg)*rows, buf[at:at+region])
				} else {
					p.k.Read(buf[at:at+region], b, int(pg)*rows)
				}
				at += region
			}
		}
	}
	if !save {
		at := 0
		for l, b := range p.states {
			if b != nil {
				m := 4 * p.layers[l].StateFloats
				p.k.Write(b, slot*p.layers[l].StateFloats, buf[at:at+m])
				at += m
			}
		}
	}
	return nil
}
