package engine

// The engine's side of models with recurrent layers (qwen35, qwen35moe,
// qwen3next; model.StateStore says the contract): every running sequence
// holds a state slot; prefills split only at block boundaries, so that a
// sequence's bits do not depend on how the budgets cut it; no drafts, as
// a state cannot be rewound past a rejected one. Prefix reuse is off
// (recompute) until the cache keeps state checkpoints with its blocks: a
// cached block alone does not hold the state after it.

// stateSlots are the recurrent state slots not held by a running sequence.
type stateSlots struct{ free []int }

func newStateSlots(n int) *stateSlots {
	s := &stateSlots{}
	for i := n - 1; i >= 0; i-- {
		s.free = append(s.free, i)
	}
	return s
}

// take gives s a slot if it has none. NOTE: there are MaxSeqs slots and
// at most MaxSeqs sequences run, so one is always free at admission.
func (e *Engine) takeSlot(s *seq) {
	if e.slots == nil || s.slot >= 0 {
		return
	}
	f := e.slots.free
	s.slot, e.slots.free = f[len(f)-1], f[:len(f)-1]
}

// releaseSlot gives s's slot back (its state is dead: the next holder
// starts from position 0).
func (e *Engine) releaseSlot(s *seq) {
	if e.slots == nil || s.slot < 0 {
		return
	}
	e.slots.free = append(e.slots.free, s.slot)
	s.slot = -1
}

// alignChunk cuts a prefill chunk of n tokens of s so that it ends at a
// block boundary or at the prompt's end, for a recurrent model.
func (e *Engine) alignChunk(s *seq, n int) int {
	if e.slots == nil || s.computed+n >= len(s.tokens) {
		return n
	}
	bs := e.opt.BlockSize
	return (s.computed+n)/bs*bs - s.computed
}
