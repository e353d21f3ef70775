package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"jspark/agent/metrics"
	"jspark/agent/record"
	"jspark/agent/report"
	"jspark/agent/target"
)

// A replay re-sends a recorded `jspark work` run's requests to a target:
// every session's bodies as they were sent (record.BodiesFile), the
// sessions of a round at once, each request sent when the previous one's
// response ended plus the gap the recording had there (the tools' time),
// a request the window cut held for as long as it was then cancelled. No
// sandbox runs and nothing is checked: the traffic is the agents', fixed,
// so that a difference in serving shows as one in the serving columns,
// and a difference in what the model did shows as outputs of other
// lengths (Compare).

// ReplayOptions are one `jspark bench replay` run.
type ReplayOptions struct {
	Dir      string // the recorded run's folder (its results.json)
	Round    string // a round's name ("" or "all": every round)
	Targets  []Target
	GapScale float64 // the recorded gaps times this: 1 as recorded, 0 none
	Out      string
	Progress Progress // nil: none
	Log      io.Writer
}

// ReplayVersion is the version of a replay's results.json.
const ReplayVersion = 1

// ReplayResult is a replay's results.json.
type ReplayResult struct {
	Version  int            `json:"version"`
	Source   string         `json:"source"` // the recorded run's folder
	Recipe   string         `json:"recipe"`
	Window   float64        `json:"window"` // the recorded run's window
	GapScale float64        `json:"gap_scale"`
	Started  time.Time      `json:"started"`
	Targets  []TargetInfo   `json:"targets"`
	Rounds   []ReplayRound  `json:"rounds"`
	Tables   []report.Table `json:"tables"`

	recorded []*record.Round
	work     *record.Work // the recorded run (its trials, for the rounds' labels)
}

// ReplayRound is one recorded round replayed on one target.
type ReplayRound struct {
	Target string `json:"target"`
	// Round is the replay as the runner records a round: each session's
	// requests (times in seconds from the replay's start), the counters'
	// samples and the summary, whose window is the replay's span: from its
	// start to its last response's end.
	*record.Round
	Compare Compare `json:"compare"`
}

// Compare puts a replayed round beside its recording.
type Compare struct {
	Recorded Totals `json:"recorded"`
	Replayed Totals `json:"replayed"`
	// Finished counts the requests that ended normally both times (no
	// error, not cut); SameOutput those of them whose output had as many
	// tokens as the recording's.
	Finished   int `json:"finished_both"`
	SameOutput int `json:"same_output"`
}

// Totals sum a round's requests.
type Totals struct {
	Requests     int `json:"requests"`
	PromptTokens int `json:"prompt_tokens"`
	OutputTokens int `json:"output_tokens"`
	CachedTokens int `json:"cached_tokens"`
	Errors       int `json:"errors"`
	Cut          int `json:"cut"`
}

// recorded is a run as a replay reads it: its results, and each session's
// bodies, by round and session.
type recorded struct {
	work   *record.Work
	rounds []*record.Round
	bodies map[string][][]record.Body
}

// loadRecorded reads the run in dir: the rounds named (a repeat round
// brings its first round before it), every session's bodies lined up with
// its requests.
func loadRecorded(dir, round string) (*recorded, error) {
	file := filepath.Join(dir, "results.json")
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var probe struct {
		Version int `json:"version"`
		Targets []struct {
			Name string `json:"name"`
		} `json:"targets"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(probe.Targets) > 0 {
		var names []string
		for _, t := range probe.Targets {
			names = append(names, filepath.Join(dir, t.Name))
		}
		return nil, fmt.Errorf("%s is a run over %d targets: replay one of them (%s)", dir, len(names), strings.Join(names, ", "))
	}
	if probe.Version != record.Version {
		return nil, fmt.Errorf("%s: results.json version %d; this jspark replays version %d", file, probe.Version, record.Version)
	}
	var w record.Work
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	rec := &recorded{work: &w, bodies: map[string][][]record.Body{}}
	if rec.rounds, err = pickRounds(&w, round); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	for _, r := range rec.rounds {
		for _, s := range r.Sessions {
			bodies, err := sessionBodies(dir, roundDir(&w, r), &s)
			if err != nil {
				return nil, err
			}
			rec.bodies[w.Label(r)] = append(rec.bodies[w.Label(r)], bodies)
		}
	}
	return rec, nil
}

// roundDir is a recorded round's folder under the run's: ROUND, or
// ROUND/tK for trial K of a run with several (as the runner lays it out).
func roundDir(w *record.Work, r *record.Round) string {
	if w.Trials > 1 {
		return filepath.Join(r.Name, fmt.Sprintf("t%d", r.Trial))
	}
	return r.Name
}

// sameRound says whether a and b are the same round and trial.
func sameRound(a, b *record.Round) bool { return a.Name == b.Name && a.Trial == b.Trial }

// pickRounds resolves a round argument against a recorded run.
func pickRounds(w *record.Work, name string) ([]*record.Round, error) {
	if name == "" || name == "all" {
		return w.Rounds, nil
	}
	var names []string
	for _, r := range w.Rounds {
		names = append(names, r.Name)
	}
	// Every trial of the round, each after its first round's same trial
	// when it repeats one.
	var out []*record.Round
	for _, r := range w.Rounds {
		if r.Name != name {
			continue
		}
		for _, first := range w.Rounds {
			if r.RepeatOf != "" && first.Name == r.RepeatOf && first.Trial == r.Trial {
				out = append(out, first)
			}
		}
		out = append(out, r)
	}
	if len(out) > 0 {
		return out, nil
	}
	return nil, fmt.Errorf("the run has no round %q (rounds: %s, or all)", name, strings.Join(names, ", "))
}

// sessionBodies reads a session's bodies: one per recorded request.
// round is its round's folder (roundDir).
func sessionBodies(dir, round string, s *record.Session) ([]record.Body, error) {
	file := filepath.Join(dir, round, s.Name, record.BodiesFile)
	bodies, err := record.ReadBodies(file)
	if os.IsNotExist(err) {
		return nil, fmt.Errorf("round %s, session %s: no %s: the run was recorded before jspark kept every request's body, so only its first (initial_request.json) is known", round, s.Name, record.BodiesFile)
	}
	if err != nil {
		return nil, err
	}
	if len(bodies) != len(s.Requests) {
		return nil, fmt.Errorf("%s: %d bodies for the %d requests results.json records", file, len(bodies), len(s.Requests))
	}
	return bodies, nil
}

// Replay replays the recorded run on every target in turn and writes
// results.json and report.html under Out.
func Replay(ctx context.Context, o ReplayOptions) (*ReplayResult, error) {
	rec, err := loadRecorded(o.Dir, o.Round)
	if err != nil {
		return nil, err
	}
	if o.GapScale < 0 {
		return nil, fmt.Errorf("gap scale %g: want 0 or more", o.GapScale)
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	res := &ReplayResult{Version: ReplayVersion, Source: o.Dir, Recipe: rec.work.Recipe, Window: rec.work.Window, GapScale: o.GapScale,
		Started: time.Now(), recorded: rec.rounds, work: rec.work}
	for _, t := range o.Targets {
		if err := replayTarget(ctx, o, rec, t, res); err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name, err)
		}
	}
	res.Tables = res.tables()
	if err := report.Save(o.Out, res, res.page()); err != nil {
		return nil, err
	}
	return res, nil
}

func replayTarget(ctx context.Context, o ReplayOptions, rec *recorded, t Target, res *ReplayResult) error {
	b, stop, err := t.Open(ctx)
	if err != nil {
		return err
	}
	defer stop()
	info := TargetInfo{Name: t.Name, Kind: t.Kind, Spec: t.Spec, URL: b.URL, Model: b.Model, Metrics: "none: streamed tokens counted"}
	if b.Counter != nil {
		info.Metrics = string(b.Counter.Kind())
	}
	res.Targets = append(res.Targets, info)
	rp := &replayer{o: o, name: t.Name, backend: b}
	for _, r := range rec.rounds {
		metrics.Settle(ctx, b.Counter)
		out := rp.round(ctx, r, rec.bodies[rec.work.Label(r)])
		if ctx.Err() != nil {
			return ctx.Err()
		}
		res.Rounds = append(res.Rounds, ReplayRound{Target: t.Name, Round: out, Compare: compare(r, out)})
	}
	return nil
}

// replayer replays rounds on one target.
type replayer struct {
	o       ReplayOptions
	name    string
	backend target.Backend
}

// round replays one round: its sessions at once, the counters read at the
// start, every second and at the end.
func (rp *replayer) round(ctx context.Context, r *record.Round, bodies [][]record.Body) *record.Round {
	meter := metrics.NewMeter([]metrics.Source{rp.backend.Counter})
	total := 0
	for _, s := range r.Sessions {
		total += len(s.Requests)
	}
	if rp.o.Progress != nil {
		rp.o.Progress.Begin(rp.name, "replay "+r.Name, total)
		defer rp.o.Progress.End()
	}
	start := time.Now()
	out := &record.Round{Name: r.Name, RepeatOf: r.RepeatOf, Trial: r.Trial, Concurrency: r.Concurrency, Started: start}
	first := record.Sample{Counters: meter.Read(ctx)}
	out.Samples = append(out.Samples, first)
	c := &client{url: rp.backend.URL, key: rp.backend.APIKey, http: &http.Client{}, zero: start}
	out.Sessions = make([]record.Session, len(r.Sessions))
	var wg sync.WaitGroup
	for i, s := range r.Sessions {
		out.Sessions[i] = record.Session{Name: s.Name, Task: s.Task, Backend: rp.backend.URL}
		wg.Go(func() {
			out.Sessions[i].Requests = rp.session(ctx, c, r.Name+"/"+s.Name, s.Requests, bodies[i], meter)
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	reading := func() record.Sample {
		return record.Sample{T: time.Since(start).Seconds(), Counters: meter.Read(ctx)}
	}
	for running := true; running; {
		select {
		case <-tick.C:
			out.Samples = append(out.Samples, reading())
		case <-done:
			running = false
		}
	}
	last := reading()
	out.Samples = append(out.Samples, last)
	out.Window = last.T
	for i := range out.Sessions {
		out.Sessions[i].Tally()
		if n := len(out.Sessions[i].Requests); n > 0 {
			out.Sessions[i].End = r.Sessions[i].End
		}
	}
	out.Summary = record.Summarize(out, first, record.Sample{T: last.T, Counters: meter.Final(last.Counters)}, meter.Kind())
	return out
}

// session replays one session's requests in order; key names it to the
// server (X-Session-Id), as the runner did.
func (rp *replayer) session(ctx context.Context, c *client, key string, reqs []record.Request, bodies []record.Body, meter *metrics.Meter) []record.Request {
	var out []record.Request
	header := http.Header{"X-Session-Id": {key}}
	var ended time.Time // when the previous response ended, in the replay
	for i, q := range reqs {
		at := c.zero.Add(seconds(q.Sent))
		if i > 0 {
			at = ended.Add(seconds(max(0, q.Sent-reqs[i-1].End) * rp.o.GapScale))
		}
		if !sleepUntil(ctx, at) {
			break
		}
		rctx, cancel := ctx, context.CancelFunc(func() {})
		start := time.Now()
		if q.Cut { // the client held it this long, then the window ended
			rctx, cancel = context.WithDeadline(ctx, start.Add(seconds(q.End-q.Sent)))
		}
		rec := Record{Target: rp.name, Screen: "replay", Case: key, Trial: i}
		c.post(rctx, bodies[i].Path, rp.body(bodies[i]), header, &rec, nil)
		cancel()
		if q.Cut { // held from start: a busy machine may have sent it later
			rec.Sent = min(rec.Sent, start.Sub(c.zero).Seconds())
		}
		ended = time.Now()
		if ctx.Err() != nil {
			break // the replay was stopped: this request is no outcome
		}
		r := replayed(i, &rec)
		meter.Streamed(r.OutputTokens())
		out = append(out, r)
		if rp.o.Progress != nil {
			rp.o.Progress.Step(&rec)
		}
	}
	return out
}

// body is a recorded body as the target takes it: as it was, except for
// the model's name where the target serves another.
func (rp *replayer) body(b record.Body) []byte {
	var m struct {
		Model *string `json:"model"`
	}
	if b.JSON == nil || json.Unmarshal(b.JSON, &m) != nil || m.Model == nil || *m.Model == rp.backend.Model || rp.backend.Model == "" {
		return b.Bytes()
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(b.JSON, &fields) != nil {
		return b.Bytes()
	}
	fields["model"], _ = json.Marshal(rp.backend.Model)
	out, err := json.Marshal(fields)
	if err != nil {
		return b.Bytes()
	}
	return out
}

// replayed is a bench record as the runner records a request.
func replayed(turn int, r *Record) record.Request {
	q := record.Request{Turn: turn, Sent: r.Sent, TTFT: r.TTFT, End: r.End, PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens,
		CachedTokens: r.CachedTokens, Finish: record.Clip(r.Finish), Error: record.Clip(r.Error), Cut: r.Cut, Timing: r.Timing}
	if r.TTFT >= 0 {
		q.StreamedTokens = 1 + len(r.Gaps)
	}
	for _, c := range r.Calls {
		q.Calls = append(q.Calls, record.NewCall(c.ID, c.Name, c.Arguments))
	}
	return q
}

// compare sums a recorded round and its replay, and counts the requests
// that finished both times with outputs of the same length.
func compare(rec, rep *record.Round) Compare {
	var c Compare
	c.Recorded, c.Replayed = totals(rec), totals(rep)
	for i := range min(len(rec.Sessions), len(rep.Sessions)) {
		a, b := rec.Sessions[i].Requests, rep.Sessions[i].Requests
		for j := range min(len(a), len(b)) {
			if a[j].Error != "" || a[j].Cut || b[j].Error != "" || b[j].Cut {
				continue
			}
			c.Finished++
			if a[j].OutputTokens() == b[j].OutputTokens() {
				c.SameOutput++
			}
		}
	}
	return c
}

func totals(r *record.Round) Totals {
	var t Totals
	for _, s := range r.Sessions {
		for _, q := range s.Requests {
			t.Requests++
			t.PromptTokens += q.PromptTokens
			t.OutputTokens += q.OutputTokens()
			t.CachedTokens += q.CachedTokens
			if q.Error != "" {
				t.Errors++
			}
			if q.Cut {
				t.Cut++
			}
		}
	}
	return t
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// sleepUntil waits until t; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}
