package external

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"jspark/agent/record"
	"jspark/recipes"
	"jspark/sandbox"
)

// agentOutputLimit bounds what of an external agent's terminal output is kept
// (head and tail): in print mode that is its final answer.
const agentOutputLimit = 64 << 10

// Session is an external coding agent (Pi, Codex, opencode) working one
// task: run once in print mode in the session's sandbox, its provider
// pointed at the engine through a door of the sandbox (the only way out of
// its network namespace), its requests recorded by the server.
type Session struct {
	name string
	dir  string // the session's folder on the host
	in   *Installation
	box  *sandbox.Sandbox
	rec  *recorder
	srv  *http.Server
	run  agentRun

	output  string  // what the agent printed (its answer)
	exit    *int    // its exit status; nil when cut
	seconds float64 // from the round's start to its exit
	err     error   // the sandbox could not run it
}

// SessionOptions say where a Session runs and what it records.
type SessionOptions struct {
	Key  string // the session key sent to the engine when the agent sends none (round/session)
	Name string
	Dir  string // the session's folder on the host
	Task *recipes.Task
	Box  *sandbox.Sandbox
	Log  io.Writer // the trajectory
	// The in-process engine: its HTTP handler, served model and context.
	Handler   http.Handler
	Model     string
	Context   int
	MaxTokens int // output tokens per request (the recipe's max_tokens)
}

// opener is the sandbox's door to the host (sandbox.Sandbox.Listen).
type opener interface {
	Listen(port int) (net.Listener, error)
}

// NewSession opens the sandbox's door to the engine for the agent's
// requests; the agent starts with Run.
func (in *Installation) NewSession(o SessionOptions) (*Session, error) {
	if o.Handler == nil {
		return nil, ErrNoEngine
	}
	door, ok := any(o.Box).(opener)
	if !ok {
		return nil, errors.New("this build's sandbox has no door to the host for an external agent's requests")
	}
	ln, err := door.Listen(0)
	if err != nil {
		return nil, fmt.Errorf("open the sandbox's door to the engine: %w", err)
	}
	x := &Session{name: o.Name, dir: o.Dir, in: in, box: o.Box,
		run: agentRun{BaseURL: "http://" + ln.Addr().String() + "/v1", Model: o.Model, MaxTokens: o.MaxTokens, Context: o.Context, Prompt: o.Task.Prompt}}
	x.rec = newRecorder(o.Handler, o.Name, time.Now(), func() bool { return false }, o.Log)
	x.rec.key = o.Key
	x.srv = &http.Server{Handler: x.rec, ReadHeaderTimeout: 30 * time.Second}
	go x.srv.Serve(ln)
	return x, nil
}

// Begin sets the round's clock and cut, and who hears of each request.
func (x *Session) Begin(window context.Context, start time.Time, onStep func(*record.Request)) {
	x.rec.mu.Lock()
	x.rec.start, x.rec.onStep = start, onStep
	x.rec.cut = func() bool { return window.Err() != nil }
	x.rec.mu.Unlock()
}

// Run starts the agent and waits for it to exit or the cut, which kills it
// with every other process of the sandbox.
func (x *Session) Run(ctx context.Context) ([]record.Request, record.End) {
	cmd, files := x.in.command(x.run)
	// The configuration as the agent got it, for the record.
	for n, c := range files {
		os.WriteFile(filepath.Join(x.dir, "agent-"+n), []byte(c), 0o644)
	}
	timeout := time.Hour
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d) + time.Minute // the cut comes first
	}
	res, err := x.box.Exec(ctx, cmd, timeout, agentOutputLimit)
	x.seconds = time.Since(x.rec.start).Seconds()
	x.output = res.Output
	// Requests still open end when their connections do.
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	x.srv.Shutdown(sctx)
	cancel()
	x.srv.Close()
	reqs := x.rec.requests()
	switch {
	case ctx.Err() != nil:
		return reqs, record.EndCut
	case err != nil:
		x.err = err
		return reqs, record.EndAgentFailed
	}
	x.exit = &res.ExitCode
	if res.ExitCode != 0 {
		return reqs, record.EndAgentFailed
	}
	return reqs, record.EndAgentDone
}

// Finish fills in the agent's part of the session's record and returns the
// first request's body and the agent's answer; the error is a record it
// could not write.
func (x *Session) Finish(sr *record.Session) (payload []byte, final string, err error) {
	sr.Agent = x.in.Agent.Kind + " " + x.in.Agent.Version
	sr.AgentExit = x.exit
	if x.exit != nil {
		sr.AgentSeconds = &x.seconds
	}
	if x.err != nil {
		sr.AgentError = x.err.Error()
		sr.Infra = "the agent could not run: " + sr.AgentError
	}
	sr.AgentOutput = record.Clip(strings.TrimSpace(x.output))
	var errs []error
	if err := os.WriteFile(filepath.Join(x.dir, "agent_output.txt"), []byte(x.output), 0o644); err != nil {
		errs = append(errs, err)
	}
	x.rec.mu.Lock()
	errs = append(errs, x.rec.logErr)
	first := x.rec.first
	x.rec.mu.Unlock()
	return first, x.output, errors.Join(errs...)
}
