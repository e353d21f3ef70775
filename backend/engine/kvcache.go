package engine

import "time"

// kvCache is the engine's cache manager: it owns the block pool, the chain
// hashes of each sequence's blocks and the reuse bound. The scheduler sees
// it only through computedPrefix, take, grow, commit and free, and never
// touches a block id itself.
type kvCache struct {
	pool *BlockPool
	bs   int
	ever *reuseBound
	// copy copies the K/V of the first n slots of block src into dst
	// (every layer); nil turns tail reuse off.
	copy func(dst, src BlockID, n int)
	// noReuse: no request takes cached blocks (a model whose recurrent
	// state the blocks do not hold; recurrent.go).
	noReuse bool

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

func newKVCache(blocks, blockSize int, copy func(dst, src BlockID, n int)) *kvCache {
	pool := NewBlockPool(blocks)
	c := &kvCache{pool: pool, bs: blockSize, ever: newReuseBound(pool, reuseMemory*blocks), copy: copy,
		sessions: map[string]time.Time{}, now: time.Now}
	pool.Idle = c.idle
	return c
}

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

// computedPrefix is how many of a waiting request's tokens the cache holds
// (the last token is always left to compute, for its logits).
func (c *kvCache) computedPrefix(s *seq) int {
	if c.noReuse {
		return 0
	}
	full := len(s.tokens) / c.bs
	c.hashUpTo(s, full)
	n := 0
	for n < full {
		if _, ok := c.pool.Lookup(s.hashes[n]); !ok {
			break
		}
		n++
	}
	hit := n * c.bs
	if c.copy != nil && hit < len(s.tokens) {
		_, k := c.pool.LookupTail(c.tailKey(s, n), s.tokens[hit:])
		hit += k
	}
	return min(hit, len(s.tokens)-1)
}

// take gives a request with no blocks its cached prefix: references on the
// cached full blocks, then a copy of the cached partial block that shares
// most of its next tokens, and s.computed past them. It returns the tokens
// found in full blocks (hit), those copied from a partial one (tail), and
// the reuse bound (tokens of full blocks earlier requests committed) with,
// when it reused less than that or left a predecessor's path, the reason.
func (c *kvCache) take(s *seq) (hit, tail, bound int, div *Divergence) {
	full := len(s.tokens) / c.bs
	c.hashUpTo(s, full)
	c.touch(s)
	n := 0
	for n < full && !c.noReuse {
		id, ok := c.pool.Lookup(s.hashes[n])
		if !ok {
			break
		}
		if c.pool.Kept(id) && c.keptHits != nil {
			c.keptHits.Add(float64(c.bs))
		}
		c.pool.Ref(id)
		s.table = append(s.table, id)
		n++
	}
	s.committed = n
	// With every token cached, the last is still recomputed for its logits.
	s.computed = min(n*c.bs, len(s.tokens)-1)
	tail = c.takeTail(s, n)
	b := 0
	for b < full && c.ever.has(s.hashes[b]) {
		b++
	}
	if c.noReuse {
		return 0, 0, b * c.bs, nil
	}
	return n * c.bs, tail, b * c.bs, c.diverged(s, n, b)
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
	s.table = append(s.table, ids[0])
	s.computed = at + k
	return k
}

// grow makes s's block table hold n tokens; it takes nothing when the pool
// has too few free blocks.
func (c *kvCache) grow(s *seq, n int) bool {
	need := (n+c.bs-1)/c.bs - len(s.table)
	if need <= 0 {
		return true
	}
	ids, ok := c.pool.Allocate(need)
	if !ok {
		return false
	}
	s.table = append(s.table, ids...)
	return true
}

// room is how many tokens s could hold, counting every free block.
func (c *kvCache) room(s *seq) int { return (len(s.table) + c.pool.Free()) * c.bs }

// commit registers every newly full, computed block of s in the cache.
func (c *kvCache) commit(s *seq) {
	full := s.computed / c.bs
	if full <= s.committed {
		return
	}
	c.hashUpTo(s, full)
	for b := s.committed; b < full; b++ {
		c.pool.Commit(s.table[b], s.hashes[b])
		c.ever.commit(s.hashes[b], c.tailKey(s, b), s.tokens[b*c.bs:(b+1)*c.bs])
	}
	s.committed = full
}

// free returns s's blocks to the pool: committed ones stay cached, and so
// does its last, partial block as a tail (over its computed tokens).
func (c *kvCache) free(s *seq) {
	if f := s.computed / c.bs; c.copy != nil && s.computed%c.bs != 0 && f < len(s.table) && s.committed == f {
		c.pool.CommitTail(s.table[f], c.tailKey(s, f), s.tokens[f*c.bs:s.computed])
	}
	session := ""
	if c.retain > 0 {
		session = s.req.Session
		c.touch(s)
	}
	c.pool.ReleaseFor(s.table, session)
	s.table, s.computed, s.committed = nil, 0, 0
}
