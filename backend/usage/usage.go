// Package usage is usage.jspark on the wire: what jspark serve adds to an
// OpenAI usage object (chat, completions and Responses alike), and what a
// client of it, the runner among them, reads back. The server fills it from
// the engine's own types and the runner records it as it is, so a field of
// the engine can be renamed without the runner's records changing: these
// types are the contract, and their JSON names are the wire's.
package usage

// Jspark is usage.jspark: the reuse bound, where the request's time went by
// the engine's clock and, when the prompt reused less than earlier requests
// had committed, where it diverged.
type Jspark struct {
	// CommittedTokens is the reuse bound: how much of the prompt earlier
	// requests had committed (full blocks), cached still or not.
	CommittedTokens int `json:"committed_tokens"`
	Preemptions     int `json:"preemptions"`
	// ReusedTokens were not computed: the cached tokens and those copied
	// from a cached partial block.
	ReusedTokens int `json:"reused_tokens"`
	// ComputedTokens were prefilled, recomputations after a preemption
	// included.
	ComputedTokens int         `json:"computed_tokens"`
	Timing         Timing      `json:"timing"`
	Divergence     *Divergence `json:"divergence,omitempty"`
	// Checkpoint, for a model with recurrent or sliding-window layers, is
	// where the prompt resumed and from what.
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	// Session is the key the engine retained the request's blocks under
	// (X-Session-Id, else user); absent without one.
	Session string `json:"session,omitempty"`
}

// Timing is where a request's time in the engine went, in seconds; the four
// add up to its time from submission to finish.
type Timing struct {
	QueuedSec  float64 `json:"queued_s"`  // submitted to its first prefill chunk
	PrefillSec float64 `json:"prefill_s"` // first chunk to first token
	DecodeSec  float64 `json:"decode_s"`  // first token to finish
	// PreemptedSec is the time lost to preemptions: from each one until the
	// request had recomputed what it lost (taken out of prefill or decode).
	PreemptedSec float64 `json:"preempted_s"`
}

// Divergence says where and why a prompt reused less than earlier requests
// had committed: the first changed position, with both tokens, or evicted
// blocks.
type Divergence struct {
	Req      int64  `json:"req,omitempty"` // the request, in an engine step trace
	Reason   string `json:"reason"`        // "changed" or "evicted"
	Position int    `json:"position"`
	Token    int    `json:"token,omitempty"`
	Was      int    `json:"was,omitempty"`
	// Text and WasText are the two tokens' text as the tokenizer spells
	// them (special tokens included).
	Text    string `json:"text,omitempty"`
	WasText string `json:"was_text,omitempty"`
}

// Checkpoint says where a prompt of a model whose cached blocks alone do
// not make a prefix (recurrent or sliding-window layers) resumed: after
// Position tokens, of the Cached tokens of full blocks the cache held (less
// when the checkpoints or windows there were gone; Position 0 with Cached
// above 0 says they all were).
type Checkpoint struct {
	Position int `json:"position"`
	Cached   int `json:"cached"`
	// Kind is "state" (a recurrent state checkpoint) or "window" (the
	// sliding layers' blocks of the last window).
	Kind string `json:"kind"`
	// Req is the request that took a state checkpoint, and At where:
	// "branch", "prompt", "chunk" or "decode".
	Req int64  `json:"req,omitempty"`
	At  string `json:"at,omitempty"`
}
