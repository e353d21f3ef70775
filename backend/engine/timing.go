package engine

import "time"

// Timing is where a request's wall time went, by the engine's clock: the
// four parts add up to the time from Submit to its finish.
type Timing struct {
	QueuedSec  float64 `json:"queued_s"`  // Submit to its first prefill chunk
	PrefillSec float64 `json:"prefill_s"` // first chunk to first token
	DecodeSec  float64 `json:"decode_s"`  // first token to finish
	// PreemptedSec is the time lost to preemptions: from each one until the
	// request had recomputed what it lost (taken out of prefill or decode).
	PreemptedSec float64 `json:"preempted_s"`
}

type phase int

const (
	phaseQueued phase = iota
	phasePrefill
	phaseDecode
	phasePreempted
)

// reqClock splits a request's life into phases as they happen.
type reqClock struct {
	t        Timing
	phase    phase
	mark     time.Time // when the current phase began
	back     phase     // where a preempted request returns
	lostUpTo int       // tokens it had computed when (first) preempted
}

func newReqClock(submitted time.Time) reqClock { return reqClock{phase: phaseQueued, mark: submitted} }

func (c *reqClock) enter(p phase, now time.Time) {
	d := now.Sub(c.mark).Seconds()
	switch c.phase {
	case phaseQueued:
		c.t.QueuedSec += d
	case phasePrefill:
		c.t.PrefillSec += d
	case phaseDecode:
		c.t.DecodeSec += d
	case phasePreempted:
		c.t.PreemptedSec += d
	}
	c.phase, c.mark = p, now
}

// chunk: the request got a prefill chunk (its first ends the queue).
func (c *reqClock) chunk(now time.Time) {
	if c.phase == phaseQueued {
		c.enter(phasePrefill, now)
	}
}

// firstToken: the first output token; the rest is decode time.
func (c *reqClock) firstToken(now time.Time) {
	if c.phase == phasePreempted {
		c.back = phaseDecode
		return
	}
	c.enter(phaseDecode, now)
}

// preempted: the request lost its blocks with computed tokens in them.
func (c *reqClock) preempted(computed int, now time.Time) {
	if c.phase == phasePreempted {
		c.lostUpTo = max(c.lostUpTo, computed)
		return
	}
	c.back, c.lostUpTo = c.phase, computed
	c.enter(phasePreempted, now)
}

// progress: after a step, a preempted request that has recomputed what it
// lost goes back to where it was.
func (c *reqClock) progress(computed int, now time.Time) {
	if c.phase == phasePreempted && computed >= c.lostUpTo {
		c.enter(c.back, now)
	}
}

// stop closes the last phase and returns the totals.
func (c *reqClock) stop(now time.Time) Timing {
	c.enter(c.phase, now)
	return c.t
}
