// Package bench reproduces the seed report's measurement screens (cache,
// mixed, arrival, speed, concurrency, ids) against any OpenAI-compatible
// server: each target (a boot of the in-process engine, or an endpoint) is
// opened in turn, warmed, measured and closed, and every table gets one
// column per target. Every table cell is computed from the recorded
// requests alone, which results.json keeps whole.
package bench

import (
	"context"
	"fmt"
	"io"
	"jspark/agent/metrics"
	"jspark/agent/report"
	"jspark/agent/target"
	"jspark/backend/refs"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config holds the screens' lengths and counts (the flags).
type Config struct {
	Lengths       []int         `json:"lengths"`        // cache: prompt tokens
	ArriveLengths []int         `json:"arrive_lengths"` // mixed: the arriving prompt's tokens
	ArriveAt      []int         `json:"arrive_at"`      // mixed: streams at once, the arrival included (C2, C3)
	Long          int           `json:"long"`           // arrival and stable-tool: the long prompt's tokens
	Short         int           `json:"short"`          // arrival: the short prompt's tokens
	Delay         time.Duration `json:"delay"`          // arrival: when the short one is sent; 0: a twentieth of the long cold TTFT
	Trials        int           `json:"trials"`         // cache, mixed and arrival: salted trials per cell
	Concurrency   []int         `json:"concurrency"`    // concurrency: offered streams per level
	MaxTokens     int           `json:"max_tokens"`     // speed and concurrency: output cap per request
	IgnoreEOS     bool          `json:"ignore_eos"`     // speed and concurrency: decode to the cap
	IDTokens      int           `json:"id_tokens"`      // ids: greedy tokens per prompt
	RepeatPairs   int           `json:"repeat_pairs"`   // ids: prompts sent twice
	References    []refs.Case   `json:"-"`              // ids: expected outputs; nil: the first target's
	ReferenceFile string        `json:"reference_file,omitempty"`
}

// DefaultConfig is sized to finish in minutes on the embedded model on two
// cores; README.md gives the seed's sizes for a GPU backend.
func DefaultConfig() Config {
	return Config{
		Lengths: []int{1024, 2048, 4096}, ArriveLengths: []int{1024, 2048}, ArriveAt: []int{2, 3},
		Long: 4096, Short: 32, Trials: 3, Concurrency: []int{1, 2, 3, 4, 5, 6},
		MaxTokens: 128, IDTokens: 32, RepeatPairs: 5,
	}
}

// Target is one column: a boot the bench starts, or an endpoint.
type Target struct {
	Name string
	Kind string // boot or endpoint
	Spec string // the boot's engine flags, or the endpoint's URL
	// Open starts or checks the target; close stops what Open started.
	Open func(ctx context.Context) (b target.Backend, close func(), err error)
}

// TargetInfo is a target as results.json records it.
type TargetInfo struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Spec    string `json:"spec"`
	URL     string `json:"url"`
	Model   string `json:"model"`
	Metrics string `json:"metrics"` // "vllm" or why there are none
}

// Run is one screen on one target: its window and the backend's counters.
type Run struct {
	Target     string            `json:"target"`
	Screen     string            `json:"screen"`
	Start      float64           `json:"start"`
	End        float64           `json:"end"`
	Before     *metrics.Counters `json:"before,omitempty"` // nil: no vLLM-named /metrics
	After      *metrics.Counters `json:"after,omitempty"`
	WaitingMax float64           `json:"waiting_max"`
	RunningMax float64           `json:"running_max"`
}

// Version is the bench's results.json schema version (1: the first
// versioned one, the unversioned one plus this field).
const Version = 1

// Result is results.json.
type Result struct {
	Version int            `json:"version"`
	Started time.Time      `json:"started"`
	Screens []string       `json:"screens"`
	Config  Config         `json:"config"`
	Targets []TargetInfo   `json:"targets"`
	Runs    []Run          `json:"runs"`
	Records []Record       `json:"records"`
	Tables  []report.Table `json:"tables"`
}

// Progress hears of each screen's planned requests and of each one done.
type Progress interface {
	Begin(target, screen string, total int)
	Step(r *Record)
	End()
}

// Options are one `jspark bench` run.
type Options struct {
	Screens  []string // in order; see Screens
	Targets  []Target
	Config   Config
	Out      string
	Progress Progress // nil: none
	Log      io.Writer
}

// screen is one of the seed's screens: how many requests it plans, how it
// runs on one target, and its tables over every target's records.
type screen struct {
	planned func(c *Config, p *Prompts) int
	run     func(ctx context.Context, r *runner) error
	tables  func(res *Result) []report.Table
}

var screens = map[string]screen{
	"cache":       {cachePlanned, runCache, cacheTables},
	"mixed":       {mixedPlanned, runMixed, mixedTables},
	"arrival":     {arrivalPlanned, runArrival, arrivalTables},
	"speed":       {speedPlanned, runSpeed, speedTables},
	"concurrency": {concurrencyPlanned, runConcurrency, concurrencyTables},
	"ids":         {idsPlanned, runIDs, idsTables},
}

// Screens are the screen names in the order `all` runs them.
var Screens = []string{"cache", "mixed", "arrival", "speed", "concurrency", "ids"}

// ParseScreen resolves a SCREEN argument.
func ParseScreen(s string) ([]string, error) {
	if s == "all" {
		return Screens, nil
	}
	if _, ok := screens[s]; ok {
		return []string{s}, nil
	}
	return nil, fmt.Errorf("unknown screen %q (screens: %s, or all)", s, strings.Join(Screens, ", "))
}

// Bench runs the screens on every target in turn and writes results.json
// and report.html under Out.
func Bench(ctx context.Context, o Options) (*Result, error) {
	p, err := LoadPrompts()
	if err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	res := &Result{Version: Version, Started: time.Now(), Screens: o.Screens, Config: o.Config, Records: []Record{}}
	for _, t := range o.Targets {
		if err := benchTarget(ctx, o, p, t, res); err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name, err)
		}
	}
	for _, s := range o.Screens {
		res.Tables = append(res.Tables, screens[s].tables(res)...)
	}
	if err := report.Save(o.Out, res, Page(res)); err != nil {
		return nil, err
	}
	return res, nil
}

func benchTarget(ctx context.Context, o Options, p *Prompts, t Target, res *Result) error {
	b, stop, err := t.Open(ctx)
	if err != nil {
		return err
	}
	defer stop()
	info := TargetInfo{Name: t.Name, Kind: t.Kind, Spec: t.Spec, URL: b.URL, Model: b.Model}
	r := &runner{cfg: &o.Config, p: p, name: t.Name, res: res, prog: o.Progress, backend: b,
		c: &client{url: b.URL, key: b.APIKey, model: b.Model, http: &http.Client{}, zero: res.Started}}
	prom := &metrics.Prometheus{URL: metrics.URL(b.URL), Client: &http.Client{Timeout: 5 * time.Second}}
	if _, err := prom.Read(ctx); err != nil {
		info.Metrics = fmt.Sprintf("no vLLM-named /metrics (%v)", err)
		fmt.Fprintf(o.Log, "jspark bench: %s: %s; the tables say so\n", t.Name, info.Metrics)
	} else {
		info.Metrics = "vllm"
		r.src = prom
		r.backend.Counter = prom
	}
	res.Targets = append(res.Targets, info)
	if err := r.warm(ctx); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	for _, name := range o.Screens {
		s := screens[name]
		r.screen = name
		if r.prog != nil {
			r.prog.Begin(t.Name, name, s.planned(&o.Config, p))
		}
		run := Run{Target: t.Name, Screen: name}
		smp := r.sample(ctx, &run)
		err := s.run(ctx, r)
		smp()
		if r.prog != nil {
			r.prog.End()
		}
		res.Runs = append(res.Runs, run)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// runner measures one target.
type runner struct {
	cfg     *Config
	p       *Prompts
	name    string
	screen  string
	res     *Result
	prog    Progress
	backend target.Backend
	c       *client
	src     metrics.Source // nil: the target has no vLLM-named /metrics

	mu     sync.Mutex
	sizers map[string]sizer
}

// send streams one request, records it and reports progress. A failed
// request is a recorded outcome, not an error of the bench.
func (r *runner) send(ctx context.Context, rec Record, path string, body map[string]any, onEvent func(time.Time)) Record {
	rec.Target, rec.Screen = r.name, r.screen
	r.c.stream(ctx, path, body, &rec, onEvent)
	r.mu.Lock()
	r.res.Records = append(r.res.Records, rec)
	r.mu.Unlock()
	if r.prog != nil && rec.Screen != "setup" {
		r.prog.Step(&rec)
	}
	return rec
}

// settle waits for the target to be idle, so that each measurement starts
// from an empty batch (a cancelled stream may still be finishing a step).
func (r *runner) settle(ctx context.Context) { metrics.Settle(ctx, r.backend.Counter) }

// chat is a greedy chat request body.
func chat(system, user string, maxTokens int) map[string]any {
	var msgs []map[string]any
	if system != "" {
		msgs = append(msgs, map[string]any{"role": "system", "content": system})
	}
	msgs = append(msgs, map[string]any{"role": "user", "content": user})
	return map[string]any{"messages": msgs, "max_tokens": maxTokens, "temperature": 0}
}

const chatPath = "/chat/completions"

// warm runs the kernels once before anything is measured.
func (r *runner) warm(ctx context.Context) error {
	r.screen = "setup"
	rec := r.send(ctx, Record{Case: "warm-up"}, chatPath, chat("", "Say hello.", 8), nil)
	if rec.Error != "" {
		return fmt.Errorf("%s", rec.Error)
	}
	return nil
}

// Prompt kinds a sizer is fit for.
const (
	wordPrompts = "words"     // cachePrompt over synthetic prose (cache, arrival)
	logPrompts  = "log lines" // the arrival task over a service log (mixed)
)

// sizer fits, once per target and kind, the target's prompt tokens per
// unit of generated text from two probes (max_tokens 1): none and a few
// hundred tokens' worth.
func (r *runner) sizer(ctx context.Context, kind string) (sizer, error) {
	if s, ok := r.sizers[kind]; ok {
		return s, nil
	}
	gen, units := func(n int) string { return cachePrompt(words(n, 1)) }, 100
	if kind == logPrompts {
		gen, units = func(n int) string { return r.p.Arrival + "\n" + logLines(n, 1) }, 12
	}
	screen := r.screen
	r.screen = "setup"
	defer func() { r.screen = screen }()
	var p [2]float64
	for i, n := range []int{0, units} {
		salt := newSalt()
		rec := r.send(ctx, Record{Case: "probe " + kind, Salt: salt}, chatPath, chat("", salted(salt, gen(n)), 1), nil)
		if rec.Error != "" || rec.PromptTokens == 0 {
			return sizer{}, fmt.Errorf("sizing probe: %s (usage: %d prompt tokens)", rec.Error, rec.PromptTokens)
		}
		p[i] = float64(rec.PromptTokens)
	}
	s := sizer{base: p[0], per: (p[1] - p[0]) / float64(units)}
	if r.sizers == nil {
		r.sizers = map[string]sizer{}
	}
	r.sizers[kind] = s
	return s, nil
}

// sample reads the counters four times a second until the returned stop.
func (r *runner) sample(ctx context.Context, run *Run) (stop func()) {
	run.Start = time.Since(r.res.Started).Seconds()
	if r.src == nil {
		return func() { run.End = time.Since(r.res.Started).Seconds() }
	}
	read := func() *metrics.Counters {
		c, err := r.src.Read(ctx)
		if err != nil {
			return nil
		}
		run.WaitingMax = max(run.WaitingMax, c.Waiting)
		run.RunningMax = max(run.RunningMax, c.Running)
		return &c
	}
	run.Before = read()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				read()
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		run.After = read()
		run.End = time.Since(r.res.Started).Seconds()
	}
}

// records are the target's records of a screen, in order, those whose case
// matches when cases are given.
func (res *Result) records(target, screen string, cases ...string) []Record {
	var out []Record
	for _, r := range res.Records {
		if r.Target == target && r.Screen == screen && (len(cases) == 0 || slices.Contains(cases, r.Case)) {
			out = append(out, r)
		}
	}
	return out
}

func (res *Result) run(target, screen string) *Run {
	for i := range res.Runs {
		if res.Runs[i].Target == target && res.Runs[i].Screen == screen {
			return &res.Runs[i]
		}
	}
	return nil
}

// countersNote says, per target, what its /metrics showed over the screen.
func (res *Result) countersNote(screen string) string {
	var parts []string
	for _, t := range res.Targets {
		run := res.run(t.Name, screen)
		if run == nil {
			continue
		}
		if run.Before == nil || run.After == nil {
			parts = append(parts, fmt.Sprintf("%s: %s", t.Name, t.Metrics))
			continue
		}
		a, b := run.After, run.Before
		parts = append(parts, fmt.Sprintf("%s: prefix-cache hits %s tokens, preemptions %.0f, waiting max %.0f, running max %.0f",
			t.Name, count(int(a.PrefixHits-b.PrefixHits)), a.Preemptions-b.Preemptions, run.WaitingMax, run.RunningMax))
	}
	if len(parts) == 0 {
		return ""
	}
	return "Backend counters (vllm:* from /metrics, sampled 4/s) — " + strings.Join(parts, "; ") + "."
}

// errorsNote lists failed requests of a screen, if any.
func (res *Result) errorsNote(screen string) string {
	n, first := 0, ""
	for _, r := range res.Records {
		if r.Screen == screen && r.Error != "" {
			if n == 0 {
				first = fmt.Sprintf("%s %s: %s", r.Target, r.Case, r.Error)
			}
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" %d requests failed (first: %s).", n, first)
}
