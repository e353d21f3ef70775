// Package engine runs many generation requests over one model: a paged KV
// cache with a block prefix cache (full blocks by chain hash, a request's
// last partial block as a copy-on-take tail, an active session's blocks
// kept ahead of others; for hybrid models a block table per KV group, the
// sliding-window layers' blocks freed behind each window, and recurrent
// state checkpoints at block boundaries in the same pages), continuous
// batching where each step is one batch
// (decode tokens first, then prefill chunks, shortest remaining first with
// aging, under the solo and mixed budgets and, with MaxStepMs, in time),
// preemption by recomputation, n-gram speculation, per-request timing and
// Prometheus metrics under vLLM's names.
//
// A step is schedule (a plan: which sequences run which tokens) → the
// model's forward pass → apply (sampling, drafts, commits, events); the
// scheduler reaches the cache only through kvCache.
package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"jspark/backend/model"
	"jspark/backend/sample"
)

// Options configure an engine. New takes them exactly as given: start from
// DefaultOptions and change what differs. A zero number or duration means
// off or none; Auto asks New to size a field from the model or the machine.
type Options struct {
	BlockSize    int   // tokens per KV block
	KVMemory     int64 // bytes of KV cache (Auto: a fifth of available memory, at most 4 GiB)
	KVBlocks     int   // an exact count of blocks of every layer, overriding KVMemory (0: none, KVMemory decides)
	PrefillSolo  int   // prefill tokens per step when nothing else runs
	PrefillMixed int   // prefill tokens per step, all prefills together, otherwise
	MaxSeqs      int   // requests running at once
	MaxWaiting   int   // requests in flight (queued or running) before Submit says ErrQueueFull
	MaxContext   int   // tokens per sequence (Auto: the model's, at least 32768)
	Speculate    int   // n-gram draft tokens per decode step (0: off; always off for a recurrent model)
	SpecNgram    int   // longest n-gram the drafter matches
	// MaxStepMs bounds in time a step that prefills: chunks are sized from
	// the engine's measured speed so that an arrival waits at most about
	// one such step (PrefillSolo and PrefillMixed stay upper bounds). 0 is
	// off, token budgets only.
	MaxStepMs int
	// SessionRetain: the blocks of a session active within this long are
	// evicted after everyone else's (0: off).
	SessionRetain time.Duration
	// Clock is what steps are timed by, and so what sizes time-bounded
	// chunks (nil: the wall clock); a test gives a fake one to make those
	// sizes exact.
	Clock     func() time.Time
	ModelName string          // the name metrics and /v1/models carry (empty: the model's own)
	Trace     io.Writer       // per-step JSON lines (nil: none)
	OnStep    func(StepTrace) // per-step callback (nil: none; tests)
	Log       io.Writer       // start-up facts (nil: none)
}

// Auto, as the value of KVMemory or MaxContext, asks New to size that
// field from the model and the machine; Options reports what it chose.
const Auto = -1

// DefaultOptions are the engine's defaults, in one place: what the command
// line's flags start from and what a library user or a test starts from.
func DefaultOptions() Options {
	return Options{
		BlockSize:     16,
		KVMemory:      Auto,
		PrefillSolo:   4096,
		PrefillMixed:  2048,
		MaxSeqs:       64,
		MaxWaiting:    1024,
		MaxContext:    Auto,
		SpecNgram:     3,
		MaxStepMs:     200,
		SessionRetain: 60 * time.Second,
		Log:           os.Stderr,
	}
}

// check says which field of opt New cannot run with, and why.
func (opt Options) check() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"BlockSize", opt.BlockSize},
		{"PrefillSolo", opt.PrefillSolo},
		{"PrefillMixed", opt.PrefillMixed},
		{"MaxSeqs", opt.MaxSeqs},
		{"MaxWaiting", opt.MaxWaiting},
	} {
		if f.v <= 0 {
			return fmt.Errorf("engine: Options.%s is %d; want a positive value (start from DefaultOptions())", f.name, f.v)
		}
	}
	switch {
	case opt.KVBlocks < 0:
		return fmt.Errorf("engine: Options.KVBlocks is %d; want a count, or 0 to size the cache by KVMemory", opt.KVBlocks)
	case opt.KVBlocks == 0 && opt.KVMemory <= 0 && opt.KVMemory != Auto:
		return fmt.Errorf("engine: Options.KVMemory is %d; want bytes or Auto (start from DefaultOptions())", opt.KVMemory)
	case opt.MaxContext <= 0 && opt.MaxContext != Auto:
		return fmt.Errorf("engine: Options.MaxContext is %d; want tokens or Auto (start from DefaultOptions())", opt.MaxContext)
	case opt.Speculate < 0 || opt.MaxStepMs < 0:
		return fmt.Errorf("engine: Options.Speculate %d and MaxStepMs %d: want 0 (off) or positive", opt.Speculate, opt.MaxStepMs)
	case opt.Speculate > 0 && opt.SpecNgram <= 0:
		return fmt.Errorf("engine: Options.SpecNgram is %d with Speculate %d; want a positive n-gram length", opt.SpecNgram, opt.Speculate)
	}
	return nil
}

// StepTrace describes one engine step's batch.
type StepTrace struct {
	Step      int64   `json:"step"`
	Decode    int     `json:"decode_tokens"`
	Drafts    int     `json:"draft_tokens,omitempty"`
	Prefill   []Chunk `json:"prefill"`
	Preempted []int64 `json:"preempted,omitempty"`
	// Diverged explains the requests admitted this step that reused less
	// than earlier requests had committed.
	Diverged    []Divergence `json:"diverged,omitempty"`
	FreeBlocks  int          `json:"free_blocks"` // free pages (model.KVLayout): blocks of one group, or parts of checkpoints
	Solo        bool         `json:"solo"`
	DurationSec float64      `json:"duration_s"`
}

// Chunk is one request's prefill share of a step.
type Chunk struct {
	Req    int64 `json:"req"`
	Tokens int   `json:"tokens"`
}

// Engine schedules requests onto one model. Submit is safe for concurrent
// use; the model is driven by a single loop goroutine.
type Engine struct {
	m     *model.Model
	opt   Options
	kv    *model.Pool
	mem   memoryPlan
	cache *kvCache
	pool  *BlockPool // the cache's, read for load and by tests
	stats *Metrics
	clock *stepClock

	mu       sync.Mutex
	incoming []*seq
	queued   int // incoming + waiting, for admission control
	wake     chan struct{}
	quit     chan struct{}
	done     chan struct{}
	closed   bool

	// owned by the loop
	waiting []*seq
	running []*seq
	step    int64
	nextID  atomic.Int64
}

// New starts an engine over m with opt as given (see Options).
func New(m *model.Model, opt Options) (*Engine, error) {
	if err := opt.check(); err != nil {
		return nil, err
	}
	if opt.MaxContext == Auto {
		opt.MaxContext = max(m.Context, 32768)
	}
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	if opt.ModelName == "" {
		opt.ModelName = m.Name
	}
	if b := min(opt.PrefillSolo, opt.PrefillMixed); m.RecurrentLayers() > 0 && b < opt.BlockSize {
		// A recurrent model's prefill chunks end at block boundaries
		// (model.StateStore): a budget under a block would never prefill.
		return nil, fmt.Errorf("engine: Options.PrefillSolo %d and PrefillMixed %d: %s has recurrent layers, whose prefill goes a block (BlockSize %d) at a time; want at least a block",
			opt.PrefillSolo, opt.PrefillMixed, m.Arch, opt.BlockSize)
	}
	mem, err := planMemory(m, opt)
	if err != nil {
		return nil, err
	}
	if opt.KVBlocks == 0 {
		opt.KVMemory = mem.budget
	}
	e := &Engine{
		m: m, opt: opt, mem: mem,
		kv:    model.NewPagedPool(m.Config, mem.pages, opt.BlockSize, m.KVType, mem.slots),
		clock: newStepClock(m.Config),
		wake:  make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
	}
	e.stats = newMetrics(opt.ModelName, mem, opt.BlockSize)
	e.cache = newKVCache(mem.pages, opt.BlockSize, mem.layout.Groups, e.copyBlock)
	if m.RecurrentLayers() > 0 {
		st := newStateCache(e.cache.pool, opt.BlockSize, mem.slots, e.kv.StatePages())
		st.save, st.load, st.session = e.saveState, e.loadState, e.cache.session
		st.stored, st.taken = &e.stats.checkpointsStored, &e.stats.checkpointsTaken
		e.cache.states, e.cache.copy = st, nil
	}
	e.cache.retain = opt.SessionRetain
	e.cache.keptHits = &e.stats.sessionKeptHits
	e.pool = e.cache.pool
	e.setLoad()
	mem.report(opt.Log, m, opt)
	go e.loop()
	return e, nil
}

// Model is the engine's model.
func (e *Engine) Model() *model.Model { return e.m }

// Options returns the options in effect: as given, with Auto resolved.
func (e *Engine) Options() Options { return e.opt }

// Metrics is the engine's metric set.
func (e *Engine) Metrics() *Metrics { return e.stats }

// CapacityTokens is the KV cache size in tokens: the longest sequence its
// pages hold, running alone.
func (e *Engine) CapacityTokens() int { return e.mem.capacity }

// Submit queues a request. Events arrive on the returned channel until a
// finish event; cancelling ctx aborts the request at the next step.
func (e *Engine) Submit(ctx context.Context, r Request) (<-chan Event, error) {
	if len(r.Prompt) == 0 {
		return nil, fmt.Errorf("engine: empty prompt")
	}
	for _, t := range r.Prompt {
		if t < 0 || t >= e.m.Vocab {
			return nil, fmt.Errorf("engine: token id %d outside the vocabulary of %d", t, e.m.Vocab)
		}
	}
	if r.MaxTokens <= 0 {
		r.MaxTokens = e.opt.MaxContext - len(r.Prompt)
	}
	if n := len(r.Prompt) + r.MaxTokens; n > e.opt.MaxContext {
		return nil, &ContextError{Prompt: len(r.Prompt), MaxTokens: r.MaxTokens, Context: e.opt.MaxContext}
	}
	if len(r.Prompt)+1 > e.CapacityTokens() {
		return nil, fmt.Errorf("engine: prompt of %d tokens exceeds the KV cache of %d tokens", len(r.Prompt), e.CapacityTokens())
	}
	s := &seq{
		slot: -1,
		id:   e.nextID.Add(1), req: r, ctx: ctx, sampler: sample.New(r.Sampling),
		tokens: append([]int(nil), r.Prompt...), submitted: time.Now(),
	}
	s.clock = newReqClock(s.submitted)
	s.usage.PromptTokens, s.usage.Session = len(r.Prompt), r.Session
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	if e.queued >= e.opt.MaxWaiting {
		e.mu.Unlock()
		return nil, ErrQueueFull
	}
	var ch <-chan Event
	s.out, ch = newOutbox(ctx, e.stats.finished)
	e.queued++
	e.incoming = append(e.incoming, s)
	e.mu.Unlock()
	e.stats.waiting.Inc()
	e.kick()
	return ch, nil
}

// ContextError is a request longer than the context allows.
type ContextError struct{ Prompt, MaxTokens, Context int }

func (c *ContextError) Error() string {
	return fmt.Sprintf("engine: prompt of %d tokens plus max_tokens %d exceeds the context of %d tokens", c.Prompt, c.MaxTokens, c.Context)
}

func (e *Engine) kick() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Close stops the loop; requests still queued or running finish with an
// abort.
func (e *Engine) Close() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	e.mu.Unlock()
	close(e.quit)
	<-e.done
}

func (e *Engine) loop() {
	defer close(e.done)
	for {
		select {
		case <-e.quit:
			e.drainIncoming()
			for _, s := range append(append([]*seq(nil), e.running...), e.waiting...) {
				e.finish(s, FinishAbort, ErrClosed)
			}
			return
		default:
		}
		if e.stepOnce() {
			continue
		}
		timer := time.NewTimer(20 * time.Millisecond)
		select {
		case <-e.wake:
		case <-e.quit:
		case <-timer.C:
		}
		timer.Stop()
	}
}

func (e *Engine) drainIncoming() {
	e.mu.Lock()
	in := e.incoming
	e.incoming = nil
	e.mu.Unlock()
	for _, s := range in {
		s.arrival = e.step
		e.waiting = append(e.waiting, s)
	}
}

func (e *Engine) trace(t StepTrace) {
	if e.opt.OnStep != nil {
		e.opt.OnStep(t)
	}
	if e.opt.Trace != nil {
		b, _ := json.Marshal(t)
		e.opt.Trace.Write(append(b, '\n'))
	}
}
