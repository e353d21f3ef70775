package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"jspark/backend/model"
	"jspark/backend/sample"
)

// entry is one request's share of a batch.
type entry struct {
	s       *seq
	start   int   // first batch index
	n       int   // tokens in the batch
	drafts  []int // speculative tokens after the real one (decode only)
	logit   int   // index of its first logits row, or -1
	prefill bool  // a prefill chunk, not a decode
}

// plan is one step decided: which sequences run which tokens, in one batch.
// schedule makes it (admitting, growing and preempting on the way), the
// model runs its batch, and apply turns the logits into tokens.
type plan struct {
	entries []*entry
	batch   model.Batch
	work    float64 // flops of the batch, for the step clock
	trace   StepTrace
	now     time.Time // when it was planned
}

// add appends tokens of s, at its next positions, to the batch.
func (p *plan) add(s *seq, tokens []int, drafts []int, wantLogits, prefill bool) {
	b := &p.batch
	en := &entry{s: s, start: len(b.Tokens), n: len(tokens), drafts: drafts, logit: -1, prefill: prefill}
	for len(b.Groups) < len(s.tables)-1 {
		b.Groups = append(b.Groups, nil)
	}
	for i, t := range tokens {
		b.Tokens = append(b.Tokens, t)
		b.Pos = append(b.Pos, s.computed+i)
		b.Table = append(b.Table, s.tables[0])
		for g := range b.Groups {
			b.Groups[g] = append(b.Groups[g], s.tables[g+1])
		}
		b.Slot = append(b.Slot, s.slot)
	}
	if wantLogits {
		en.logit = len(b.Logits)
		for i := len(tokens) - 1 - len(drafts); i < len(tokens); i++ {
			b.Logits = append(b.Logits, en.start+i)
		}
	}
	p.entries = append(p.entries, en)
}

// stepOnce schedules and runs one batch. It reports whether it did work.
func (e *Engine) stepOnce() bool {
	e.drainIncoming()
	e.reapAborted()
	if len(e.running) == 0 && len(e.waiting) == 0 {
		return false
	}
	t0 := e.stepTime()
	e.step++
	p := e.schedule()
	if len(p.batch.Tokens) == 0 {
		e.step--
		return false
	}
	// The gauges say what this step runs before its tokens count: a reader
	// never sees a request's first token while it is not yet running.
	e.setLoad()
	logits, err := e.m.Forward(&p.batch, e.kv)
	if err != nil {
		// The step's requests end with the error; the loop goes on, so a
		// device that recovers serves the next ones.
		err = fmt.Errorf("engine: step %d: %w", e.step, err)
		for _, en := range p.entries {
			e.finish(en.s, FinishError, err)
		}
		return true
	}
	e.apply(p, logits)
	d := e.stepTime().Sub(t0)
	if len(p.trace.Prefill) > 0 {
		// NOTE: decode-only steps are mostly fixed overhead; timing them
		// would make the next prefill chunk look dear.
		e.clock.observe(p.work, d)
	}
	p.trace.FreeBlocks = e.pool.Free()
	p.trace.DurationSec = d.Seconds()
	e.setLoad()
	e.trace(p.trace)
	return true
}

// stepTime is the time by Options.Clock.
func (e *Engine) stepTime() time.Time {
	if e.opt.Clock != nil {
		return e.opt.Clock()
	}
	return time.Now()
}

// schedule plans one step: decode tokens first, every running stream its
// next one, then prefill chunks under the budgets.
func (e *Engine) schedule() *plan {
	p := &plan{trace: StepTrace{Step: e.step}, now: time.Now()}
	e.scheduleDecodes(p)
	e.schedulePrefills(p)
	return p
}

// scheduleDecodes gives every decoding stream its next token (and drafts),
// preempting from the back of the running list when blocks run out.
func (e *Engine) scheduleDecodes(p *plan) {
	for _, s := range slices.Clone(e.running) {
		// A stream preempted as a victim this step, or a consumer behind
		// (a paused request), gets nothing.
		if s.state != stateRunning || !s.decoding() || s.out.backlogged() {
			continue
		}
		drafts := e.propose(s)
		if !e.makeRoom(s, s.computed+1+len(drafts), p) {
			continue
		}
		p.add(s, append([]int{s.tokens[s.computed]}, drafts...), drafts, true, false)
		p.work += e.clock.work(s.computed, 1+len(drafts))
		p.trace.Decode++
		p.trace.Drafts += len(drafts)
	}
}

// makeRoom grows s to n tokens, preempting the latest running requests
// until it fits. It reports false when s itself was preempted, or ended
// because the whole cache cannot hold it.
func (e *Engine) makeRoom(s *seq, n int, p *plan) bool {
	for !e.cache.grow(s, n) {
		victim := e.running[len(e.running)-1]
		if victim == s && len(e.running) == 1 {
			e.finish(s, FinishLength, nil)
			return false
		}
		e.requeue(victim, true)
		p.trace.Preempted = append(p.trace.Preempted, victim.id)
		if victim == s {
			return false
		}
	}
	return true
}

// schedulePrefills hands out prefill chunks, shortest remaining first,
// under the token budget (solo or mixed) and, when MaxStepMs is set, the
// step's time. A request that gets no chunk stays or goes back to waiting.
func (e *Engine) schedulePrefills(p *plan) {
	cands := e.prefillOrder()
	budget := e.opt.PrefillMixed
	if p.trace.Decode == 0 && len(cands) == 1 && len(e.running)+len(e.waiting) == 1 {
		budget = e.opt.PrefillSolo
		p.trace.Solo = true
	}
	for i, s := range cands {
		if budget <= 0 {
			e.starve(cands[i:])
			break
		}
		// An aged prefill takes at most half the budget while others wait
		// behind it, so the shorts keep coming through too.
		limit := budget
		if s.aged && i < len(cands)-1 {
			limit = max(budget/2, min(budget, e.opt.BlockSize))
		}
		admitted := s.state == stateWaiting
		if admitted {
			e.admit(s, p)
		}
		n := e.chunk(s, limit, p)
		if n <= 0 {
			if admitted {
				e.requeue(s, false)
			}
			e.starve(cands[i : i+1])
			continue
		}
		s.starved = 0
		s.clock.chunk(p.now)
		s.usage.ComputedTokens += n
		p.add(s, s.tokens[s.computed:s.computed+n], nil, s.computed+n == len(s.tokens), true)
		p.trace.Prefill = append(p.trace.Prefill, Chunk{Req: s.id, Tokens: n})
		p.work += e.clock.work(s.computed, n)
		budget -= n
	}
}

// agingSteps is how many steps in a row a prefill may get no chunk before
// it is aged: from then on it goes first, with a share of the budget, so a
// stream of shorter arrivals cannot starve it.
const agingSteps = 8

// starve counts a step without a chunk for each of ss.
func (e *Engine) starve(ss []*seq) {
	for _, s := range ss {
		if s.starved++; s.starved >= agingSteps {
			s.aged = true
		}
	}
}

// prefillOrder lists the requests that want prefill (running ones first,
// then waiting ones while there is room to run them): aged ones first, in
// arrival order, then shortest remaining first.
func (e *Engine) prefillOrder() []*seq {
	var cands []*seq
	for _, s := range e.running {
		if !s.decoding() {
			cands = append(cands, s)
		}
	}
	room := e.mem.running(e.opt) - len(e.running)
	for _, s := range e.waiting {
		if room <= 0 {
			break
		}
		cands = append(cands, s)
		room--
	}
	left := make(map[*seq]int, len(cands))
	for _, s := range cands {
		if s.state == stateWaiting {
			left[s] = len(s.tokens) - e.cache.computedPrefix(s)
		} else {
			left[s] = s.left()
		}
	}
	sort.SliceStable(cands, func(a, b int) bool {
		x, y := cands[a], cands[b]
		if x.aged != y.aged {
			return x.aged
		}
		if x.aged { // the oldest first: under overload every waiter ages
			return x.id < y.id
		}
		return left[cands[a]] < left[cands[b]]
	})
	return cands
}

// chunk sizes s's prefill chunk under the budget and the step's time, and
// grows its blocks to hold it. Prefill never preempts: it takes what fits.
func (e *Engine) chunk(s *seq, budget int, p *plan) int {
	n := min(s.left(), budget)
	if e.opt.MaxStepMs > 0 {
		n = e.timeBound(s, n, p.work, len(p.trace.Prefill) == 0)
	}
	n = e.cache.align(s, n)
	if n > 0 && !e.cache.grow(s, s.computed+n) {
		n = e.cache.align(s, min(n, e.cache.room(s)-s.computed))
		if n <= 0 || !e.cache.grow(s, s.computed+n) {
			return 0
		}
	}
	return n
}

// timeBound caps a prefill chunk of n tokens so that the step, with work
// flops already in it, is predicted to end within MaxStepMs. The step's
// first chunk gets at least a block, so prefill always progresses; before
// the clock has timed a step, a chunk is a few blocks (a probe).
func (e *Engine) timeBound(s *seq, n int, work float64, first bool) int {
	bs := e.opt.BlockSize
	if !e.clock.known() {
		return min(n, 4*bs)
	}
	left := float64(e.opt.MaxStepMs)/1000 - e.clock.seconds(work)
	fit := e.clock.fit(s.computed, left)
	if first {
		fit = max(fit, bs)
	}
	return min(n, fit)
}

// apply turns the step's logits into tokens: a chunk short of its prompt's
// end only advances; one that reaches it, or a decode, samples and checks
// its drafts.
func (e *Engine) apply(p *plan, logits []float32) {
	now := time.Now()
	for _, en := range p.entries {
		s := en.s
		if en.logit < 0 {
			s.computed += en.n
		} else {
			e.acceptTokens(en, logits, now)
		}
		if s.state != stateDone {
			e.cache.commit(s, en.prefill)
			s.clock.progress(s.computed, now)
		}
	}
}

// acceptTokens samples at each of an entry's logits rows in turn and keeps
// going while the sample equals the draft at that position.
func (e *Engine) acceptTokens(en *entry, logits []float32, now time.Time) {
	s, vocab := en.s, e.m.Vocab
	base := s.computed
	accepted := 0
	for j := 0; j <= len(en.drafts); j++ {
		row := logits[(en.logit+j)*vocab : (en.logit+j+1)*vocab]
		tok := e.sampleFrom(s, row)
		s.computed = base + en.n - len(en.drafts) + j
		if reason := e.appendToken(s, tok, now); reason != "" {
			e.cache.commit(s, en.prefill)
			e.finish(s, reason, nil)
			break
		}
		if j < len(en.drafts) && tok == en.drafts[j] {
			accepted++
			continue
		}
		break
	}
	e.stats.specAccepted.Add(float64(accepted))
	e.stats.specDrafted.Add(float64(len(en.drafts)))
}

// sampleFrom applies the request's constraint and samples one token.
func (e *Engine) sampleFrom(s *seq, row []float32) int {
	if s.req.Constraint != nil {
		s.req.Constraint.Mask(row)
	}
	var lp []float64
	if s.req.TopLogprobs > 0 {
		lp = sample.LogSoftmax(row)
	}
	tok := s.sampler.Sample(row, s.tokens, s.tokens[len(s.req.Prompt):])
	if lp != nil {
		s.pendingLogprobs(lp, tok)
	}
	return tok
}

// appendToken records a sampled token, emits it, and says whether the
// request is finished.
func (e *Engine) appendToken(s *seq, tok int, now time.Time) FinishReason {
	s.tokens = append(s.tokens, tok)
	s.generated++
	s.usage.CompletionTokens = s.generated
	e.stats.generation.Inc()
	if s.generated == 1 {
		s.firstTok = now
		s.clock.firstToken(now)
		e.stats.ttft.Observe(now.Sub(s.submitted).Seconds())
	} else {
		e.stats.itl.Observe(now.Sub(s.lastTok).Seconds())
	}
	s.lastTok = now
	ev := Event{Token: tok, Step: e.step, Arrival: s.arrival, Time: now}
	if s.logprobs != nil {
		ev.Logprob, ev.Top = s.logprobs.chosen, s.logprobs.top
		s.logprobs = nil
	}
	s.out.push(ev)
	done := false
	if s.req.Constraint != nil {
		done = s.req.Constraint.Accept(tok)
	}
	switch {
	case !s.req.IgnoreEOS && e.m.Tok.EOG[tok], slices.Contains(s.req.StopTokens, tok), done:
		return FinishStop
	case s.generated >= s.req.MaxTokens, len(s.tokens) >= e.opt.MaxContext:
		return FinishLength
	}
	return ""
}

type logprobs struct {
	chosen float32
	top    []TokenProb
}

func (s *seq) pendingLogprobs(lp []float64, tok int) {
	n := min(s.req.TopLogprobs, len(lp))
	idx := make([]int, len(lp))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return lp[idx[a]] > lp[idx[b]] })
	l := &logprobs{chosen: float32(lp[tok])}
	for _, i := range idx[:n] {
		if math.IsInf(lp[i], -1) {
			break
		}
		l.top = append(l.top, TokenProb{Token: i, Logprob: float32(lp[i])})
	}
	s.logprobs = l
}

// piece is a token's text.
func (e *Engine) piece(id int) string { return string(e.m.Tok.AppendPiece(nil, id, true)) }

// admit moves a waiting request to running, taking its cached prefix.
func (e *Engine) admit(s *seq, p *plan) {
	hit, _, bound, div, ck := e.cache.take(s)
	if !s.admitted {
		s.admitted = true
		if div != nil {
			if div.Reason == "changed" {
				div.Text, div.WasText = e.piece(div.Token), e.piece(div.Was)
			}
			s.usage.Divergence = div
			d := *div
			d.Req = s.id
			p.trace.Diverged = append(p.trace.Diverged, d)
		}
		s.usage.CachedTokens = hit
		s.usage.Checkpoint = ck
		s.usage.ReusedTokens = s.computed
		s.usage.CommittedTokens = bound
		e.stats.prompt.Add(float64(len(s.tokens)))
		e.stats.cacheQueries.Add(float64(len(s.tokens)))
		e.stats.cacheHits.Add(float64(hit))
	}
	s.state = stateRunning
	e.waiting = slices.DeleteFunc(e.waiting, func(x *seq) bool { return x == s })
	e.running = append(e.running, s)
	e.stats.waiting.Dec()
}

// requeue takes a running request's blocks back and puts it at the head of
// the queue: a preemption (it recomputes, mostly from the prefix cache,
// when readmitted) or an admission this step had no room for.
func (e *Engine) requeue(s *seq, preempted bool) {
	if preempted {
		s.clock.preempted(s.computed, time.Now())
	}
	e.cache.free(s)
	s.state = stateWaiting
	if preempted {
		s.usage.Preemptions++
		e.stats.preemptions.Inc()
	}
	e.running = slices.DeleteFunc(e.running, func(x *seq) bool { return x == s })
	e.waiting = append([]*seq{s}, e.waiting...)
	e.stats.waiting.Inc()
}

// reapAborted ends requests whose context is done: stopped by the caller
// (ErrStopped) or aborted.
func (e *Engine) reapAborted() {
	for _, list := range [][]*seq{e.waiting, e.running} {
		for _, s := range slices.Clone(list) {
			switch {
			case s.ctx.Err() == nil:
			case errors.Is(context.Cause(s.ctx), ErrStopped):
				e.finish(s, FinishStop, nil)
			default:
				e.finish(s, FinishAbort, s.ctx.Err())
			}
		}
	}
}

// finish ends a request: its blocks go back to the pool (committed ones stay
// cached) and the finish event closes its stream.
func (e *Engine) finish(s *seq, reason FinishReason, err error) {
	if s.state == stateDone {
		return
	}
	if s.state == stateWaiting {
		e.stats.waiting.Dec()
	}
	e.cache.free(s)
	s.state = stateDone
	e.running = slices.DeleteFunc(e.running, func(x *seq) bool { return x == s })
	e.waiting = slices.DeleteFunc(e.waiting, func(x *seq) bool { return x == s })
	e.mu.Lock()
	e.queued--
	e.mu.Unlock()
	now := time.Now()
	s.usage.Timing = s.clock.stop(now)
	s.out.push(Event{Token: -1, Step: e.step, Time: now, Finish: reason, Err: err, Usage: s.usage})
	e.setLoad()
}

// propose drafts up to Speculate tokens by prompt lookup: find the latest
// earlier occurrence of the last n tokens (n from SpecNgram down to 1) and
// propose what followed it.
func (e *Engine) propose(s *seq) []int {
	k := e.opt.Speculate
	if k <= 0 || s.req.Constraint != nil || s.req.TopLogprobs > 0 || e.cache.states != nil {
		return nil
	}
	k = min(k, s.req.MaxTokens-s.generated-1, e.opt.MaxContext-len(s.tokens)-1)
	if k <= 0 {
		return nil
	}
	t := s.tokens
	for n := min(e.opt.SpecNgram, len(t)-1); n >= 1; n-- {
		suffix := t[len(t)-n:]
		for i := len(t) - n - 1; i >= 0; i-- {
			if slices.Equal(t[i:i+n], suffix) {
				return slices.Clone(t[i+n : min(i+n+k, len(t))])
			}
		}
	}
	return nil
}

func (e *Engine) setLoad() {
	e.stats.setLoad(len(e.running), e.pool)
}
