package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"jspark/recipes"
	"jspark/sandbox"
	"jspark/tools"
)

// Backend is one OpenAI-compatible server the sessions talk to.
type Backend struct {
	URL     string // base URL, ending in /v1
	APIKey  string
	Model   string
	Counter Source // nil: count streamed tokens
	// Handler is the in-process engine's HTTP server (nil for an endpoint):
	// external agents reach it through their sandbox's door.
	Handler http.Handler
	Context int // the engine's context window in tokens (0: unknown)
}

// RoundOptions say what to run and where.
type RoundOptions struct {
	Recipe   *recipes.Recipe
	Round    *recipes.Round
	Backends []Backend // sessions are spread over them; each stays on one
	Window   time.Duration
	Out      string // the round's folder
	Sandbox  sandbox.Options
	Progress Progress      // nil: none
	Agent    *Installation // the round's external agent; nil: jspark's own loop
}

// SessionResult is one session's record.
type SessionResult struct {
	Name               string    `json:"name"`
	Task               string    `json:"task"`
	Backend            string    `json:"backend"`
	End                End       `json:"end"`
	Requests           []Request `json:"requests"`
	ToolCalls          int       `json:"tool_calls"`
	NonzeroExits       int       `json:"nonzero_shell_exits"`
	APIErrors          int       `json:"api_errors"`
	FirstOutputPending bool      `json:"first_output_pending"`
	InitialPayload     string    `json:"initial_payload_sha256"`
	CheckExit          *int      `json:"check_exit,omitempty"`
	ExpectMet          *bool     `json:"expect_met,omitempty"` // the final reply holds the task's expected text
	Isolated           bool      `json:"isolated"`
	// An external agent's run: which, its exit status and time (both nil
	// when cut), why it could not run, and its printed answer (clipped).
	Agent        string   `json:"agent,omitempty"`
	AgentExit    *int     `json:"agent_exit,omitempty"`
	AgentSeconds *float64 `json:"agent_seconds,omitempty"`
	AgentError   string   `json:"agent_error,omitempty"`
	AgentOutput  string   `json:"agent_output,omitempty"`

	payload []byte
	final   string
}

// worker is one session of a round: jspark's own loop or an external agent.
type worker interface {
	begin(window context.Context, start time.Time, onStep func(*Request))
	Run(ctx context.Context) ([]Request, End)
	// finish fills in what only the worker knows and reports any record it
	// could not write.
	finish(sr *SessionResult) error
}

// Sample is one reading of the backend counters, summed over backends.
type Sample struct {
	T float64 `json:"t"` // seconds from the round's start
	Counters
}

// Summary is the round's line of the Work table.
type Summary struct {
	BackendTokS  float64 `json:"backend_tok_s"` // accepted output tokens / window
	OutputTokens float64 `json:"output_tokens"` // the counter's delta over the window
	// TTFTs in seconds; nil (null) when no such request had a first output:
	// a mean over nothing is not 0.
	InitialTTFT     *float64 `json:"initial_ttft"`      // mean over sessions' first requests
	LaterMedianTTFT *float64 `json:"later_median_ttft"` // median over every later request
	ToolCalls       int      `json:"tool_calls"`
	NonzeroExits    int      `json:"nonzero_shell_exits"`
	APIErrors       int      `json:"api_errors"`
	PendingAtCut    int      `json:"first_output_pending_at_cut"`
	WaitingMax      float64  `json:"waiting_max"`
	RunningMax      float64  `json:"running_max"`
	Preemptions     float64  `json:"preemptions"`
	PrefixHits      float64  `json:"prefix_hits"` // the counter's delta: prompt tokens the prefix cache served
	CountedBy       string   `json:"counted_by"`  // engine, prometheus or stream
	ChecksPassed    int      `json:"checks_passed"`
	Checks          int      `json:"checks"`
	// WindowUse is where the window went, summed over the round's
	// requests; nil when the backend reported no request's timing.
	WindowUse *WindowUse `json:"window_use"`
}

// WindowUse sums, over a round's requests, the engine's timing of each
// (usage.jspark.timing: those that reported one) and the time their tool
// calls ran. Sessions run side by side, so the sums exceed the window.
type WindowUse struct {
	QueuedSec    float64 `json:"queued_s"`
	PrefillSec   float64 `json:"prefill_s"`
	DecodeSec    float64 `json:"decode_s"`
	PreemptedSec float64 `json:"preempted_s"`
	ToolsSec     float64 `json:"tools_s"`
	Reported     int     `json:"reported_requests"` // requests with a timing
}

// windowUse sums the sessions' requests; nil when none reported a timing.
func windowUse(ss []SessionResult) *WindowUse {
	var w WindowUse
	for _, sr := range ss {
		for _, q := range sr.Requests {
			w.ToolsSec += q.ToolsSec
			if t := q.Timing; t != nil {
				w.QueuedSec += t.QueuedSec
				w.PrefillSec += t.PrefillSec
				w.DecodeSec += t.DecodeSec
				w.PreemptedSec += t.PreemptedSec
				w.Reported++
			}
		}
	}
	if w.Reported == 0 {
		return nil
	}
	return &w
}

// RoundResult is everything a round recorded.
type RoundResult struct {
	Name        string          `json:"name"`
	RepeatOf    string          `json:"repeat_of,omitempty"`
	Concurrency int             `json:"concurrency"`
	Window      float64         `json:"window"`
	Started     time.Time       `json:"started"`
	Sessions    []SessionResult `json:"sessions"`
	Samples     []Sample        `json:"samples"`
	Summary     Summary         `json:"summary"`
	// Isolation is what confined the round's sandboxes (the first one's
	// report: they are made alike), warnings included.
	Isolation *sandbox.Isolation `json:"isolation,omitempty"`
}

// RunRound starts every session of the round at once, cuts them at the
// window, samples the backends every second and summarises.
func RunRound(ctx context.Context, o RoundOptions) (*RoundResult, error) {
	plan := o.Recipe.Plan(o.Round)
	ts, err := tools.Select(o.Recipe.Tools)
	if err != nil {
		return nil, err
	}
	res := &RoundResult{Name: o.Round.Name, RepeatOf: o.Round.RepeatOf, Concurrency: len(plan), Window: o.Window.Seconds()}
	sessions := make([]worker, len(plan))
	boxes := make([]*sandbox.Sandbox, len(plan))
	logs := make([]*os.File, len(plan))
	defer func() {
		for i := range plan {
			if boxes[i] != nil {
				boxes[i].Close()
			}
			if logs[i] != nil {
				logs[i].Close()
			}
		}
	}()
	sopt := o.Sandbox
	if o.Agent != nil {
		// Node reserves tens of GiB of address space (WebAssembly memories
		// with their guard regions): an address-space rlimit kills it at its
		// first fetch. Its memory is the sandbox's memory bound instead.
		if sopt.Limits == (sandbox.Limits{}) {
			sopt.Limits = sandbox.DefaultLimits
		}
		sopt.Limits.AddressSpace = 0
		// The sandbox shows the host only what it names: the agent's
		// install and node's.
		sopt.ReadOnly = append(append([]string{}, sopt.ReadOnly...), o.Agent.Dir)
		sopt.Programs = append(append([]string{}, sopt.Programs...), o.Agent.Node)
	}
	for i, task := range plan {
		name := fmt.Sprintf("s%d-%s", i, task.ID)
		dir := filepath.Join(o.Out, name)
		box, err := sandbox.New(filepath.Join(dir, "workspace"), task.Files, sopt)
		if err != nil {
			return nil, fmt.Errorf("session %s: %w", name, err)
		}
		boxes[i] = box
		if res.Isolation == nil {
			iso := box.Isolation()
			res.Isolation = &iso
		}
		if logs[i], err = os.Create(filepath.Join(dir, "trajectory.jsonl")); err != nil {
			return nil, err
		}
		b := o.Backends[i%len(o.Backends)]
		res.Sessions = append(res.Sessions, SessionResult{Name: name, Task: task.ID, Backend: b.URL, Isolated: box.Isolated()})
		if o.Agent != nil {
			if sessions[i], err = newExternalSession(o.Round.Name+"/"+name, name, dir, task, o.Agent, box, logs[i], b, o.Recipe.Sampling.MaxTokens); err != nil {
				return nil, fmt.Errorf("session %s: %w", name, err)
			}
			continue
		}
		capture := &payloadCapture{next: sessionHeader{next: http.DefaultTransport, id: o.Round.Name + "/" + name}}
		cfg := openai.DefaultConfig(b.APIKey)
		cfg.BaseURL = b.URL
		cfg.HTTPClient = &http.Client{Transport: capture}
		sessions[i] = &Session{
			Name: name, Task: task, Recipe: o.Recipe, Client: openai.NewClientWithConfig(cfg), Model: b.Model,
			Tools: ts, Env: &tools.Env{Box: box, Timeout: o.Recipe.Shell.Timeout.D(), OutputLimit: o.Recipe.Shell.OutputLimit},
			Log: logs[i], payload: capture,
		}
	}

	sources, kind := counterSources(o.Backends)
	read := func(t0 time.Time) Sample {
		s := Sample{T: time.Since(t0).Seconds()}
		for _, src := range sources {
			c, err := src.Read(ctx)
			if err != nil {
				continue // one missed reading; the next second tries again
			}
			s.Generation += c.Generation
			s.Running += c.Running
			s.Waiting += c.Waiting
			s.Preemptions += c.Preemptions
			s.PrefixHits += c.PrefixHits
		}
		return s
	}

	start := time.Now()
	res.Started = start
	first := read(start)
	first.T = 0
	res.Samples = append(res.Samples, first)
	wctx, cancel := context.WithDeadline(ctx, start.Add(o.Window))
	defer cancel()

	var wg sync.WaitGroup
	var streamed sync.Mutex
	streamTokens := 0.0
	results := make([][]Request, len(sessions))
	ends := make([]End, len(sessions))
	for i, s := range sessions {
		name := res.Sessions[i].Name
		s.begin(wctx, start, func(r *Request) {
			if kind == "stream" {
				streamed.Lock()
				streamTokens += float64(max(r.CompletionTokens, r.StreamedTokens))
				streamed.Unlock()
			}
			if o.Progress != nil {
				o.Progress.Step(i, name, r)
			}
		})
		wg.Go(func() { results[i], ends[i] = s.Run(wctx) })
	}

	// Sample every second, and once more exactly at the cut.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last Sample
sampling:
	for {
		select {
		case <-tick.C:
			res.Samples = append(res.Samples, read(start))
			if o.Progress != nil {
				o.Progress.Tick(time.Since(start), o.Window)
			}
		case <-wctx.Done():
			last = read(start)
			res.Samples = append(res.Samples, last)
			break sampling
		case <-done: // every session ended before the window: nothing more will come
			last = read(start)
			res.Samples = append(res.Samples, last)
			break sampling
		}
	}
	<-done
	if kind == "stream" {
		last.Generation = streamTokens
	}
	var errs []error

	for i := range sessions {
		sr := &res.Sessions[i]
		sr.Requests, sr.End = results[i], ends[i]
		if err := sessions[i].finish(sr); err != nil {
			errs = append(errs, fmt.Errorf("session %s: %w", sr.Name, err))
		}
		sum := sha256.Sum256(sr.payload)
		sr.InitialPayload = hex.EncodeToString(sum[:])
		if err := os.WriteFile(filepath.Join(o.Out, sr.Name, "initial_request.json"), sr.payload, 0o644); err != nil {
			errs = append(errs, fmt.Errorf("session %s: %w", sr.Name, err))
		}
		for _, r := range sr.Requests {
			if r.Error != "" && !r.Trimmed {
				sr.APIErrors++
			}
			for _, c := range r.Calls {
				sr.ToolCalls++
				if c.ExitCode != nil && *c.ExitCode != 0 {
					sr.NonzeroExits++
				}
			}
		}
		sr.FirstOutputPending = len(sr.Requests) == 0 || sr.Requests[0].TTFT < 0
		if check := plan[i].Check; check != "" {
			if r, err := boxes[i].Exec(ctx, check, o.Recipe.Shell.Timeout.D(), o.Recipe.Shell.OutputLimit); err == nil {
				sr.CheckExit = &r.ExitCode
			}
		}
		if want := plan[i].Expect; want != "" {
			met := strings.Contains(sr.final, want)
			sr.ExpectMet = &met
		}
	}
	res.Summary = summarize(res, first, last, kind)
	// A record that could not be written is a failed run, not a quiet gap.
	return res, errors.Join(errs...)
}

func counterSources(bs []Backend) ([]Source, string) {
	var out []Source
	kind := ""
	for _, b := range bs {
		if b.Counter == nil {
			return nil, "stream"
		}
		out = append(out, b.Counter)
		kind = b.Counter.Kind()
	}
	return out, kind
}

func summarize(r *RoundResult, first, last Sample, kind string) Summary {
	s := Summary{CountedBy: kind}
	s.OutputTokens = last.Generation - first.Generation
	s.BackendTokS = s.OutputTokens / r.Window
	s.Preemptions = last.Preemptions - first.Preemptions
	s.PrefixHits = last.PrefixHits - first.PrefixHits
	for _, x := range r.Samples {
		s.WaitingMax = max(s.WaitingMax, x.Waiting)
		s.RunningMax = max(s.RunningMax, x.Running)
	}
	var initial, later []float64
	for _, sr := range r.Sessions {
		s.ToolCalls += sr.ToolCalls
		s.NonzeroExits += sr.NonzeroExits
		s.APIErrors += sr.APIErrors
		if sr.FirstOutputPending {
			s.PendingAtCut++
		}
		for j, q := range sr.Requests {
			if q.TTFT < 0 {
				continue
			}
			if j == 0 {
				initial = append(initial, q.TTFT)
			} else {
				later = append(later, q.TTFT)
			}
		}
		// A task's check passes when its command exits 0 and its final
		// reply holds the expected text, each where the task has one.
		if sr.CheckExit != nil || sr.ExpectMet != nil {
			s.Checks++
			if (sr.CheckExit == nil || *sr.CheckExit == 0) && (sr.ExpectMet == nil || *sr.ExpectMet) {
				s.ChecksPassed++
			}
		}
	}
	s.InitialTTFT = mean(initial)
	s.LaterMedianTTFT = median(later)
	s.WindowUse = windowUse(r.Sessions)
	return s
}

// mean is nil over no samples.
func mean(xs []float64) *float64 {
	if len(xs) == 0 {
		return nil
	}
	t := 0.0
	for _, x := range xs {
		t += x
	}
	t /= float64(len(xs))
	return &t
}

// median is nil over no samples.
func median(xs []float64) *float64 {
	if len(xs) == 0 {
		return nil
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + m) / 2
	}
	return &m
}

// Progress is told about every step and every second.
type Progress interface {
	Step(session int, name string, r *Request)
	Tick(elapsed, window time.Duration)
}
