package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
)

// BlockHash identifies the contents of one full KV block: the hash of its
// parent block's hash, a salt, and its token ids. Equal hashes mean equal
// prefixes, so equal keys and values.
type BlockHash [32]byte

// HashBlock chains one block onto its parent's hash.
func HashBlock(parent BlockHash, salt string, tokens []int) BlockHash {
	h := sha256.New()
	h.Write(parent[:])
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(salt)))
	h.Write(n[:])
	h.Write([]byte(salt))
	buf := make([]byte, 4*len(tokens))
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(buf[4*i:], uint32(t))
	}
	h.Write(buf)
	var out BlockHash
	h.Sum(out[:0])
	return out
}

// BlockID indexes a physical KV block.
type BlockID = int32

type block struct {
	ref        int
	hash       BlockHash
	hashed     bool
	tail       []int     // a cached partial block: the tokens of its valid slots
	tailKey    BlockHash // its place in the tail index, when tail != nil
	session    string    // set while it waits in the kept queue
	prev, next BlockID   // free queue links, -1 at the ends
	queued     bool
	kind       pageKind // what its holder keeps in it, for InUse
}

// pageKind is what a page holds: a block of a full-attention or of a
// sliding-window KV group, or part of a recurrent state checkpoint.
type pageKind uint8

const (
	pageFull pageKind = iota
	pageSliding
	pageState
	pageKinds
)

func (k pageKind) String() string { return [...]string{"full", "sliding", "state"}[k] }

// queue is a doubly linked list of blocks, threaded through their links.
type queue struct{ head, tail BlockID }

// BlockPool hands out KV blocks with reference counts and keeps full blocks
// findable by hash after their requests end.
//
// The free queue holds every block with no reference, in eviction order:
// the head is reused first. Released blocks join at the tail, a request's
// last block first, so among unreferenced blocks the least recently used
// request goes first and, within one request, its later blocks go before
// its earlier ones (a later block is useless without the earlier ones).
// A free block that still has a hash is a cache entry until it is reused.
//
// Blocks released by a request of a session go to a second, kept queue in
// the same order instead: they are reused only when the free queue is
// empty, after the blocks of sessions that have gone idle (Idle) have
// rejoined the head of the free queue. So an agent's prefix outlives other
// traffic while its tool runs.
//
// A request's last, partial block can be cached too (a tail): it is found
// by its parent's chain and its tokens, and only ever read (a request that
// extends it copies it first), so it too stays valid until reused.
//
// A block is a page of the store (model.KVLayout): whichever KV group, or
// recurrent state checkpoint, holds it, all take from the one free queue
// in the one order above, so a checkpoint is evicted as a block released
// when it was stored (or last taken, or its sequence ended) would be.
type BlockPool struct {
	blocks []block
	lru    queue // the free queue
	kept   queue // free blocks of sessions, reused last
	free   int
	inUse  [pageKinds]int // referenced blocks, by kind
	cached map[BlockHash]BlockID
	tails  map[BlockHash][]BlockID // tail key → partial blocks under that parent
	// Idle reports that a session's kept blocks may rejoin the free queue
	// (nil: every session is idle).
	Idle func(session string) bool
	// OnEvict, when set, hears of each cache entry that Allocate evicts.
	OnEvict func(id BlockID, h BlockHash)
}

// NewBlockPool makes a pool of n free blocks.
func NewBlockPool(n int) *BlockPool {
	p := &BlockPool{blocks: make([]block, n), lru: queue{-1, -1}, kept: queue{-1, -1},
		cached: map[BlockHash]BlockID{}, tails: map[BlockHash][]BlockID{}}
	for i := range p.blocks {
		p.blocks[i].prev, p.blocks[i].next = -1, -1
		p.pushTail(BlockID(i))
	}
	return p
}

// Capacity is the number of blocks.
func (p *BlockPool) Capacity() int { return len(p.blocks) }

// Free is the number of unreferenced blocks (cached or not).
func (p *BlockPool) Free() int { return p.free }

// CachedBlocks is the number of blocks findable by hash.
func (p *BlockPool) CachedBlocks() int { return len(p.cached) }

// InUse is the number of referenced blocks of a kind.
func (p *BlockPool) InUse(k pageKind) int { return p.inUse[k] }

// Kept reports whether a block waits, unreferenced, in the kept queue.
func (p *BlockPool) Kept(id BlockID) bool { b := &p.blocks[id]; return b.queued && b.session != "" }

func (p *BlockPool) queueOf(id BlockID) *queue {
	if p.blocks[id].session != "" {
		return &p.kept
	}
	return &p.lru
}

func (p *BlockPool) pushTail(id BlockID) {
	q, b := p.queueOf(id), &p.blocks[id]
	b.prev, b.next, b.queued = q.tail, -1, true
	if q.tail >= 0 {
		p.blocks[q.tail].next = id
	} else {
		q.head = id
	}
	q.tail = id
	p.free++
}

func (p *BlockPool) pushHead(id BlockID) {
	q, b := p.queueOf(id), &p.blocks[id]
	b.prev, b.next, b.queued = -1, q.head, true
	if q.head >= 0 {
		p.blocks[q.head].prev = id
	} else {
		q.tail = id
	}
	q.head = id
	p.free++
}

func (p *BlockPool) unlink(id BlockID) {
	q, b := p.queueOf(id), &p.blocks[id]
	if b.prev >= 0 {
		p.blocks[b.prev].next = b.next
	} else {
		q.head = b.next
	}
	if b.next >= 0 {
		p.blocks[b.next].prev = b.prev
	} else {
		q.tail = b.prev
	}
	b.prev, b.next, b.queued = -1, -1, false
	p.free--
}

// Lookup returns the cached block holding hash, if any.
func (p *BlockPool) Lookup(h BlockHash) (BlockID, bool) {
	id, ok := p.cached[h]
	return id, ok
}

// Ref takes a reference on a block found by Lookup.
func (p *BlockPool) Ref(id BlockID) {
	b := &p.blocks[id]
	if b.ref == 0 && b.queued {
		p.unlink(id)
		b.session = ""
	}
	if b.ref == 0 {
		p.inUse[b.kind]++
	}
	b.ref++
}

// Allocate takes n blocks from the head of the free queue, evicting their
// cache entries; past its end, idle sessions' blocks rejoin it, then kept
// ones are taken too. It takes nothing when fewer than n are free.
func (p *BlockPool) Allocate(n int) ([]BlockID, bool) { return p.allocate(n, pageFull) }

func (p *BlockPool) allocate(n int, kind pageKind) ([]BlockID, bool) {
	if n > p.free {
		return nil, false
	}
	ids := make([]BlockID, n)
	demoted := false
	for i := range ids {
		if p.lru.head < 0 && !demoted {
			p.demoteIdle()
			demoted = true
		}
		id := p.lru.head
		if id < 0 {
			id = p.kept.head
		}
		p.unlink(id)
		b := &p.blocks[id]
		b.session = ""
		if b.hashed {
			if p.cached[b.hash] == id {
				delete(p.cached, b.hash)
				if p.OnEvict != nil {
					p.OnEvict(id, b.hash)
				}
			}
			b.hashed = false
		}
		p.dropTail(id)
		b.ref, b.kind = 1, kind
		p.inUse[kind]++
		ids[i] = id
	}
	return ids, true
}

// demoteIdle moves the kept blocks of idle sessions to the head of the free
// queue, in their order: they were released before anything in it.
func (p *BlockPool) demoteIdle() {
	for id := p.kept.tail; id >= 0; {
		prev := p.blocks[id].prev
		if p.Idle == nil || p.Idle(p.blocks[id].session) {
			p.unlink(id)
			p.blocks[id].session = ""
			p.pushHead(id)
		}
		id = prev
	}
}

// Release drops one reference from each block, last block first.
func (p *BlockPool) Release(ids []BlockID) { p.ReleaseFor(ids, "") }

// ReleaseFor is Release by a request of session: the blocks it frees wait
// in the kept queue (none for the empty session).
func (p *BlockPool) ReleaseFor(ids []BlockID, session string) {
	for i := len(ids) - 1; i >= 0; i-- {
		b := &p.blocks[ids[i]]
		if b.ref <= 0 {
			panic("engine: block released more often than referenced")
		}
		b.ref--
		if b.ref == 0 {
			p.inUse[b.kind]--
			b.session = session
			p.pushTail(ids[i])
		}
	}
}

// Discard drops a block's cache entry and, when nothing references it,
// puts it at the head of the free queue: it is reused first.
func (p *BlockPool) Discard(id BlockID) {
	p.Uncommit(id)
	if b := &p.blocks[id]; b.ref == 0 && b.queued {
		p.unlink(id)
		b.session = ""
		p.pushHead(id)
	}
}

// Uncommit drops a block's cache entry (no OnEvict: its holder asked).
func (p *BlockPool) Uncommit(id BlockID) {
	b := &p.blocks[id]
	if b.hashed && p.cached[b.hash] == id {
		delete(p.cached, b.hash)
	}
	b.hashed = false
}

// Commit makes a full, computed block findable by hash. When another block
// already holds the same contents, that one stays the cache entry.
func (p *BlockPool) Commit(id BlockID, h BlockHash) {
	if _, dup := p.cached[h]; dup {
		return
	}
	b := &p.blocks[id]
	b.hash, b.hashed = h, true
	p.cached[h] = id
}

// TailKey names the partial blocks that may follow a chain: parent is the
// hash of the last full block before them (zero at the start).
func TailKey(parent BlockHash, salt string) BlockHash { return HashBlock(parent, salt, nil) }

// tailsPerKey bounds how many different tails one chain keeps.
const tailsPerKey = 4

// CommitTail makes a partial block findable under key by its first
// len(tokens) slots, which must be computed and are never written again.
// Tails that the new one extends are dropped from the index (they stay in
// the free queue as plain blocks).
func (p *BlockPool) CommitTail(id BlockID, key BlockHash, tokens []int) {
	b := &p.blocks[id]
	if b.hashed || b.tail != nil || len(tokens) == 0 {
		return
	}
	for _, o := range slices.Clone(p.tails[key]) {
		if t := p.blocks[o].tail; len(t) <= len(tokens) && slices.Equal(t, tokens[:len(t)]) {
			p.dropTail(o)
		}
	}
	if l := p.tails[key]; len(l) >= tailsPerKey {
		p.dropTail(l[0])
	}
	b.tail, b.tailKey = slices.Clone(tokens), key
	p.tails[key] = append(p.tails[key], id)
}

// LookupTail finds the cached partial block under key whose tokens share
// the longest prefix with tokens, and that prefix's length.
func (p *BlockPool) LookupTail(key BlockHash, tokens []int) (BlockID, int) {
	best, n := BlockID(-1), 0
	for _, id := range p.tails[key] {
		t := p.blocks[id].tail
		c := 0
		for c < len(t) && c < len(tokens) && t[c] == tokens[c] {
			c++
		}
		if c > n {
			best, n = id, c
		}
	}
	return best, n
}

// TailBlocks is the number of cached partial blocks.
func (p *BlockPool) TailBlocks() int {
	n := 0
	for _, l := range p.tails {
		n += len(l)
	}
	return n
}

func (p *BlockPool) dropTail(id BlockID) {
	b := &p.blocks[id]
	if b.tail == nil {
		return
	}
	l := slices.DeleteFunc(p.tails[b.tailKey], func(x BlockID) bool { return x == id })
	if len(l) == 0 {
		delete(p.tails, b.tailKey)
	} else {
		p.tails[b.tailKey] = l
	}
	b.tail = nil
}
