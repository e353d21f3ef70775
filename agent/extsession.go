package agent

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

	"jspark/recipes"
	"jspark/sandbox"
)

// agentOutputLimit bounds what of an external agent's terminal output is kept
// (head and tail): in print mode that is its final answer.
const agentOutputLimit = 64 << 10

// externalSession is an external coding agent (Pi, Codex, opencode) working
// one task: run once in print mode in the session's sandbox, its provider
// pointed at the engine through a door of the sandbox (the only way out of
// its network namespace), its requests recorded by the server.
type externalSession struct {
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

// opener is the sandbox's door to the host (sandbox.Sandbox.Listen).
type opener interface {
	Listen(port int) (net.Listener, error)
}

func newExternalSession(key, name, dir string, task *recipes.Task, in *Installation, box *sandbox.Sandbox, log io.Writer, b Backend, maxTokens int) (*externalSession, error) {
	if b.Handler == nil {
		return nil, errNoEngine
	}
	door, ok := any(box).(opener)
	if !ok {
		return nil, errors.New("this build's sandbox has no door to the host for an external agent's requests")
	}
	ln, err := door.Listen(0)
	if err != nil {
		return nil, fmt.Errorf("open the sandbox's door to the engine: %w", err)
	}
	x := &externalSession{name: name, dir: dir, in: in, box: box,
		run: agentRun{BaseURL: "http://" + ln.Addr().String() + "/v1", Model: b.Model, MaxTokens: maxTokens, Context: b.Context, Prompt: task.Prompt}}
	x.rec = newRecorder(b.Handler, name, time.Now(), func() bool { return false }, log)
	x.rec.key = key
	x.srv = &http.Server{Handler: x.rec, ReadHeaderTimeout: 30 * time.Second}
	go x.srv.Serve(ln)
	return x, nil
}

func (x *externalSession) begin(ctx context.Context, start time.Time, onStep func(*Request)) {
	x.rec.mu.Lock()
	x.rec.start, x.rec.onStep = start, onStep
	x.rec.cut = func() bool { return ctx.Err() != nil }
	x.rec.mu.Unlock()
}

// Run starts the agent and waits for it to exit or the cut, which kills it
// with every other process of the sandbox.
func (x *externalSession) Run(ctx context.Context) ([]Request, End) {
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
		return reqs, EndCut
	case err != nil:
		x.err = err
		return reqs, EndAgentFailed
	}
	x.exit = &res.ExitCode
	if res.ExitCode != 0 {
		return reqs, EndAgentFailed
	}
	return reqs, EndAgentDone
}

func (x *externalSession) finish(sr *SessionResult) error {
	sr.Agent = x.in.Agent.Kind + " " + x.in.Agent.Version
	sr.AgentExit = x.exit
	if x.exit != nil {
		sr.AgentSeconds = &x.seconds
	}
	if x.err != nil {
		sr.AgentError = x.err.Error()
	}
	sr.AgentOutput = clip(strings.TrimSpace(x.output))
	sr.payload, sr.final = x.rec.first, x.output
	var errs []error
	if err := os.WriteFile(filepath.Join(x.dir, "agent_output.txt"), []byte(x.output), 0o644); err != nil {
		errs = append(errs, err)
	}
	x.rec.mu.Lock()
	errs = append(errs, x.rec.logErr)
	x.rec.mu.Unlock()
	return errors.Join(errs...)
}
