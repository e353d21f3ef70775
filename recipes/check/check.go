package check

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"jspark/recipes"
	"jspark/sandbox"
)

// Options configure Recipe.
type Options struct {
	// Out is the folder the sandboxes' workspaces go to, as
	// Out/TASK/oracle/workspace and Out/TASK/nop/workspace; the caller
	// claims it (sandbox.ClaimOut or NewOut).
	Out         string
	Sandbox     sandbox.Options
	OutputLimit int // bytes of each check's output kept
	Jobs        int // tasks checked at once, at least 1
}

// Agent is one of the sanity agents: what it does to a fresh workspace
// seeded with the task's files, and the final reply it gives.
type Agent struct {
	Name string
	// Act works the task in box (nil: it does nothing); an error is the
	// agent's failure, which Report names.
	Act func(ctx context.Context, box *sandbox.Sandbox, r *recipes.Recipe, t *recipes.Task, outputLimit int) error
	// Reply is its final reply.
	Reply func(t *recipes.Task) string
}

var (
	// Oracle solves the task with its solution (files, then script) and
	// replies with the expected text: it must pass.
	Oracle = Agent{Name: "oracle", Act: Solve, Reply: func(t *recipes.Task) string { return t.Expect }}
	// Nop leaves the seed files as they are and replies nothing: it must
	// fail.
	Nop = Agent{Name: "nop", Reply: func(*recipes.Task) string { return "" }}
)

// ErrNoSolution is the oracle's error for a task without a solution.
var ErrNoSolution = errors.New("the task has no solution for the oracle to run")

// Solve writes the task's solution files over the workspace, then runs its
// script from the workspace, bounded by the recipe's window (the time a
// session has). A script that exits nonzero is an error naming
// its status and output.
func Solve(ctx context.Context, box *sandbox.Sandbox, r *recipes.Recipe, t *recipes.Task, outputLimit int) error {
	if t.Solution == nil {
		if t.Check == "" {
			return nil // a task scored by its reply alone: the reply is the solution
		}
		return ErrNoSolution
	}
	for _, f := range t.SolutionFiles() {
		if err := box.WriteFile(f.Path, []byte(f.Content)); err != nil {
			return fmt.Errorf("solution file %s: %w", f.Path, err)
		}
	}
	if t.Solution.Script == "" {
		return nil
	}
	run, err := box.Exec(ctx, t.Solution.Script, r.Window.D(), outputLimit)
	if err != nil {
		return fmt.Errorf("solution script: %w", err)
	}
	if run.TimedOut {
		return fmt.Errorf("solution script timed out after %s (the window): %s", r.Window.D(), run.Output)
	}
	if run.ExitCode != 0 {
		return fmt.Errorf("solution script exited %d: %s", run.ExitCode, run.Output)
	}
	return nil
}

// Trial is one sanity agent's run of a task.
type Trial struct {
	Agent  string `json:"agent"`
	Result Result `json:"result"`
	// ActError is what the agent could not do (the oracle's solution
	// failed); the result then scores the workspace as it was left.
	ActError string `json:"act_error,omitempty"`
}

// Run runs agent on task t in a fresh sandbox at dir/workspace: seed files,
// the agent's work, then Verify.
func Run(ctx context.Context, dir string, r *recipes.Recipe, t *recipes.Task, a Agent, o Options) (Trial, error) {
	tr := Trial{Agent: a.Name}
	box, err := sandbox.New(filepath.Join(dir, "workspace"), t.Files, o.Sandbox)
	if err != nil {
		return tr, fmt.Errorf("task %s, %s: %w", t.ID, a.Name, err)
	}
	defer box.Close()
	if a.Act != nil {
		if err := a.Act(ctx, box, r, t, o.OutputLimit); err != nil {
			if ctx.Err() != nil {
				return tr, ctx.Err()
			}
			tr.ActError = err.Error()
		}
	}
	tr.Result, err = Verify(ctx, box, t, a.Reply(t), o.OutputLimit)
	if err != nil {
		return tr, fmt.Errorf("task %s, %s: %w", t.ID, a.Name, err)
	}
	return tr, box.Close()
}

// Report is what Recipe found of one task.
type Report struct {
	Task string `json:"task"`
	// NotRunnable is why the task was not run (it cannot run here).
	NotRunnable string `json:"not_runnable,omitempty"`
	Oracle      *Trial `json:"oracle,omitempty"`
	Nop         *Trial `json:"nop,omitempty"`
	// Problem says why the task does not discriminate; empty when the
	// oracle passes and the nop fails (or the task was not run).
	Problem string `json:"problem,omitempty"`
}

// Recipe runs the oracle and the nop on every runnable task of r, Jobs tasks
// at once, and reports each task in the recipe's order. The error is the
// infrastructure's (a sandbox that could not start); a task that does not
// discriminate is a Report's Problem.
func Recipe(ctx context.Context, r *recipes.Recipe, o Options) ([]Report, error) {
	if o.Jobs < 1 {
		return nil, fmt.Errorf("check: Jobs is %d, want at least 1", o.Jobs)
	}
	reports := make([]Report, len(r.Tasks))
	errs := make([]error, len(r.Tasks))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(o.Jobs, len(r.Tasks)) {
		wg.Go(func() {
			for i := range jobs {
				reports[i], errs[i] = Task(ctx, r, &r.Tasks[i], o)
			}
		})
	}
	for i := range r.Tasks {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return reports, errors.Join(errs...)
}

// Task runs the oracle and the nop on one task, in Out/TASK/oracle and
// Out/TASK/nop.
func Task(ctx context.Context, r *recipes.Recipe, t *recipes.Task, o Options) (Report, error) {
	rep := Report{Task: t.ID}
	if ok, why := t.Runnable(); !ok {
		rep.NotRunnable = why
		return rep, nil
	}
	oracle, err := Run(ctx, filepath.Join(o.Out, t.ID, "oracle"), r, t, Oracle, o)
	if err != nil {
		return rep, err
	}
	nop, err := Run(ctx, filepath.Join(o.Out, t.ID, "nop"), r, t, Nop, o)
	if err != nil {
		return rep, err
	}
	rep.Oracle, rep.Nop = &oracle, &nop
	rep.Problem = problem(t, oracle, nop)
	return rep, nil
}

// problem says why a task's trials show that it does not discriminate.
func problem(t *recipes.Task, oracle, nop Trial) string {
	switch {
	case !oracle.Result.Scored():
		return "nothing scores it: give it a check or an expected reply"
	case oracle.ActError != "":
		return "the oracle could not solve it: " + oracle.ActError
	case !oracle.Result.Passed:
		return "the oracle fails it: " + verdict(oracle.Result)
	case nop.Result.Passed:
		return "the untouched workspace passes it: the check does not tell work from none"
	}
	return ""
}

// verdict says in a few words how a result failed.
func verdict(r Result) string {
	switch {
	case r.ExitCode != nil && r.TimedOut:
		return fmt.Sprintf("the check timed out after %s", r.Duration.Round(1e6))
	case r.ExitCode != nil && *r.ExitCode == copyFailed:
		return r.Output
	case r.ExitCode != nil && *r.ExitCode != 0:
		return fmt.Sprintf("the check exited %d", *r.ExitCode)
	case r.ExpectMet != nil && !*r.ExpectMet:
		return "the reply lacks the expected text"
	}
	return "passed"
}
