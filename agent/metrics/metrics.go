// Package metrics reads a serving backend's counters: the in-process
// engine's, or an endpoint's Prometheus /metrics under vLLM's names (which
// jspark serve exports too). The round runner samples them through a Meter;
// the bench reads them around each screen.
package metrics

import (
	"context"
	"sync"
	"time"
)

// Counters are a backend's serving counters at one moment.
type Counters struct {
	Generation  float64 `json:"generation_tokens"` // accepted output tokens, cumulative
	Running     float64 `json:"running"`
	Waiting     float64 `json:"waiting"`
	Preemptions float64 `json:"preemptions"` // cumulative
	PrefixHits  float64 `json:"prefix_hits"` // prompt tokens found in the prefix cache, cumulative
}

func (c *Counters) add(d Counters) {
	c.Generation += d.Generation
	c.Running += d.Running
	c.Waiting += d.Waiting
	c.Preemptions += d.Preemptions
	c.PrefixHits += d.PrefixHits
}

// Kind is what counted a round's output tokens; results.json keeps it as
// counted_by.
type Kind string

const (
	ByEngine     Kind = "engine"     // the in-process engine's accepted-output-token counter
	ByPrometheus Kind = "prometheus" // an endpoint's vllm:generation_tokens_total
	ByStream     Kind = "stream"     // the tokens the sessions' streams delivered (no /metrics)
)

// Note is how the Work table names the kind.
func (k Kind) Note() string {
	switch k {
	case ByEngine:
		return "the engine's accepted-output-token counter"
	case ByPrometheus:
		return "the endpoint's vllm:generation_tokens_total"
	case ByStream:
		return "streamed tokens (the endpoint has no /metrics)"
	}
	return string(k)
}

// Source reads one backend's counters.
type Source interface {
	Read(ctx context.Context) (Counters, error)
	Kind() Kind
}

// Engine reads the in-process engine.
type Engine func() Counters

func (f Engine) Read(context.Context) (Counters, error) { return f(), nil }
func (Engine) Kind() Kind                               { return ByEngine }

// Settle waits (up to a minute) until no source has requests running or
// waiting: requests a cut round's clients dropped may still be finishing an
// engine step, and a measurement must start on an idle backend to measure
// its own. Nil sources are passed over.
func Settle(ctx context.Context, sources ...Source) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		busy := false
		for _, s := range sources {
			if s == nil {
				continue
			}
			if c, err := s.Read(ctx); err == nil && c.Running+c.Waiting > 0 {
				busy = true
			}
		}
		if !busy {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Meter reads a round's backends as one: the sum of their counters or, when
// any of them has none, the output tokens the sessions' streams delivered
// (a stream Meter reads zero counters while the round runs, and its count
// is known once every session has ended, the cut requests' tokens
// included).
type Meter struct {
	sources []Source
	kind    Kind

	mu       sync.Mutex
	streamed float64
}

// NewMeter meters the sources; a nil source makes it count streams.
func NewMeter(sources []Source) *Meter {
	m := &Meter{kind: ByStream}
	for _, s := range sources {
		if s == nil {
			return &Meter{kind: ByStream}
		}
		m.sources = append(m.sources, s)
		m.kind = s.Kind()
	}
	return m
}

// Kind is what counts the round's tokens.
func (m *Meter) Kind() Kind { return m.kind }

// Read sums one reading of every source; a source that fails this time is
// left out (the next reading tries again).
func (m *Meter) Read(ctx context.Context) Counters {
	var sum Counters
	for _, s := range m.sources {
		if c, err := s.Read(ctx); err == nil {
			sum.add(c)
		}
	}
	return sum
}

// Streamed counts a finished request's output tokens; only a stream Meter
// keeps them.
func (m *Meter) Streamed(tokens int) {
	if m.kind != ByStream {
		return
	}
	m.mu.Lock()
	m.streamed += float64(tokens)
	m.mu.Unlock()
}

// Final is the round's closing count from the reading at the cut: that
// reading, except that a stream Meter's output tokens are those counted
// once every session ended.
func (m *Meter) Final(atCut Counters) Counters {
	if m.kind == ByStream {
		m.mu.Lock()
		atCut.Generation = m.streamed
		m.mu.Unlock()
	}
	return atCut
}
