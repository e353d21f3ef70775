package engine

import (
	"time"

	"jspark/backend/model"
)

// kvCache is the engine's cache manager: it owns the page pool, the chain
// hashes of each sequence's blocks, the reuse bound and, for a model with
// recurrent layers, the state slots and checkpoints (checkpoint.go). The
// scheduler sees it only through computedPrefix, take, align, grow, room,
// commit and free, and never touches a page id or a slot itself.
//
// A sequence holds a block table per KV group of the store
// (model.KVLayout), all as long as its blocks: a full-attention group
// keeps every block; a sliding-window group frees each block once it lies
// wholly before the window of the sequence's next token (trim), so its
// table starts with -1s. Each group caches its blocks under their chain
// hash (pageKey), so a prompt resumes after b blocks when every full
// group holds its first b blocks, every sliding group the blocks of the
// last window before b, and, for recurrent layers, a checkpoint holds the
// state after them (resumable).
type kvCache struct {
	pool   *BlockPool
	bs     int
	groups []model.KVGroup
	full   int // how many groups are full-attention ones
	ever   *reuseBound
	// copy copies the K/V of the first n slots of block src into dst
	// (every layer); nil turns tail reuse off (a store of several groups,
	// or a recurrent model).
	copy   func(dst, src BlockID, n int)
	states *stateCache // nil for a model without recurrent layers

	// Session retention: blocks released by a session active within
	// retain are evicted after all others (retain ≤ 0: off).
	retain   time.Duration
	sessions map[string]time.Time // last activity of each recent session
	now      func() time.Time     // the clock (tests replace it)
	// keptHits counts tokens of full-block hits on blocks found in the kept
	// queue: an upper bound on the hits retention saved (plain LRU might
	// still have had some of them).
	keptHits *counter
}

// reuseMemory is how many committed hashes, per block of the pool, the
// reuse bound remembers beyond what the pool caches.
const reuseMemory = 4

// newKVCache makes a cache of pages pages for a store of the given KV
// groups (at least one).
func newKVCache(pages, blockSize int, groups []model.KVGroup, copy func(dst, src BlockID, n int)) *kvCache {
	pool := NewBlockPool(pages)
	c := &kvCache{pool: pool, bs: blockSize, groups: groups, ever: newReuseBound(pool, reuseMemory*pages), copy: copy,
		sessions: map[string]time.Time{}, now: time.Now}
	for _, g := range groups {
		if g.Kind == model.FullAttention {
			c.full++
		}
	}
	if len(groups) > 1 {
		c.copy = nil
	}
	pool.Idle = c.idle
	return c
}

// pageKey is the cache key of group g's block with chain hash h (h itself
// for group 0's), or of part part of the state checkpoint after it (g =
// stateGroup). NOTE: chain hashes are SHA-256: two differ in only these
// few bytes by chance alone.
func pageKey(h BlockHash, g, part int) BlockHash {
	h[31] ^= byte(g)
	h[30] ^= byte(g >> 8)
	h[29] ^= byte(part)
	h[28] ^= byte(part >> 8)
	h[27] ^= byte(part >> 16)
	return h
}

// hybrid: some group is not a full-attention one, or the model has
// recurrent layers: cached blocks alone do not make a prefix.
func (c *kvCache) hybrid() bool { return c.full < len(c.groups) || c.states != nil }

// idle reports that a session was not active within the retention time; it
// forgets such sessions.
func (c *kvCache) idle(session string) bool {
	at, ok := c.sessions[session]
	if ok && c.now().Sub(at) <= c.retain {
		return false
	}
	delete(c.sessions, session)
	return true
}

// touch records activity of s's session.
func (c *kvCache) touch(s *seq) {
	if c.retain > 0 && s.req.Session != "" {
		c.sessions[s.req.Session] = c.now()
	}
}

// session is what s's released blocks are kept under: its session while
// retention is on, else none.
func (c *kvCache) session(s *seq) string {
	if c.retain > 0 {
		return s.req.Session
	}
	return ""
}

// tailKey is where the partial blocks after s's first full blocks are found.
func (c *kvCache) tailKey(s *seq, full int) BlockHash {
	var parent BlockHash
	if full > 0 {
		parent = s.hashes[full-1]
	}
	return TailKey(parent, s.req.CacheSalt)
}

// hashUpTo extends s.hashes over the first blocks full blocks of its tokens.
func (c *kvCache) hashUpTo(s *seq, blocks int) {
	for len(s.hashes) < blocks {
		i := len(s.hashes)
		var parent BlockHash
		if i > 0 {
			parent = s.hashes[i-1]
		}
		s.hashes = append(s.hashes, HashBlock(parent, s.req.CacheSalt, s.tokens[i*c.bs:(i+1)*c.bs]))
	}
}

// cached is how many leading full blocks of s's tokens every full group
// holds (all of them, for a store of sliding groups only: resumable
// decides).
func (c *kvCache) cached(s *seq) int {
	full := len(s.tokens) / c.bs
	c.hashUpTo(s, full)
	for n := 0; n < full; n++ {
		for g, grp := range c.groups {
			if grp.Kind != model.FullAttention {
				continue
			}
			if _, ok := c.pool.Lookup(pageKey(s.hashes[n], g, 0)); !ok {
				return n
			}
		}
	}
	return full
}

// resumable is the most blocks b ≤ n of s's prompt, whose first n blocks
// the full groups hold, that it can resume after: every sliding group
// holds the blocks of the last window before b, and a recurrent model has
// a checkpoint after block b. Then b stays short of the prompt's end: the
// state after its last token is never needed (that token is recomputed
// for its logits).
func (c *kvCache) resumable(s *seq, n int) int {
	if !c.hybrid() {
		return n
	}
	for b := min(n, (len(s.tokens)-1)/c.bs); b > 0; b-- {
		if (c.states == nil || c.states.find(s.hashes[b-1]) != nil) && c.windowsHeld(s, b) {
			return b
		}
	}
	return 0
}

// windowsHeld: every sliding group holds the blocks of s that the window
// of position b·bs reaches.
func (c *kvCache) windowsHeld(s *seq, b int) bool {
	for g, grp := range c.groups {
		if grp.Kind != model.SlidingWindow {
			continue
		}
		for e := c.windowStart(grp, b*c.bs); e < b; e++ {
			if _, ok := c.pool.Lookup(pageKey(s.hashes[e], g, 0)); !ok {
				return false
			}
		}
	}
	return true
}

// windowStart is the first block a sliding group's token at pos reads.
func (c *kvCache) windowStart(grp model.KVGroup, pos int) int {
	return max(0, pos-grp.Window+1) / c.bs
}

// computedPrefix is how many of a waiting request's tokens the cache holds
// (the last token is always left to compute, for its logits).
func (c *kvCache) computedPrefix(s *seq) int {
	n := c.cached(s)
	b := c.resumable(s, n)
	hit := b * c.bs
	if c.copy != nil && hit < len(s.tokens) {
		_, k := c.pool.LookupTail(c.tailKey(s, b), s.tokens[hit:])
		hit += k
	}
	return min(hit, len(s.tokens)-1)
}

// take gives a request with no blocks its cached prefix: references on the
// cached blocks of every group (a sliding group's from its last window
// on), for a recurrent model a state slot with the checkpoint's state,
// then a copy of the cached partial block that shares most of its next
// tokens, and s.computed past them. It returns the tokens found in full
// blocks (hit), those copied from a partial one (tail), and the reuse
// bound (tokens of full blocks earlier requests committed) with, when it
// reused less than that or left a predecessor's path, the reason; and,
// for a hybrid model, where it resumed.
func (c *kvCache) take(s *seq) (hit, tail, bound int, div *Divergence, ck *Checkpoint) {
	full := len(s.tokens) / c.bs
	c.hashUpTo(s, full)
	c.touch(s)
	n := c.cached(s)
	b := c.resumable(s, n)
	if c.states != nil {
		ck, b = c.states.take(s, b, n)
	}
	if c.hybrid() && n > 0 {
		if ck == nil {
			ck = &Checkpoint{Kind: "window"}
			if c.states != nil {
				ck.Kind = "state" // none kept short of the prompt's end: Position 0
			}
		}
		ck.Position, ck.Cached = b*c.bs, n*c.bs
	}
	if s.tables == nil {
		s.tables, s.trimmed = make([][]BlockID, len(c.groups)), make([]int, len(c.groups))
	}
	for g, grp := range c.groups {
		lo := 0
		if grp.Kind == model.SlidingWindow {
			lo = c.windowStart(grp, b*c.bs)
		}
		for e := range b {
			if e < lo {
				s.tables[g] = append(s.tables[g], -1)
				continue
			}
			id, _ := c.pool.Lookup(pageKey(s.hashes[e], g, 0))
			if g == 0 && c.pool.Kept(id) && c.keptHits != nil {
				c.keptHits.Add(float64(c.bs))
			}
			c.pool.Ref(id)
			s.tables[g] = append(s.tables[g], id)
		}
		s.trimmed[g] = lo
	}
	s.committed = b
	// With every token cached, the last is still recomputed for its logits.
	s.computed = min(b*c.bs, len(s.tokens)-1)
	if b == n {
		tail = c.takeTail(s, n)
	}
	m := 0
	for m < full && c.ever.has(s.hashes[m]) {
		m++
	}
	return b * c.bs, tail, m * c.bs, c.diverged(s, n, m), ck
}

// takeTail copies the best cached partial block after s's first full
// blocks into a block of s's own (copy on write: the cached one is never
// written), leaving the last token to compute. It returns the tokens taken.
func (c *kvCache) takeTail(s *seq, full int) int {
	at := full * c.bs
	if c.copy == nil || at >= len(s.tokens)-1 {
		return 0
	}
	src, k := c.pool.LookupTail(c.tailKey(s, full), s.tokens[at:])
	if k = min(k, len(s.tokens)-1-at); k <= 0 {
		return 0
	}
	sess := c.pool.blocks[src].session
	c.pool.Ref(src) // held, so that allocating the copy cannot evict it
	defer c.pool.ReleaseFor([]BlockID{src}, sess)
	ids, ok := c.pool.Allocate(1)
	if !ok {
		return 0
	}
	c.copy(ids[0], src, k)
	s.tables[0] = append(s.tables[0], ids[0])
	s.computed = at + k
	return k
}

// grow makes s's block tables hold n tokens, a page per group per new
// block (after trimming what the windows left behind); it takes nothing
// when the pool has too few free pages.
func (c *kvCache) grow(s *seq, n int) bool {
	c.trim(s)
	need := (n+c.bs-1)/c.bs - len(s.tables[0])
	if need <= 0 {
		return true
	}
	if need*len(c.groups) > c.pool.Free() {
		return false
	}
	for g, grp := range c.groups {
		kind := pageFull
		if grp.Kind == model.SlidingWindow {
			kind = pageSliding
		}
		ids, _ := c.pool.allocate(need, kind)
		s.tables[g] = append(s.tables[g], ids...)
	}
	return true
}

// room is how many tokens s could hold, counting every free page.
func (c *kvCache) room(s *seq) int {
	return (len(s.tables[0]) + c.pool.Free()/len(c.groups)) * c.bs
}

// trim frees each sliding group's blocks of s that lie wholly before the
// window of its next token (position s.computed) and are committed: they
// stay cached for a request that resumes where they are in its window.
// NOTE: released with no session: mid-sequence blocks serve only a
// resumption there, so they go before a session's last window.
func (c *kvCache) trim(s *seq) {
	for g, grp := range c.groups {
		if grp.Kind != model.SlidingWindow {
			continue
		}
		lo := min(c.windowStart(grp, s.computed), s.committed)
		t := s.tables[g]
		for e := s.trimmed[g]; e < lo; e++ {
			if t[e] >= 0 {
				c.pool.Release(t[e : e+1])
				t[e] = -1
			}
		}
		s.trimmed[g] = max(s.trimmed[g], lo)
	}
}

// commit registers every newly full, computed block of s in the cache,
// frees what the windows left behind and, for a recurrent model, keeps a
// checkpoint where s stands, if it wants one there (checkpoint.go).
// prefill says whether s's last step was a prefill chunk.
func (c *kvCache) commit(s *seq, prefill bool) {
	if full := s.computed / c.bs; full > s.committed {
		c.hashUpTo(s, full)
		for b := s.committed; b < full; b++ {
			for g := range c.groups {
				if id := s.tables[g][b]; id >= 0 {
					c.pool.Commit(id, pageKey(s.hashes[b], g, 0))
				}
			}
			c.ever.commit(s.hashes[b], c.tailKey(s, b), s.tokens[b*c.bs:(b+1)*c.bs])
		}
		s.committed = full
	}
	c.trim(s)
	if c.states != nil {
		c.states.checkpoint(s, prefill)
	}
}

// free returns s's blocks to the pool, later blocks first: committed ones
// stay cached, and so does its last, partial block as a tail (over its
// computed tokens); a recurrent model's slot goes back.
//
// For a recurrent model, s's last checkpoint is released again between
// the blocks past it and those before it: its blocks past it serve no
// resumption (none resumes without a checkpoint there) and are evicted
// first, then the checkpoint, then the blocks it needs, which earlier
// checkpoints may still use. Released when stored, the checkpoint would
// go before them all and leave them cached for nothing.
func (c *kvCache) free(s *seq) {
	if f := s.computed / c.bs; c.copy != nil && s.computed%c.bs != 0 && f < len(s.tables[0]) && s.committed == f {
		c.pool.CommitTail(s.tables[0][f], c.tailKey(s, f), s.tokens[f*c.bs:s.computed])
	}
	c.touch(s)
	session := c.session(s)
	var ck *checkpoint
	if c.states != nil && s.ckptAt > 0 {
		ck = c.states.find(s.hashes[s.ckptAt/c.bs-1])
	}
	if len(s.tables) > 0 {
		at := 0
		if ck != nil {
			at = min(ck.pos/c.bs, len(s.tables[0]))
		}
		c.release(s, at, len(s.tables[0]), session)
		if ck != nil {
			c.states.touch(ck, session)
		}
		c.release(s, 0, at, session)
	}
	if c.states != nil {
		c.states.release(s)
	}
	for g := range s.tables {
		s.tables[g], s.trimmed[g] = s.tables[g][:0], 0
	}
	s.computed, s.committed = 0, 0
}

// release gives back s's blocks lo to hi-1 in every group, later ones
// first.
func (c *kvCache) release(s *seq, lo, hi int, session string) {
	for e := hi - 1; e >= lo; e-- {
		for _, t := range s.tables {
			if e < len(t) && t[e] >= 0 {
				c.pool.ReleaseFor(t[e:e+1], session)
			}
		}
	}
}

// diverged explains a prompt whose first n full blocks were cached and
// first b committed before: the committed ones past n were evicted, or the
// block after them differs from the one a predecessor committed there.
func (c *kvCache) diverged(s *seq, n, b int) *Divergence {
	if n < b {
		return &Divergence{Reason: "evicted", Position: n * c.bs}
	}
	if b*c.bs >= len(s.tokens) {
		return nil
	}
	prev, ok := c.ever.child(c.tailKey(s, b))
	if !ok {
		return nil
	}
	ours := s.tokens[b*c.bs:]
	for i, t := range prev.tokens {
		if i >= len(ours) {
			return nil // a shorter prompt than its predecessor, not a divergence
		}
		if int(t) != ours[i] {
			// NOTE: at the root every prompt has some predecessor; one that
			// parts within the first half block is another prompt, not a
			// changed one.
			if b == 0 && i < c.bs/2 {
				return nil
			}
			return &Divergence{Reason: "changed", Position: b*c.bs + i, Token: ours[i], Was: int(t)}
		}
	}
	return nil
}
