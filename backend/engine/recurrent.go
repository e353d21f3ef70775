package engine

import "math"

// The engine's side of models with recurrent layers (qwen35, qwen35moe,
// qwen3next; model.StateStore says the contract): every running sequence
// holds a state slot; prefills split only at block boundaries, so that a
// sequence's bits do not depend on how the budgets cut it; a prompt
// resumes from a state checkpoint kept at a block boundary
// (checkpoint.go).
//
// Drafts (Options.Speculate): a state cannot be rewound past a rejected
// draft, so a decode step with drafts first saves the sequence's state
// into free pages (a snapshot) and, when a draft is rejected, loads it
// back and runs the accepted tokens and the new one as the sequence's
// next decode (redo). Drafts stop short of the next block boundary and of
// a whole block, so the verifying run and the redo run are single steps,
// as plain decode is: the ids are those without drafts, bit for bit, and
// a decode checkpoint is still kept at each block boundary.

// align cuts a prefill chunk of n tokens of s where the cache needs it
// cut: at a checkpoint s wants, and at a block boundary unless it
// reaches the prompt's end, for a recurrent model.
func (c *kvCache) align(s *seq, n int) int {
	if c.states == nil {
		return n
	}
	return c.states.align(s, n)
}

// draftLimit is the most drafts s may take this step: for a recurrent
// model, those that end the run before the next block boundary and make
// it shorter than a block.
func (c *kvCache) draftLimit(s *seq) int {
	if c.states == nil {
		return math.MaxInt
	}
	next := (s.computed/c.bs + 1) * c.bs
	return min(next-len(s.tokens), c.bs-2)
}

// snapshot saves s's state into free pages, leaving at least reserve
// free for the step's other sequences; nil when it cannot (then s takes
// no drafts).
func (c *stateCache) snapshot(s *seq, reserve int) []BlockID {
	if c.pages == 0 || c.pool.Free() < c.pages+reserve {
		return nil
	}
	ids, ok := c.pool.allocate(c.pages, pageState)
	if !ok {
		return nil
	}
	if err := c.save(s.slot, ids); err != nil {
		c.discard(ids)
		return nil
	}
	return ids
}

// discard gives a snapshot's pages back at the head of the free queue:
// they hold nothing worth keeping, so the next snapshot reuses them.
func (c *stateCache) discard(ids []BlockID) {
	c.pool.Release(ids)
	for _, id := range ids {
		c.pool.Discard(id)
	}
}

// rewind gives s, whose draft was rejected, the state saved before the
// step (after its first at tokens) and runs the tokens since then as its
// next decode; a state that cannot be read back preempts s (it recomputes
// from a checkpoint).
func (e *Engine) rewind(s *seq, snap []BlockID, at int) {
	if err := e.cache.states.load(snap, s.slot); err != nil {
		e.requeue(s, true)
		return
	}
	s.computed, s.redo = at, true
}

// dropSnapshots gives back the pages of the step's snapshots.
func (e *Engine) dropSnapshots(p *plan) {
	for _, en := range p.entries {
		if en.snap != nil {
			e.cache.states.discard(en.snap)
			en.snap = nil
		}
	}
}
