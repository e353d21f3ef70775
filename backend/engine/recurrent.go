package engine

// The engine's side of models with recurrent layers (qwen35, qwen35moe,
// qwen3next; model.StateStore says the contract): every running sequence
// holds a state slot; prefills split only at block boundaries, so that a
// sequence's bits do not depend on how the budgets cut it; a prompt
// resumes from a state checkpoint kept at a block boundary
// (checkpoint.go); no drafts, as a state cannot be rewound past a
// rejected one (NOTE: a checkpoint before the drafts would roll them
// back, at the cost of a state copy per step and a recomputation of the
// accepted ones: off until measured worth it).

// align cuts a prefill chunk of n tokens of s where the cache needs it
// cut: at a checkpoint s wants, and at a block boundary unless it
// reaches the prompt's end, for a recurrent model.
func (c *kvCache) align(s *seq, n int) int {
	if c.states == nil {
		return n
	}
	return c.states.align(s, n)
}
