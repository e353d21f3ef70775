package engine

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestSessionRetention: under pressure, the blocks of a session active
// within SessionRetain are evicted after plain traffic's and an idle
// session's; with retention off, plain LRU evicts the active session's.
func TestSessionRetention(t *testing.T) {
	m := tinyModel(t, 16, 1)
	for _, on := range []bool{true, false} {
		retain := time.Minute
		if !on {
			retain = -1
		}
		e := newEngine(t, m, func(o *Options) { o.KVBlocks, o.SessionRetain = 20, retain })
		var clock atomic.Int64 // seconds, read by the engine's loop
		e.cache.now = func() time.Time { return time.Unix(clock.Load(), 0) }
		idle := Request{Prompt: prompt(120, 96, m.Vocab), MaxTokens: 1, IgnoreEOS: true, Session: "idle"}
		active := Request{Prompt: prompt(121, 96, m.Vocab), MaxTokens: 1, IgnoreEOS: true, Session: "active"}
		run(t, e, idle) // t=0: 6 blocks, idle by the time pressure comes
		clock.Store(100)
		run(t, e, active)                              // t=100: 6 blocks, still active at t=110
		run(t, e, greedy(prompt(122, 96, m.Vocab), 1)) // plain traffic, released last
		clock.Store(110)
		run(t, e, greedy(prompt(123, 220, m.Vocab), 1)) // needs 14 of the 20 blocks
		a := run(t, e, active).finish.Usage.CachedTokens
		i := run(t, e, idle).finish.Usage.CachedTokens
		t.Logf("retention %v: the active session's repeat found %d of 96 tokens, the idle one's %d; kept hits %d",
			on, a, i, e.Metrics().Snapshot().SessionKeptHits)
		if on && (a != 96 || i == 96 || e.Metrics().Snapshot().SessionKeptHits == 0) {
			t.Fatalf("with retention the active session kept %d tokens and the idle one %d (want 96 and fewer)", a, i)
		}
		if !on && a == 96 {
			t.Fatal("with retention off the active session kept its blocks: the test has no pressure")
		}
		waitIdle(t, e)
	}
}
