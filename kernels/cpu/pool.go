package cpu

import (
	"runtime"
	"sync/atomic"
	"time"
)

// runner is a parallel kernel: task(worker, i) computes piece i on worker.
type runner interface{ task(worker, i int) }

// funcRunner adapts a function.
type funcRunner func(worker, i int)

func (f funcRunner) task(worker, i int) { f(worker, i) }

// pool runs index ranges on a fixed set of goroutines that live as long as
// the kernels. The caller takes part, so a pool of n uses n-1 helpers. A
// call hands out pieces from one shared counter, so a core that another
// process slows simply takes fewer; nothing is allocated per call.
//
// A decode step is ~100 parallel calls of 20-100 µs each. Waking a parked
// goroutine (futex, scheduler, an idle core) took long enough that the
// helper joined late: a 110M F16 decode used 1.44 of 2 cores. So after a
// call a helper spins a while, watching for the next, and only then parks;
// the caller wakes through the channel only a helper that has parked, and
// waits for the helpers by spinning briefly, then blocking. An idle engine
// parks them all, so it costs nothing.
type pool struct {
	workers int
	helpers []helper
	r       runner
	total   int64
	next    atomic.Int64
	gen     atomic.Uint64 // bumped once per parallel call
	pending atomic.Int32  // helpers yet to finish the current call
	// waiting is the generation whose caller has blocked on done (0: none).
	// NOTE: a generation, not a flag: a helper descheduled between its
	// last decrement of one call and its signal could otherwise wake the
	// caller of the next call while helpers still run that call's tasks.
	waiting atomic.Uint64
	done    chan struct{}
	// pause, set by tests, holds a goroutine at a point where a busy
	// machine may deschedule it.
	pause func(at pausePoint)
}

type pausePoint int

const (
	pauseBeforeSignal pausePoint = iota // a helper: decremented pending, not yet signalled
	pauseAfterPark                      // a helper: marked parked, gen not yet checked
	pauseBeforeWake                     // the caller: saw a helper parked, not yet claimed it
)

func (p *pool) hold(at pausePoint) {
	if p.pause != nil {
		p.pause(at)
	}
}

type helper struct {
	// parked is 1 + the generation a parked helper has done (0: not
	// parked): the caller of generation g wakes only a helper parked at
	// g-1. NOTE: a generation, not a flag: a helper could otherwise run a
	// whole call and park again between the caller's look and its wake,
	// and the wake meant for the call it already did would run it twice.
	parked atomic.Uint64
	wake   chan struct{}
	_      [48]byte // its own cache line: the caller and it both write parked
}

// spinHelper is how long an idle helper watches for the next call before
// it parks (the gaps inside a decode step are a few µs), spinCaller how
// long the caller waits for its helpers before it blocks (a helper ends
// its last task a few µs after the caller; a blocked caller woke tens of
// µs late: 5 µs here decoded 110M F32 at 80 tok/s, 50 µs at 106-110).
// Spinning costs where other processes want the cores: with one busy
// process beside it on this 2-core machine a 110M F16 decode ran at
// 0.73-0.86× the parking pool's speed (llama.cpp's spinning threads at
// 0.28× their own); on quiet cores at 1.4×.
const (
	spinHelper = 100 * time.Microsecond
	spinCaller = 50 * time.Microsecond
)

func newPool(workers int) *pool { return startPool(workers, nil) }

func startPool(workers int, pause func(pausePoint)) *pool {
	p := &pool{workers: workers, done: make(chan struct{}, 1), pause: pause}
	if workers > 1 {
		p.helpers = make([]helper, workers-1)
	}
	for h := range p.helpers {
		p.helpers[h].wake = make(chan struct{}, 1)
		go p.helperLoop(h)
	}
	return p
}

func (p *pool) helperLoop(h int) {
	me := &p.helpers[h]
	var seen uint64
	for {
		g := p.gen.Load()
		if g == seen {
			g = p.await(me, seen)
		}
		seen = g
		p.drain(h + 1)
		last := p.pending.Add(-1) == 0
		p.hold(pauseBeforeSignal)
		if last && p.waiting.CompareAndSwap(g, 0) {
			p.done <- struct{}{}
		}
	}
}

// await returns the next generation after seen: spinning first, then
// parked on the helper's channel.
func (p *pool) await(me *helper, seen uint64) uint64 {
	if spinUntil(spinHelper, func() bool { return p.gen.Load() != seen }) {
		return p.gen.Load()
	}
	// NOTE: a read-modify-write, not a Store: this store and the load of
	// gen below, against the caller's bump of gen and its load of parked,
	// are a Dekker handshake, which needs the store ordered before the
	// load. Go's atomics promise that, but qemu-user on x86 lets an arm64
	// store-release pass a later load-acquire; its RMWs are fenced.
	me.parked.Swap(seen + 1)
	p.hold(pauseAfterPark)
	if p.gen.Load() != seen && me.parked.CompareAndSwap(seen+1, 0) {
		return p.gen.Load() // a call came while we decided to park
	}
	<-me.wake
	return p.gen.Load()
}

// spinUntil polls cond for up to d, yielding the processor now and
// then so that a goroutine waiting for it (GC, a request) is not held up.
func spinUntil(d time.Duration, cond func() bool) bool {
	start := time.Now()
	for i := 1; ; i++ {
		if cond() {
			return true
		}
		if i%256 == 0 {
			if time.Since(start) > d {
				return false
			}
			runtime.Gosched()
		}
	}
}

func (p *pool) drain(worker int) {
	for {
		i := p.next.Add(1) - 1
		if i >= p.total {
			return
		}
		p.r.task(worker, int(i))
	}
}

// minParallelWork is the work (multiply-adds) below which a kernel runs on
// the calling goroutine: handing tiny matrices to other cores costs more
// than it saves.
const minParallelWork = 1 << 15

// runSized calls r.task(worker, i) for i in [0, total), spread over the
// workers when the job's work is worth it; worker is in [0, workers) and
// no two concurrent calls share one.
func (p *pool) runSized(total, work int, r runner) {
	if total <= 0 {
		return
	}
	if total == 1 || p.workers == 1 || work < minParallelWork {
		for i := 0; i < total; i++ {
			r.task(0, i)
		}
		return
	}
	p.r, p.total = r, int64(total)
	p.next.Store(0)
	p.pending.Store(int32(len(p.helpers)))
	g := p.gen.Add(1)
	for h := range p.helpers {
		me := &p.helpers[h]
		if me.parked.Load() != g {
			continue
		}
		p.hold(pauseBeforeWake)
		if me.parked.CompareAndSwap(g, 0) {
			me.wake <- struct{}{}
		}
	}
	p.drain(0)
	if !spinUntil(spinCaller, func() bool { return p.pending.Load() == 0 }) {
		p.waiting.Swap(g) // the same handshake as parked's, with the last helper
		if p.pending.Load() == 0 && p.waiting.CompareAndSwap(g, 0) {
			// the last helper finished before it could see waiting
		} else {
			<-p.done
		}
	}
	p.r = nil
}
