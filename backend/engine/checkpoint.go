package engine

import "slices"

// A recurrent layer's state is not positional (model.StateStore): a cached
// block does not hold the state after it, so a prompt resumes after b
// blocks only from a checkpoint of the state there, taken at a block
// boundary (where, prefill being cut at block boundaries, a state is
// exact). The cache keeps such checkpoints keyed by the chain hash of the
// block before them, in pages of the pool: a checkpoint is StatePages
// pages committed under pageKey(h, stateGroup, part) and released at
// once, so it is evicted as the blocks are, from the head of the free
// queue (BlockPool: a checkpoint goes where a block released when it was
// stored, or last taken, would; a sequence's last one is released again
// when the sequence ends, after its blocks past it: kvCache.free), and an
// eviction of any of its pages drops it whole.
//
// A sequence stores a checkpoint, once its block is committed, at:
//   - the end of the cached chain it found beyond where it resumed (a
//     branch point: another request shares the prefix up to there);
//   - its prompt's last block boundary;
//   - a prefill chunk's end at least a quarter of the prompt (and 4
//     blocks) past its previous checkpoint;
//   - each block boundary its decode reaches, replacing its previous
//     decode checkpoint (whose pages it reuses first: Discard), so that
//     the next turn of a conversation resumes within a block of where
//     this one stopped.
//
// Prefill stops at the first two (align). A checkpoint taken in decode
// holds the state of one-token steps, and a prompt that later covers the
// same tokens computes them in the chunked form: the two agree within
// float rounding (the model's contract), as a cached block of decoded
// tokens does with a recomputed one.
type stateCache struct {
	bs      int
	pages   int                       // per checkpoint
	slots   []int                     // free state slots
	byKey   map[BlockHash]*checkpoint // by the chain hash of the block before it
	page    map[BlockID]*checkpoint
	pool    *BlockPool
	save    func(slot int, pages []BlockID) error // state of slot → pages
	load    func(pages []BlockID, slot int) error // pages → state of slot
	session func(*seq) string                     // what s's released pages are kept under
	// stored and taken count checkpoints kept and requests resumed from one.
	stored, taken *counter
}

// checkpoint is the state of a sequence after Pos tokens, in pages.
type checkpoint struct {
	key   BlockHash
	pages []BlockID
	pos   int
	req   int64
	at    string // where the sequence took it: "branch", "prompt", "chunk" or "decode"
}

// Checkpoint says where a request of a model whose cached blocks alone do
// not make a prefix (recurrent or sliding-window layers) resumed its
// prompt: after Position tokens, of the Cached tokens of full blocks the
// cache held (less when the checkpoints or windows there were gone).
type Checkpoint struct {
	Position int `json:"position"`
	Cached   int `json:"cached"`
	// Kind is "state" (a recurrent checkpoint) or "window" (the sliding
	// layers' blocks of the last window).
	Kind string `json:"kind"`
	// Req is the request that took a state checkpoint, and At where:
	// "branch", "prompt", "chunk" or "decode".
	Req int64  `json:"req,omitempty"`
	At  string `json:"at,omitempty"`
}

func newStateCache(pool *BlockPool, bs, slots, pages int) *stateCache {
	c := &stateCache{bs: bs, pages: pages, pool: pool, byKey: map[BlockHash]*checkpoint{}, page: map[BlockID]*checkpoint{}}
	for i := slots - 1; i >= 0; i-- {
		c.slots = append(c.slots, i)
	}
	pool.OnEvict = c.evicted
	return c
}

// find is the checkpoint after the block whose chain hash is h, if kept.
func (c *stateCache) find(h BlockHash) *checkpoint {
	if c.pages == 0 {
		return nil
	}
	return c.byKey[h]
}

// take gives s a state slot (NOTE: at most as many sequences run as
// there are slots, so one is free) and, to resume after b > 0 blocks, the
// checkpoint's state, which then counts as used just now; it returns
// where s resumes (0 when the state could not be read) and plans s's
// checkpoints from there (n: the full blocks the cache held).
func (c *stateCache) take(s *seq, b, n int) (*Checkpoint, int) {
	if s.slot < 0 {
		s.slot, c.slots = c.slots[len(c.slots)-1], c.slots[:len(c.slots)-1]
	}
	var ck *checkpoint
	if b > 0 {
		ck = c.byKey[s.hashes[b-1]]
		if err := c.load(ck.pages, s.slot); err != nil {
			ck, b = nil, 0
		}
	}
	s.ckptAt, s.roll = b*c.bs, nil
	c.plan(s, b, n)
	if ck == nil {
		return nil, 0
	}
	c.touch(ck, c.pool.blocks[ck.pages[0]].session)
	if c.taken != nil {
		c.taken.Inc()
	}
	return &Checkpoint{Kind: "state", Req: ck.req, At: ck.at}, b
}

// plan sets where s's prefill stops for a checkpoint: past b, the end of
// the cached chain it found (n blocks) and its prompt's last block
// boundary.
func (c *stateCache) plan(s *seq, b, n int) {
	s.want = s.want[:0]
	for _, p := range []int{n * c.bs, len(s.tokens) / c.bs * c.bs} {
		if p > b*c.bs && !slices.Contains(s.want, p) {
			s.want = append(s.want, p)
		}
	}
	slices.Sort(s.want)
}

// align cuts a prefill chunk of n tokens of s at the first checkpoint it
// wants past s.computed, and then at a block boundary unless it reaches
// the prompt's end (model.StateStore: so that a sequence's bits do not
// depend on how the budgets cut it).
func (c *stateCache) align(s *seq, n int) int {
	for _, w := range s.want {
		if s.computed < w && w < s.computed+n {
			n = w - s.computed
			break
		}
	}
	if s.computed+n >= len(s.tokens) {
		return n
	}
	return (s.computed+n)/c.bs*c.bs - s.computed
}

// checkpoint keeps s's state if s stands at a committed block boundary
// where it wants one (see stateCache).
func (c *stateCache) checkpoint(s *seq, prefill bool) {
	pos := s.computed
	if c.pages == 0 || pos == 0 || pos%c.bs != 0 || pos <= s.ckptAt || pos/c.bs > s.committed {
		return
	}
	at := "decode"
	if prefill {
		switch {
		case slices.Contains(s.want, pos) && pos == len(s.tokens)/c.bs*c.bs:
			at = "prompt"
		case slices.Contains(s.want, pos):
			at = "branch"
		case pos-s.ckptAt >= max(4*c.bs, len(s.tokens)/4):
			at = "chunk"
		default:
			return
		}
	}
	s.ckptAt = pos
	key := s.hashes[pos/c.bs-1]
	if c.byKey[key] != nil {
		return // another sequence's, of the same prefix
	}
	if !prefill && s.roll != nil {
		c.drop(s.roll, true)
	}
	ck := c.store(s, pos, key, at)
	if !prefill {
		s.roll = ck
	}
}

// store writes s's state into fresh pages, and keeps them as a checkpoint
// under key, released to the free queue as s's blocks would be.
func (c *stateCache) store(s *seq, pos int, key BlockHash, at string) *checkpoint {
	ids, ok := c.pool.allocate(c.pages, pageState)
	if !ok {
		return nil
	}
	if err := c.save(s.slot, ids); err != nil {
		c.pool.Release(ids)
		return nil
	}
	ck := &checkpoint{key: key, pages: ids, pos: pos, req: s.id, at: at}
	for i, id := range ids {
		c.pool.Commit(id, pageKey(key, stateGroup, i))
		c.page[id] = ck
	}
	c.byKey[key] = ck
	c.pool.ReleaseFor(ids, c.session(s))
	if c.stored != nil {
		c.stored.Inc()
	}
	return ck
}

// touch releases a kept checkpoint's pages again, as if used just now
// (at the tail of the free queue, or the kept one of session).
func (c *stateCache) touch(ck *checkpoint, session string) {
	for _, id := range ck.pages {
		c.pool.Ref(id)
	}
	c.pool.ReleaseFor(ck.pages, session)
}

// stateGroup is pageKey's group for the pages of a checkpoint.
const stateGroup = 1<<16 - 1

// drop forgets a checkpoint (if still kept); discard puts its pages at
// the head of the free queue, to be reused first.
func (c *stateCache) drop(ck *checkpoint, discard bool) {
	if c.byKey[ck.key] != ck {
		return
	}
	delete(c.byKey, ck.key)
	for _, id := range ck.pages {
		delete(c.page, id)
		if discard {
			c.pool.Discard(id)
		} else {
			c.pool.Uncommit(id)
		}
	}
}

// evicted hears of a page the pool reused: a checkpoint that had it is
// gone.
func (c *stateCache) evicted(id BlockID, _ BlockHash) {
	if ck := c.page[id]; ck != nil {
		c.drop(ck, false)
	}
}

// free gives s's slot back (its state is dead: the next holder starts
// from position 0 or a checkpoint); its checkpoints stay.
func (c *stateCache) release(s *seq) {
	if s.slot >= 0 {
		c.slots = append(c.slots, s.slot)
		s.slot = -1
	}
	s.roll = nil
}

// size is how many checkpoints are kept (for tests).
func (c *stateCache) size() int { return len(c.byKey) }
