package engine

import "container/list"

// reuseBound remembers which block hashes requests have committed, for the
// reuse bound (how much of a prompt was committed before, cached or not)
// and the divergence report (where a prompt left its predecessors' path).
// It is bounded: a hash counts while the pool still caches its block, or
// while it is among the cap most recently committed or reused hashes.
type reuseBound struct {
	cap      int
	pool     *BlockPool
	lru      *list.List // of *committedBlock, most recent at the front
	byHash   map[BlockHash]*list.Element
	children map[BlockHash]BlockHash // tail key of a parent → its latest committed child
}

// committedBlock is one committed block as the reuse bound keeps it.
type committedBlock struct {
	hash, under BlockHash // under: the tail key of its parent chain
	tokens      []int32
}

func newReuseBound(pool *BlockPool, cap int) *reuseBound {
	return &reuseBound{cap: cap, pool: pool, lru: list.New(), byHash: map[BlockHash]*list.Element{}, children: map[BlockHash]BlockHash{}}
}

// commit records a committed block: its hash, the key of its parent chain
// and its tokens.
func (r *reuseBound) commit(h, under BlockHash, tokens []int) {
	r.children[under] = h
	if el, ok := r.byHash[h]; ok {
		r.lru.MoveToFront(el)
		return
	}
	b := &committedBlock{hash: h, under: under, tokens: make([]int32, len(tokens))}
	for i, t := range tokens {
		b.tokens[i] = int32(t)
	}
	r.byHash[h] = r.lru.PushFront(b)
	for r.lru.Len() > r.cap {
		old := r.lru.Remove(r.lru.Back()).(*committedBlock)
		delete(r.byHash, old.hash)
		if r.children[old.under] == old.hash {
			delete(r.children, old.under)
		}
	}
}

// has reports whether h was committed (and is still remembered); a hit
// counts as a use.
func (r *reuseBound) has(h BlockHash) bool {
	if el, ok := r.byHash[h]; ok {
		r.lru.MoveToFront(el)
		return true
	}
	_, ok := r.pool.Lookup(h)
	return ok
}

// child is the latest remembered block committed after the chain under.
func (r *reuseBound) child(under BlockHash) (*committedBlock, bool) {
	h, ok := r.children[under]
	if !ok {
		return nil, false
	}
	el, ok := r.byHash[h]
	if !ok {
		return nil, false
	}
	return el.Value.(*committedBlock), true
}

// size is how many hashes it holds (for tests).
func (r *reuseBound) size() (hashes, children int) { return len(r.byHash), len(r.children) }

// Divergence says why a request reused less of its prompt than earlier
// requests had committed: at Position its token (Token) differs from the
// one a predecessor had there (Was), or (Reason "evicted") the committed
// prefix from Position on was no longer cached.
type Divergence struct {
	Req      int64  `json:"req,omitempty"`
	Reason   string `json:"reason"` // "changed" or "evicted"
	Position int    `json:"position"`
	Token    int    `json:"token,omitempty"`
	Was      int    `json:"was,omitempty"`
	// Text and WasText are the two tokens' text, as the tokenizer spells
	// them (special tokens included), so a client sees what changed.
	Text    string `json:"text,omitempty"`
	WasText string `json:"was_text,omitempty"`
}
