package bench

import (
	"fmt"
	"io"
	"sync"

	"github.com/schollz/progressbar/v3"
)

// Bars draws one progress bar per screen on a terminal.
type Bars struct {
	mu  sync.Mutex
	w   io.Writer
	bar *progressbar.ProgressBar
}

// NewBars is the TTY progress of a bench run.
func NewBars(w io.Writer) *Bars { return &Bars{w: w} }

func (b *Bars) Begin(target, screen string, total int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(b.w), progressbar.OptionSetDescription(fmt.Sprintf("%-12s %-12s", target, screen)),
		progressbar.OptionShowCount(), progressbar.OptionSetWidth(30), progressbar.OptionClearOnFinish(), progressbar.OptionShowElapsedTimeOnFinish())
}

func (b *Bars) Step(r *Record) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bar != nil {
		b.bar.Add(1)
	}
}

func (b *Bars) End() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bar != nil {
		b.bar.Finish()
		fmt.Fprintln(b.w)
	}
	b.bar = nil
}

// Lines writes one plain line per request, for logs and pipes.
type Lines struct {
	mu             sync.Mutex
	w              io.Writer
	target, screen string
	done, total    int
}

// NewLines is the non-TTY progress of a bench run.
func NewLines(w io.Writer) *Lines { return &Lines{w: w} }

func (l *Lines) Begin(target, screen string, total int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.target, l.screen, l.done, l.total = target, screen, 0, total
}

func (l *Lines) Step(r *Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done++
	what := fmt.Sprintf("ttft %s, %d tokens", secs(r.TTFT), r.CompletionTokens)
	if r.CompletionTokens == 0 { // a stream cut before its usage came
		what = fmt.Sprintf("ttft %s, %d output events", secs(r.TTFT), len(r.Events()))
	}
	switch {
	case r.Error != "":
		what = "error: " + r.Error
	case r.Cut:
		what += ", cut"
	}
	role := ""
	if r.Role != "" {
		role = " " + r.Role
	}
	fmt.Fprintf(l.w, "bench %s %s %d/%d: %s%s trial %d: %s\n", l.target, l.screen, l.done, l.total, r.Case, role, r.Trial, what)
}

func (l *Lines) End() {}
