package agent

import (
	"context"
	"sync"

	"jspark/agent/record"
	"jspark/recipes"
)

// limiter holds an external agent's session to the recipe's limits. jspark's
// own loop checks them before each request (Session.limited); an external
// agent runs its own loop, so the round counts the requests it sees end and
// stops the agent (its sandbox's processes, as the cut does) once it has
// made limits.turns requests or its completions reached
// limits.output_tokens. Its tools run inside it, unseen: tool_seconds does
// not bound it.
type limiter struct {
	limits recipes.Limits
	stop   context.CancelFunc

	mu     sync.Mutex
	turns  int
	tokens int
	end    record.End // "": no limit reached
}

// newLimiter is a limiter for a session of an external agent under limits,
// with the context its worker runs in; nil, and window itself, where no
// limit bounds it.
func newLimiter(window context.Context, agent bool, limits recipes.Limits) (*limiter, context.Context) {
	if !agent || limits.Turns == 0 && limits.OutputTokens == 0 {
		return nil, window
	}
	ctx, stop := context.WithCancel(window)
	return &limiter{limits: limits, stop: stop}, ctx
}

// step counts a request that ended.
func (l *limiter) step(q *record.Request) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.turns++
	l.tokens += q.OutputTokens()
	if l.end != "" {
		return
	}
	switch {
	case l.limits.Turns > 0 && l.turns >= l.limits.Turns:
		l.end = record.EndTurns
	case l.limits.OutputTokens > 0 && l.tokens >= l.limits.OutputTokens:
		l.end = record.EndOutputTokens
	default:
		return
	}
	l.stop()
}

// ended is the session's end: the limit that stopped it, where one did
// before the window's cut, else what its worker said.
func (l *limiter) ended(window context.Context, end record.End) record.End {
	if l == nil {
		return end
	}
	l.stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.end != "" && window.Err() == nil {
		return l.end
	}
	return end
}
