package engine

import (
	"math"
	"slices"
	"sort"
	"time"

	"jspark/backend/model"
	"jspark/backend/sample"
)

// entry is one request's share of a batch.
type entry struct {
	s      *seq
	start  int   // first batch index
	n      int   // tokens in the batch
	drafts []int // speculative tokens after the real one (decode only)
	logit  int   // index of its first logits row, or -1
}

// stepOnce schedules and runs one batch. It reports whether it did work.
func (e *Engine) stepOnce() bool {
	e.drainIncoming()
	e.reapAborted()
	if len(e.running) == 0 && len(e.waiting) == 0 {
		return false
	}
	t0 := time.Now()
	e.step++
	tr := StepTrace{Step: e.step}
	var entries []*entry
	var work float64 // flops of the batch, for the step clock
	batch := &model.Batch{}
	add := func(s *seq, tokens []int, drafts []int, wantLogits bool) {
		en := &entry{s: s, start: len(batch.Tokens), n: len(tokens), drafts: drafts, logit: -1}
		tbl := s.table
		for i, t := range tokens {
			batch.Tokens = append(batch.Tokens, t)
			batch.Pos = append(batch.Pos, s.computed+i)
			batch.Table = append(batch.Table, tbl)
		}
		if wantLogits {
			en.logit = len(batch.Logits)
			for i := len(tokens) - 1 - len(drafts); i < len(tokens); i++ {
				batch.Logits = append(batch.Logits, en.start+i)
			}
		}
		entries = append(entries, en)
	}

	// Decode tokens first: every running stream gets its next token.
	for i := 0; i < len(e.running); i++ {
		s := e.running[i]
		if !s.decoding() || s.out.backlogged() { // a consumer behind pauses its request
			continue
		}
		drafts := e.propose(s)
		need := s.computed + 1 + len(drafts)
		for !e.ensureBlocks(s, need) {
			victim := e.running[len(e.running)-1]
			if victim == s && len(e.running) == 1 {
				// Alone and out of blocks: the cache cannot hold this sequence.
				e.finish(s, FinishLength, nil)
				i--
				s = nil
				break
			}
			e.preempt(victim)
			tr.Preempted = append(tr.Preempted, victim.id)
			if victim == s {
				i--
				s = nil
				break
			}
		}
		if s == nil {
			continue
		}
		add(s, append([]int{s.tokens[s.computed]}, drafts...), drafts, true)
		work += e.clock.work(s.computed, 1+len(drafts))
		tr.Decode++
		tr.Drafts += len(drafts)
	}

	// Then prefill chunks, shortest remaining first, under the budget.
	var cands []*seq
	for _, s := range e.running {
		if !s.decoding() {
			cands = append(cands, s)
		}
	}
	room := e.opt.MaxSeqs - len(e.running)
	for _, s := range e.waiting {
		if room <= 0 {
			break
		}
		cands = append(cands, s)
		room--
	}
	budget := e.opt.PrefillMixed
	if tr.Decode == 0 && len(cands) == 1 && len(e.running)+len(e.waiting) == 1 {
		budget = e.opt.PrefillSolo
		tr.Solo = true
	}
	remaining := func(s *seq) int {
		if s.state == stateWaiting {
			return len(s.tokens) - e.probe(s)
		}
		return s.left()
	}
	left := make(map[*seq]int, len(cands))
	for _, s := range cands {
		left[s] = remaining(s)
	}
	sort.SliceStable(cands, func(a, b int) bool { return left[cands[a]] < left[cands[b]] })
	for _, s := range cands {
		if budget <= 0 {
			break
		}
		admitted := false
		if s.state == stateWaiting {
			e.admit(s)
			admitted = true
		}
		n := min(s.left(), budget)
		if e.opt.MaxStepMs > 0 {
			n = e.timeBound(s, n, work, len(tr.Prefill) == 0)
		}
		if n <= 0 {
			if admitted {
				e.unadmit(s)
			}
			continue
		}
		if !e.ensureBlocks(s, s.computed+n) {
			// Take what fits; prefill never preempts.
			fit := (len(s.table)+e.pool.Free())*e.opt.BlockSize - s.computed
			n = min(n, fit)
			if n <= 0 || !e.ensureBlocks(s, s.computed+n) {
				if admitted {
					e.unadmit(s)
				}
				continue
			}
		}
		add(s, s.tokens[s.computed:s.computed+n], nil, s.computed+n == len(s.tokens))
		tr.Prefill = append(tr.Prefill, Chunk{Req: s.id, Tokens: n})
		work += e.clock.work(s.computed, n)
		budget -= n
	}
	if len(batch.Tokens) == 0 {
		e.step--
		return false
	}

	logits, err := e.m.Forward(batch, e.kv)
	if err != nil {
		for _, en := range entries {
			e.finish(en.s, FinishError, err)
		}
		return true
	}
	now := time.Now()
	vocab := e.m.Vocab
	for _, en := range entries {
		s := en.s
		if en.logit < 0 {
			s.computed += en.n
			e.commitBlocks(s)
			continue
		}
		// Verify drafts: sample at each position, keep going while the
		// sample equals the draft.
		base := s.computed
		accepted := 0
		for j := 0; j <= len(en.drafts); j++ {
			row := logits[(en.logit+j)*vocab : (en.logit+j+1)*vocab]
			tok := e.sampleFrom(s, row)
			s.computed = base + en.n - len(en.drafts) + j
			reason := e.appendToken(s, tok, now)
			if reason != "" {
				e.commitBlocks(s)
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
		if s.state != stateDone {
			e.commitBlocks(s)
		}
	}
	tr.FreeBlocks = e.pool.Free()
	d := time.Since(t0)
	e.clock.observe(work, d)
	tr.DurationSec = d.Seconds()
	e.setLoad()
	e.trace(tr)
	return true
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

// ensureBlocks grows s's block table to hold n tokens.
func (e *Engine) ensureBlocks(s *seq, n int) bool {
	need := (n+e.opt.BlockSize-1)/e.opt.BlockSize - len(s.table)
	if need <= 0 {
		return true
	}
	ids, ok := e.pool.Allocate(need)
	if !ok {
		return false
	}
	s.table = append(s.table, ids...)
	return true
}

// hashUpTo extends s.hashes over the first blocks full blocks of its tokens.
func (e *Engine) hashUpTo(s *seq, blocks int) {
	bs := e.opt.BlockSize
	for len(s.hashes) < blocks {
		i := len(s.hashes)
		var parent BlockHash
		if i > 0 {
			parent = s.hashes[i-1]
		}
		s.hashes = append(s.hashes, HashBlock(parent, s.req.CacheSalt, s.tokens[i*bs:(i+1)*bs]))
	}
}

// probe counts the prompt tokens the cache holds for a waiting request.
func (e *Engine) probe(s *seq) int {
	full := len(s.tokens) / e.opt.BlockSize
	e.hashUpTo(s, full)
	n := 0
	for n < full {
		if _, ok := e.pool.Lookup(s.hashes[n]); !ok {
			break
		}
		n++
	}
	return min(n*e.opt.BlockSize, len(s.tokens)-1)
}

// admit moves a waiting request to running, taking its cached prefix.
func (e *Engine) admit(s *seq) {
	bs := e.opt.BlockSize
	full := len(s.tokens) / bs
	e.hashUpTo(s, full)
	hit := 0
	for hit < full {
		id, ok := e.pool.Lookup(s.hashes[hit])
		if !ok {
			break
		}
		e.pool.Ref(id)
		s.table = append(s.table, id)
		hit++
	}
	s.committed = hit
	// With every token cached, the last is still recomputed for its logits.
	s.computed = min(hit*bs, len(s.tokens)-1)
	if !s.admitted {
		s.admitted = true
		s.usage.CachedTokens = hit * bs
		bound := 0
		for bound < full {
			if _, ok := e.ever[s.hashes[bound]]; !ok {
				break
			}
			bound++
		}
		s.usage.CommittedTokens = bound * bs
		e.stats.prompt.Add(float64(len(s.tokens)))
		e.stats.cacheQueries.Add(float64(len(s.tokens)))
		e.stats.cacheHits.Add(float64(hit * bs))
	}
	s.state = stateRunning
	e.waiting = slices.DeleteFunc(e.waiting, func(x *seq) bool { return x == s })
	e.running = append(e.running, s)
	e.stats.waiting.Dec()
}

// unadmit undoes admit for a request that got no room this step.
func (e *Engine) unadmit(s *seq) {
	e.pool.Release(s.table)
	s.table, s.computed, s.committed = nil, 0, 0
	s.state = stateWaiting
	e.running = slices.DeleteFunc(e.running, func(x *seq) bool { return x == s })
	e.waiting = append([]*seq{s}, e.waiting...)
	e.stats.waiting.Inc()
}

// preempt frees a running request's blocks; it waits at the head of the
// queue and recomputes (mostly from the prefix cache) when readmitted.
func (e *Engine) preempt(s *seq) {
	e.pool.Release(s.table)
	s.table, s.computed, s.committed = nil, 0, 0
	s.state = stateWaiting
	s.usage.Preemptions++
	e.stats.preemptions.Inc()
	e.running = slices.DeleteFunc(e.running, func(x *seq) bool { return x == s })
	e.waiting = append([]*seq{s}, e.waiting...)
	e.stats.waiting.Inc()
}

// commitBlocks registers every newly full, computed block in the cache.
func (e *Engine) commitBlocks(s *seq) {
	full := s.computed / e.opt.BlockSize
	if full <= s.committed {
		return
	}
	e.hashUpTo(s, full)
	for b := s.committed; b < full; b++ {
		e.pool.Commit(s.table[b], s.hashes[b])
		e.ever[s.hashes[b]] = struct{}{}
	}
	s.committed = full
}

// reapAborted ends requests whose context is done.
func (e *Engine) reapAborted() {
	for _, list := range [][]*seq{e.waiting, e.running} {
		for _, s := range slices.Clone(list) {
			if s.ctx.Err() != nil {
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
	e.pool.Release(s.table)
	s.table = nil
	s.state = stateDone
	e.running = slices.DeleteFunc(e.running, func(x *seq) bool { return x == s })
	e.waiting = slices.DeleteFunc(e.waiting, func(x *seq) bool { return x == s })
	e.mu.Lock()
	e.queued--
	e.mu.Unlock()
	e.stats.finished(reason)
	s.out.push(Event{Token: -1, Step: e.step, Time: time.Now(), Finish: reason, Err: err, Usage: s.usage})
	e.setLoad()
}

// propose drafts up to Speculate tokens by prompt lookup: find the latest
// earlier occurrence of the last n tokens (n from SpecNgram down to 1) and
// propose what followed it.
func (e *Engine) propose(s *seq) []int {
	k := e.opt.Speculate
	if k <= 0 || s.req.Constraint != nil || s.req.TopLogprobs > 0 {
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
	e.stats.setLoad(len(e.running), e.pool.Free(), 1-float64(e.pool.Free())/float64(e.pool.Capacity()))
}
