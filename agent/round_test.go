package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"jspark/agent/metrics"
	"jspark/agent/record"
	"jspark/agent/target"
	"jspark/recipes"
	"jspark/sandbox"
)

// The three steps of a round, each alone: open makes the sessions, sample
// runs them until the cut reading the counters, collect fills the records.

const roundYAML = `name: t
system: be brief
tools: [bash]
sampling: {max_tokens: 32}
nudge: {message: "use a tool", max: 1}
shell: {timeout: 5s, output_limit: 500}
tasks:
  - {id: a, kind: code, prompt: make a, files: {a.txt: "seed a\n"}, check: "test -f done", expect: "all done"}
  - {id: b, kind: code, prompt: make b, files: {b.txt: "seed b\n"}}
rounds:
  - {name: three, concurrency: 3, tasks: [a, b]}
`

func roundRecipe(t *testing.T) *recipes.Recipe {
	t.Helper()
	r, err := recipes.Parse("t.yaml", []byte(roundYAML))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// openRound makes one sandbox, trajectory and record per planned session,
// the tasks dealt in turn and the sessions spread over the backends.
func TestOpenRoundMakesEachSession(t *testing.T) {
	r := roundRecipe(t)
	out := t.TempDir()
	backends := []target.Backend{{URL: "http://one/v1", Model: "m"}, {URL: "http://two/v1", Model: "m"}}
	rd, err := openRound(RoundOptions{Recipe: r, Round: r.Round("three"), Backends: backends, Window: time.Minute, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.close()
	type session struct{ Name, Task, Backend string }
	var got []session
	for _, s := range rd.res.Sessions {
		got = append(got, session{s.Name, s.Task, s.Backend})
	}
	want := []session{{"s0-a", "a", "http://one/v1"}, {"s1-b", "b", "http://two/v1"}, {"s2-a", "a", "http://one/v1"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("sessions (-want +got):\n%s", d)
	}
	if rd.res.Name != "three" || rd.res.Concurrency != 3 || rd.res.Window != 60 || rd.res.Isolation == nil || rd.meter.Kind() != metrics.ByStream {
		t.Errorf("round record %+v, counted by %s", rd.res, rd.meter.Kind())
	}
	for i, w := range rd.workers {
		s, ok := w.(*Session)
		if !ok || s.Task != r.Plan(r.Round("three"))[i] || rd.boxes[i] == nil || rd.logs[i] == nil {
			t.Errorf("session %d: worker %T, box %v, log %v", i, w, rd.boxes[i], rd.logs[i])
		}
		if _, err := os.Stat(filepath.Join(out, want[i].Name, "trajectory.jsonl")); err != nil {
			t.Error(err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(rd.boxes[1].Root(), "b.txt")); err != nil || string(b) != "seed b\n" {
		t.Errorf("s1-b's workspace: %q %v", b, err)
	}
}

// fakeWorker answers with its script: each request reported as it ends,
// then it ends on its own, or at the cut when hold is set.
type fakeWorker struct {
	reqs    []record.Request
	end     record.End
	hold    bool
	payload []byte
	final   string
	onStep  func(*record.Request)
	ran     atomic.Bool
}

func (f *fakeWorker) Begin(_ context.Context, _ time.Time, onStep func(*record.Request)) {
	f.onStep = onStep
}

func (f *fakeWorker) Run(ctx context.Context) ([]record.Request, record.End) {
	f.ran.Store(true)
	for i := range f.reqs {
		f.onStep(&f.reqs[i])
	}
	if f.hold {
		<-ctx.Done()
		return f.reqs, record.EndCut
	}
	return f.reqs, f.end
}

func (f *fakeWorker) Finish(*record.Session) ([]byte, string, error) { return f.payload, f.final, nil }

// sampleRound is a round of the given workers, metered by src (nil: streams).
func sampleRound(window time.Duration, src metrics.Source, ws ...worker) *round {
	r := &round{o: RoundOptions{Window: window}, res: &record.Round{}, workers: ws, meter: metrics.NewMeter([]metrics.Source{src})}
	for range ws {
		r.res.Sessions = append(r.res.Sessions, record.Session{Name: "s"})
	}
	return r
}

// sample ends as soon as every session has, reading the counters at the
// start and at that end; a stream meter's closing count is the tokens the
// sessions reported, its samples none.
func TestSampleEndsWithTheSessions(t *testing.T) {
	a := &fakeWorker{reqs: []record.Request{{CompletionTokens: 5}, {StreamedTokens: 3}}, end: record.EndNoToolCall}
	b := &fakeWorker{reqs: []record.Request{{CompletionTokens: 7, StreamedTokens: 9}}, end: record.EndContextFull}
	r := sampleRound(time.Hour, nil, a, b)
	r.sample(context.Background())
	if d := cmp.Diff([]record.End{record.EndNoToolCall, record.EndContextFull}, r.ends); d != "" {
		t.Errorf("ends (-want +got):\n%s", d)
	}
	if len(r.requests[0]) != 2 || len(r.requests[1]) != 1 || !a.ran.Load() || !b.ran.Load() {
		t.Errorf("requests %v", r.requests)
	}
	if n := len(r.res.Samples); n < 2 || r.res.Samples[0].T != 0 || r.res.Samples[n-1].Generation != 0 {
		t.Errorf("samples %+v", r.res.Samples)
	}
	if r.first.Generation != 0 || r.last.Generation != 5+3+9 || r.res.Started.IsZero() {
		t.Errorf("first %+v, closing count %+v", r.first, r.last)
	}
}

// A session that works until the cut is cut at the window, and an engine
// meter's closing count is its reading at the cut.
func TestSampleCutsAtTheWindow(t *testing.T) {
	var reads atomic.Int64
	engine := metrics.Engine(func() metrics.Counters { return metrics.Counters{Generation: float64(10 * reads.Add(1))} })
	w := &fakeWorker{reqs: []record.Request{{CompletionTokens: 4}}, hold: true}
	r := sampleRound(1500*time.Millisecond, engine, w)
	r.sample(context.Background())
	samples := r.res.Samples
	if r.ends[0] != record.EndCut || len(samples) < 2 || samples[0].T != 0 {
		t.Fatalf("end %s, samples %+v", r.ends[0], samples)
	}
	if last := samples[len(samples)-1]; r.last != last || r.first.Generation != 10 || last.Generation != float64(10*len(samples)) {
		t.Errorf("first %+v, closing %+v, samples %+v", r.first, r.last, samples)
	}
}

// collect fills each session's record from its run: requests and end,
// the first request's hash beside its file, the counts, the task's check
// run in the sandbox and its expected text; then the round's summary.
func TestCollectFillsTheRecords(t *testing.T) {
	out := t.TempDir()
	r := roundRecipe(t)
	plan := r.Plan(r.Round("three"))[:2]
	var boxes []*sandbox.Sandbox
	for i, task := range plan {
		box, err := sandbox.New(filepath.Join(out, []string{"s0", "s1"}[i], "workspace"), task.Files, sandbox.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer box.Close()
		boxes = append(boxes, box)
	}
	two := 2
	a := &fakeWorker{payload: []byte(`{"first":true}`), final: "it is all done"}
	b := &fakeWorker{final: "not yet"}
	rd := &round{o: RoundOptions{Recipe: r, Out: out}, plan: plan, boxes: boxes, workers: []worker{a, b}, meter: metrics.NewMeter(nil),
		res: &record.Round{Window: 10, Sessions: []record.Session{{Name: "s0"}, {Name: "s1"}}},
		requests: [][]record.Request{
			{{TTFT: 1, Calls: []record.Call{{Name: "bash", ExitCode: &two}, {Name: "read"}}}, {TTFT: 3, Error: "HTTP 500: no"}},
			{{TTFT: -1, Cut: true}},
		},
		ends:  []record.End{record.EndNoToolCall, record.EndCut},
		walls: []float64{4, 10},
		first: record.Sample{Counters: metrics.Counters{Generation: 100}},
		last:  record.Sample{T: 10, Counters: metrics.Counters{Generation: 150}},
	}
	if err := rd.collect(context.Background()); err != nil {
		t.Fatal(err)
	}
	s0, s1 := rd.res.Sessions[0], rd.res.Sessions[1]
	sum := sha256.Sum256(a.payload)
	if s0.End != record.EndNoToolCall || len(s0.Requests) != 2 || s0.InitialPayload != hex.EncodeToString(sum[:]) {
		t.Errorf("s0 record %+v", s0)
	}
	if b, err := os.ReadFile(filepath.Join(out, "s0", "initial_request.json")); err != nil || string(b) != string(a.payload) {
		t.Errorf("s0 initial_request.json %q %v", b, err)
	}
	if s0.ToolCalls != 2 || s0.NonzeroExits != 1 || s0.APIErrors != 1 || s0.FirstOutputPending || !s1.FirstOutputPending {
		t.Errorf("counts: s0 %+v, s1 pending %v", s0, s1.FirstOutputPending)
	}
	// Task a's check (test -f done) fails in its workspace; its expected
	// text is in the final reply. Task b has neither.
	if s0.CheckExit == nil || *s0.CheckExit == 0 || s0.ExpectMet == nil || !*s0.ExpectMet || s1.CheckExit != nil || s1.ExpectMet != nil {
		t.Errorf("checks: s0 %v %v, s1 %v %v", s0.CheckExit, s0.ExpectMet, s1.CheckExit, s1.ExpectMet)
	}
	if s := rd.res.Summary; s.OutputTokens != 50 || s.BackendTokS != 5 || s.PendingAtCut != 1 || s.Checks != 1 || s.ChecksPassed != 0 || s.CountedBy != metrics.ByStream {
		t.Errorf("summary %+v", s)
	}
	if string(rd.payloads[0]) != string(a.payload) || rd.payloads[1] != nil {
		t.Errorf("payloads %q", rd.payloads)
	}
}
