package agent

import (
	"fmt"
	"io"
	"jspark/agent/record"
	"strings"
	"sync"
	"time"
)

// sessionView is what the progress view shows of one session.
type sessionView struct {
	name                string
	turn, calls, tokens int
	last                string
}

// LiveView redraws one line per session in place on a terminal, every tick.
type LiveView struct {
	mu       sync.Mutex
	w        io.Writer
	round    string
	sessions []sessionView
	drawn    int
}

// NewLiveView is the TTY progress view of a round of n sessions.
func NewLiveView(w io.Writer, round string, n int) *LiveView {
	return &LiveView{w: w, round: round, sessions: make([]sessionView, n)}
}

func (v *LiveView) Step(i int, name string, r *record.Request) {
	v.mu.Lock()
	defer v.mu.Unlock()
	update(&v.sessions[i], name, r)
}

func (v *LiveView) Tick(elapsed, window time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.drawn > 0 {
		fmt.Fprintf(v.w, "\x1b[%dA", v.drawn)
	}
	fmt.Fprintf(v.w, "\x1b[2K%s  %3.0f/%.0f s\n", v.round, elapsed.Seconds(), window.Seconds())
	for _, s := range v.sessions {
		fmt.Fprintf(v.w, "\x1b[2K  %-28s turn %3d  tools %3d  tokens %6d  %s\n", s.name, s.turn, s.calls, s.tokens, s.last)
	}
	v.drawn = len(v.sessions) + 1
}

// PlainLog writes one line per request, for logs and pipes.
type PlainLog struct {
	mu    sync.Mutex
	w     io.Writer
	round string
	views []sessionView
}

// NewPlainLog is the non-TTY progress of a round of n sessions.
func NewPlainLog(w io.Writer, round string, n int) *PlainLog {
	return &PlainLog{w: w, round: round, views: make([]sessionView, n)}
}

func (p *PlainLog) Step(i int, name string, r *record.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := &p.views[i]
	update(s, name, r)
	ttft := "no first output"
	if r.TTFT >= 0 {
		ttft = fmt.Sprintf("ttft %.3fs", r.TTFT)
	}
	fmt.Fprintf(p.w, "%s %s turn %d at %.1fs: %s (%s, %d tokens)\n", p.round, name, r.Turn, r.End, s.last, ttft, r.OutputTokens())
}

func (p *PlainLog) Tick(time.Duration, time.Duration) {}

func update(s *sessionView, name string, r *record.Request) {
	s.name = name
	s.turn = r.Turn + 1
	s.tokens += r.OutputTokens()
	s.calls += len(r.Calls)
	var what []string
	for _, c := range r.Calls {
		d := c.Name
		if c.ExitCode != nil {
			d += fmt.Sprintf(" exit %d", *c.ExitCode)
		}
		if c.Failed {
			d += " (failed)"
		}
		what = append(what, d)
	}
	switch {
	case r.Cut:
		s.last = "cut"
	case r.Error != "":
		s.last = "error: " + r.Error
	case len(what) == 0:
		s.last = "no tool call"
	default:
		s.last = strings.Join(what, ", ")
	}
}
