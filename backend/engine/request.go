package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"jspark/backend/sample"
)

// Request is one generation job for the engine.
type Request struct {
	Prompt    []int
	MaxTokens int
	Sampling  sample.Params
	// StopTokens end generation besides the model's end-of-generation ids.
	StopTokens []int
	IgnoreEOS  bool
	// TopLogprobs > 0 attaches that many alternatives to each token event.
	TopLogprobs int
	// CacheSalt separates prefix-cache namespaces (tenants, experiments).
	CacheSalt string
	// Session names the conversation or agent run the request belongs to
	// (X-Session-Id, OpenAI user): while a session is active its released
	// blocks are evicted after all others (Options.SessionRetain).
	Session string
	// Constraint, when set, masks the logits before each sample and learns
	// each accepted token (constrained decoding). Speculation is off for such
	// requests.
	Constraint Constraint
}

// Constraint restricts which tokens may come next.
type Constraint interface {
	// Mask sets the logits of forbidden tokens to -Inf.
	Mask(logits []float32)
	// Accept advances the constraint past token; it reports whether the
	// constraint is complete (generation should stop).
	Accept(token int) (done bool)
}

// FinishReason says why a response ended.
type FinishReason string

const (
	FinishStop   FinishReason = "stop"   // end-of-generation or stop token
	FinishLength FinishReason = "length" // max tokens or context
	FinishAbort  FinishReason = "abort"  // context cancelled (not with ErrStopped)
	FinishError  FinishReason = "error"
)

// Usage counts a response's tokens.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	// CachedTokens of the prompt came from the prefix cache.
	CachedTokens int `json:"cached_tokens"`
	// CommittedTokens is the reuse bound: how much of the prompt earlier
	// requests had committed (full blocks), whether or not it is still cached.
	CommittedTokens int `json:"committed_tokens"`
	// ReusedTokens of the prompt were not computed: CachedTokens plus those
	// copied from a cached partial block (a request's last, unfinished one).
	ReusedTokens int `json:"reused_tokens"`
	// Divergence, when set, says where and why the prompt reused less than
	// earlier requests had committed.
	Divergence *Divergence `json:"divergence,omitempty"`
	// Checkpoint, for a model with recurrent or sliding-window layers, says
	// where the prompt resumed and from what.
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	// ComputedTokens counts the tokens prefilled for this request,
	// recomputations after preemption included (decode tokens are not).
	ComputedTokens int `json:"computed_tokens"`
	// Timing is where the request's time went, set on the finish event.
	Timing      Timing `json:"timing"`
	Preemptions int    `json:"preemptions"`
	// Session is the request's session key as the engine kept it.
	Session string `json:"session,omitempty"`
}

// TokenProb is a token with its log-probability.
type TokenProb struct {
	Token   int
	Logprob float32
}

// Event is one message on a request's channel: a token, or the finish
// (which carries Usage) — the last event, after which the channel closes.
type Event struct {
	Token   int // -1 on the finish event
	Logprob float32
	Top     []TokenProb
	Step    int64 // the engine step that produced it
	Arrival int64 // the last step before the request was queued
	Time    time.Time
	Finish  FinishReason
	Err     error
	Usage   Usage
}

// Errors returned by Submit.
var (
	ErrQueueFull = errors.New("engine: queue full")
	ErrClosed    = errors.New("engine: closed")
)

// ErrStopped, as the cause of a request's cancelled context
// (context.WithCancelCause), says the caller ended it on its own terms (a
// stop string, a complete tool call): it finishes as FinishStop, and is
// counted so, not as an abort.
var ErrStopped = errors.New("engine: stopped by the caller")

type reqState int

const (
	stateWaiting reqState = iota
	stateRunning
	stateDone
)

// seq is the engine's view of a request.
type seq struct {
	id      int64
	req     Request
	ctx     context.Context
	sampler *sample.Sampler
	arrival int64 // step counter when submitted
	state   reqState

	tokens    []int // prompt + generated
	generated int
	computed  int         // tokens whose K/V are valid in the blocks
	tables    [][]BlockID // a block table per KV group (kvcache.go)
	trimmed   []int       // per group: leading blocks a sliding window freed
	hashes    []BlockHash // chain hashes of the full blocks of tokens
	committed int         // leading blocks registered in the cache
	slot      int         // its recurrent state slot, -1 when none
	want      []int       // positions where its prefill stops for a checkpoint (checkpoint.go)
	ckptAt    int         // where it resumed or last kept a checkpoint
	roll      *checkpoint // its latest decode checkpoint
	usage     Usage
	admitted  bool // the first admission happened (usage.CachedTokens set)
	starved   int  // steps in a row as a prefill candidate without a chunk
	aged      bool // starved agingSteps: its prefill goes first, with a share
	firstTok  time.Time
	lastTok   time.Time
	submitted time.Time
	clock     reqClock

	logprobs *logprobs // of the token being sampled
	out      *outbox
}

// left is how many tokens still need their K/V computed. Each step
// computes a chunk of them; a chunk that reaches the end yields the logits
// for the next token. A decode is a chunk of one.
func (s *seq) left() int { return len(s.tokens) - s.computed }

// decoding: past the first output, waiting only for the last sampled token.
func (s *seq) decoding() bool { return s.generated > 0 && s.left() == 1 }

// outbox decouples the engine loop from slow consumers: the loop appends
// without blocking, a pump goroutine delivers in order. A consumer that
// falls a window behind (a client not reading its stream) pauses its own
// request: the scheduler skips its decode until it catches up.
//
// NOTE: the channel is unbuffered, so an event is delivered exactly when
// the consumer takes it. That lets the finish be counted as the client saw
// it: the engine may run a few tokens past a stop string the consumer has
// not read yet and finish as length, but the consumer stops the request
// (ErrStopped) before it takes the next event, so when it takes the finish
// the cause says stop (counted by done).
type outbox struct {
	ctx     context.Context
	mu      sync.Mutex
	queue   []Event
	wake    chan struct{}
	finish  FinishReason // the queued finish's reason ("" until then)
	gone    bool         // the consumer is given up on: nothing is queued
	pending atomic.Int64 // pushed, not yet taken by the consumer's channel
	// done counts the request's end once the consumer has taken the finish
	// event, or has been given up on.
	done func(FinishReason)
}

// outboxWindow is how many events a consumer may leave untaken before its
// request pauses: 80, as when the channel buffered 16 beyond a window of 64
// (an event now counts as taken only when the consumer receives it).
const outboxWindow = 80

// backlogged reports that the consumer is a window behind.
func (o *outbox) backlogged() bool { return o.pending.Load() > outboxWindow }

func newOutbox(ctx context.Context, done func(FinishReason)) (*outbox, <-chan Event) {
	o := &outbox{ctx: ctx, wake: make(chan struct{}, 1), done: done}
	ch := make(chan Event)
	go o.pump(ch)
	return o, ch
}

func (o *outbox) push(e Event) {
	o.pending.Add(1)
	o.mu.Lock()
	gone := o.gone
	if !gone {
		o.queue = append(o.queue, e)
	}
	if e.Finish != "" {
		o.finish = e.Finish
	}
	o.mu.Unlock()
	if gone {
		if e.Finish != "" {
			o.finished(e.Finish)
		}
		return
	}
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// finished counts the end: a stop if the caller had stopped the request
// by the time it took the finish, else the engine's reason.
func (o *outbox) finished(r FinishReason) {
	if errors.Is(context.Cause(o.ctx), ErrStopped) {
		r = FinishStop
	}
	if o.done != nil {
		o.done(r)
	}
}

// deliver hands e to the consumer. A caller that cancelled to stop early
// still reads the finish; one that is gone is given up on (false).
func (o *outbox) deliver(ch chan<- Event, e Event) bool {
	select {
	case ch <- e:
		o.pending.Add(-1)
		return true
	case <-o.ctx.Done():
	}
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	select {
	case ch <- e:
		o.pending.Add(-1)
		return true
	case <-t.C:
		return false
	}
}

// giveUp drops everything from now on (the consumer is gone); a finish
// already pushed (never delivered: that ends the pump) is counted here, a
// later one when it is pushed.
func (o *outbox) giveUp() {
	o.mu.Lock()
	o.gone = true
	o.queue = nil
	finish := o.finish
	o.mu.Unlock()
	if finish != "" {
		o.finished(finish)
	}
}

func (o *outbox) pump(ch chan<- Event) {
	defer close(ch)
	for {
		o.mu.Lock()
		batch := o.queue
		o.queue = nil
		closed := o.finish != ""
		o.mu.Unlock()
		for _, e := range batch {
			if !o.deliver(ch, e) {
				o.giveUp()
				return
			}
			if e.Finish != "" {
				o.finished(e.Finish)
			}
		}
		if closed {
			return
		}
		<-o.wake
	}
}
