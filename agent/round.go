package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"jspark/agent/external"
	"jspark/agent/metrics"
	"jspark/agent/record"
	"jspark/agent/target"
	"jspark/recipes"
	"jspark/sandbox"
	"jspark/tools"
)

// RoundOptions say what to run and where.
type RoundOptions struct {
	Recipe   *recipes.Recipe
	Round    *recipes.Round
	Backends []target.Backend // sessions are spread over them; each stays on one
	Window   time.Duration
	Out      string // the round's folder
	Sandbox  sandbox.Options
	Progress Progress               // nil: none
	Agent    *external.Installation // the round's external agent; nil: jspark's own loop
	Trial    int                    // which trial this is (0: the first)
	Seed     *int                   // the sampling seed its requests carry (nil: the recipe's)
}

// Progress is told about every step and every second.
type Progress interface {
	Step(session int, name string, r *record.Request)
	Tick(elapsed, window time.Duration)
}

// worker is one session of a round: jspark's own loop (Session) or an
// external agent (external.Session).
type worker interface {
	// Begin sets the round's clock, the window whose end is the cut, and
	// who hears of each request as it ends.
	Begin(window context.Context, start time.Time, onStep func(*record.Request))
	// Run works until the cut or its own end; every request is in the
	// list, the unfinished one too.
	Run(ctx context.Context) ([]record.Request, record.End)
	// Finish fills in what only the worker knows and returns the first
	// request's body and the final reply's text; the error is a record it
	// could not write.
	Finish(sr *record.Session) (payload []byte, final string, err error)
}

// round is a round as it runs: opened (sandboxes, trajectories, workers),
// sampled until the cut, then collected into its record.
type round struct {
	o       RoundOptions
	plan    []*recipes.Task
	res     *record.Round
	workers []worker
	boxes   []*sandbox.Sandbox
	logs    []*os.File
	meter   *metrics.Meter

	// What sample leaves: each worker's requests and end, the counters at
	// the start and the closing count.
	requests    [][]record.Request
	ends        []record.End
	walls       []float64 // seconds from the start to each worker's end
	first, last record.Sample
	// What collect leaves beside the record: the initial requests' bodies,
	// which the record keeps as hashes.
	payloads [][]byte
}

// RunRound starts every session of the round at once, cuts them at the
// window, samples the backends every second and summarises.
func RunRound(ctx context.Context, o RoundOptions) (*record.Round, error) {
	r, err := runRound(ctx, o)
	if r == nil {
		return nil, err
	}
	return r.res, err
}

// runRound is open → sample until the cut → collect. A round whose
// sessions could not all be opened (a sandbox that would not start) does
// not run: its record says why, every session unscored.
func runRound(ctx context.Context, o RoundOptions) (*round, error) {
	r, err := openRound(o)
	var infra *infraError
	if errors.As(err, &infra) {
		return unopened(o, err), nil
	}
	if err != nil {
		return nil, err
	}
	defer r.close()
	r.sample(ctx)
	// A record that could not be written is a failed run, not a quiet gap.
	return r, r.collect(ctx)
}

// openRound makes each session's sandbox, trajectory file and worker.
func openRound(o RoundOptions) (_ *round, err error) {
	ts, err := tools.Select(o.Recipe.Tools)
	if err != nil {
		return nil, err
	}
	o, plan := o.seeded(), o.Recipe.Plan(o.Round)
	r := &round{o: o, plan: plan, workers: make([]worker, len(plan)), boxes: make([]*sandbox.Sandbox, len(plan)), logs: make([]*os.File, len(plan)),
		res: o.record(len(plan)), meter: metrics.NewMeter(counters(o.Backends))}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	sopt := sandboxOptions(o)
	for i, task := range plan {
		if err := r.openSession(i, task, sopt, ts); err != nil {
			return nil, &infraError{fmt.Errorf("session %s: %w", sessionName(i, task), err)}
		}
	}
	return r, nil
}

// infraError is a failure of the infrastructure, not of an agent: a
// sandbox, trajectory or agent that could not be set up.
type infraError struct{ err error }

func (e *infraError) Error() string { return e.err.Error() }
func (e *infraError) Unwrap() error { return e.err }

// unopened is the record of a round that could not open: every planned
// session ended before it began, for err.
func unopened(o RoundOptions, err error) *round {
	o, plan := o.seeded(), o.Recipe.Plan(o.Round)
	res := o.record(len(plan))
	res.Started, res.Samples = time.Now(), []record.Sample{{}}
	for i, task := range plan {
		res.Sessions = append(res.Sessions, record.Session{Name: sessionName(i, task), Task: task.ID, Backend: o.Backends[i%len(o.Backends)].URL,
			End: record.EndInfra, Infra: "the round could not start: " + err.Error(), FirstOutputPending: true})
	}
	res.Summary = record.Summarize(res, res.Samples[0], res.Samples[0], metrics.NewMeter(counters(o.Backends)).Kind())
	return &round{o: o, plan: plan, res: res, payloads: make([][]byte, len(plan))}
}

// seeded is o with its seed resolved: the recipe's unless o names one.
func (o RoundOptions) seeded() RoundOptions {
	if o.Seed == nil {
		o.Seed = o.Recipe.Sampling.Seed
	}
	return o
}

// record is the round's record before any session is in it.
func (o RoundOptions) record(sessions int) *record.Round {
	return &record.Round{Name: o.Round.Name, RepeatOf: o.Round.RepeatOf, Trial: max(o.Trial, 1), Seed: o.Seed,
		Concurrency: sessions, Window: o.Window.Seconds()}
}

func sessionName(i int, task *recipes.Task) string { return fmt.Sprintf("s%d-%s", i, task.ID) }

// sandboxOptions are the round's sandbox options; an external agent's
// sandbox also shows its installation and Node.
func sandboxOptions(o RoundOptions) sandbox.Options {
	sopt := o.Sandbox
	if o.Agent == nil {
		return sopt
	}
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
	return sopt
}

// openSession makes session i: its sandbox, trajectory, record and worker.
func (r *round) openSession(i int, task *recipes.Task, sopt sandbox.Options, ts []*tools.Tool) error {
	o := r.o
	name := sessionName(i, task)
	dir := filepath.Join(o.Out, name)
	box, err := sandbox.New(filepath.Join(dir, "workspace"), task.Files, sopt)
	if err != nil {
		return err
	}
	r.boxes[i] = box
	if r.res.Isolation == nil {
		iso := box.Isolation()
		r.res.Isolation = &iso
	}
	if r.logs[i], err = os.Create(filepath.Join(dir, "trajectory.jsonl")); err != nil {
		return err
	}
	b := o.Backends[i%len(o.Backends)]
	r.res.Sessions = append(r.res.Sessions, record.Session{Name: name, Task: task.ID, Backend: b.URL, Isolated: box.Isolated()})
	key := o.Round.Name + "/" + name // X-Session-Id: the server retains an active session's cache
	if o.Agent != nil {
		r.workers[i], err = o.Agent.NewSession(external.SessionOptions{Key: key, Name: name, Dir: dir, Task: task, Box: box, Log: r.logs[i],
			Handler: b.Handler, Model: b.Model, Context: b.Context, MaxTokens: o.Recipe.Sampling.MaxTokens})
		return err
	}
	client, capture := sessionClient(b, key)
	r.workers[i] = &Session{
		Name: name, Task: task, Recipe: o.Recipe, Client: client, Model: b.Model, Seed: o.Seed,
		Tools: ts, Env: &tools.Env{Box: box, Timeout: o.Recipe.Shell.Timeout.D(), OutputLimit: o.Recipe.Shell.OutputLimit},
		Log: r.logs[i], payload: capture,
	}
	return nil
}

// close ends every sandbox and trajectory the round opened; a second call
// does nothing.
func (r *round) close() {
	for _, box := range r.boxes {
		if box != nil {
			box.Close()
		}
	}
	for i, f := range r.logs {
		if f != nil {
			f.Close()
			r.logs[i] = nil
		}
	}
}

// counters are the backends' counter sources (nil where one has none).
func counters(bs []target.Backend) []metrics.Source {
	out := make([]metrics.Source, len(bs))
	for i, b := range bs {
		out[i] = b.Counter
	}
	return out
}

// sample starts every session at once and reads the counters at the start,
// every second, and at the cut (or once every session has ended before
// it); then it waits for the sessions to end and takes the closing count.
func (r *round) sample(ctx context.Context) {
	start := time.Now()
	r.res.Started = start
	r.first = record.Sample{Counters: r.meter.Read(ctx)}
	r.res.Samples = append(r.res.Samples, r.first)
	window, cancel := context.WithDeadline(ctx, start.Add(r.o.Window))
	defer cancel()
	done := r.start(window, start)
	reading := func() record.Sample {
		return record.Sample{T: time.Since(start).Seconds(), Counters: r.meter.Read(ctx)}
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for cut := false; !cut; {
		select {
		case <-tick.C:
			r.res.Samples = append(r.res.Samples, reading())
			if r.o.Progress != nil {
				r.o.Progress.Tick(time.Since(start), r.o.Window)
			}
		case <-window.Done():
			cut = true
		case <-done: // every session ended before the window: nothing more will come
			cut = true
		}
	}
	last := reading()
	r.res.Samples = append(r.res.Samples, last)
	<-done
	r.last = record.Sample{T: last.T, Counters: r.meter.Final(last.Counters)}
}

// start begins every worker at once; the channel closes when all have
// ended.
func (r *round) start(window context.Context, start time.Time) <-chan struct{} {
	r.requests = make([][]record.Request, len(r.workers))
	r.ends = make([]record.End, len(r.workers))
	r.walls = make([]float64, len(r.workers))
	var wg sync.WaitGroup
	var limits recipes.Limits
	if r.o.Recipe != nil {
		limits = r.o.Recipe.Limits
	}
	for i, w := range r.workers {
		name := r.res.Sessions[i].Name
		lim, ctx := newLimiter(window, r.o.Agent != nil, limits)
		w.Begin(ctx, start, func(q *record.Request) {
			r.meter.Streamed(q.OutputTokens())
			lim.step(q)
			if r.o.Progress != nil {
				r.o.Progress.Step(i, name, q)
			}
		})
		wg.Go(func() {
			reqs, end := w.Run(ctx)
			r.requests[i], r.ends[i] = reqs, lim.ended(window, end)
			r.walls[i] = time.Since(start).Seconds()
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}
