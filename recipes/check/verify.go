// Package check scores tasks in real sandboxes. Verify scores a finished
// session: the task's hidden tests are copied in over whatever the agent
// left, and its check runs in a fresh shell. Recipe proves every task of a
// recipe with Harbor's two sanity agents: the oracle (the task's solution)
// must pass, the nop (the untouched seed files) must fail. It needs no
// engine.
package check

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"jspark/recipes"
	"jspark/sandbox"
)

// Result is a scored session. Passed holds when the check (if the task has
// one) exited 0 with the hidden tests in place and the final reply (if the
// task expects text) holds the expected text.
type Result struct {
	Passed bool `json:"passed"`
	// ExitCode is the check's exit status (124 after its timeout; -1 when
	// the hidden tests could not be copied in, which Output explains); nil
	// when the task has no check.
	ExitCode *int          `json:"exit_code,omitempty"`
	TimedOut bool          `json:"timed_out,omitempty"`
	Output   string        `json:"output,omitempty"` // the check's output, head and tail within the limit
	Duration time.Duration `json:"duration_ns,omitempty"`
	// ExpectMet says whether the reply holds the task's expected text; nil
	// when the task expects none.
	ExpectMet *bool `json:"expect_met,omitempty"`
}

// Scored reports whether the task had anything to score the session by.
func (r Result) Scored() bool { return r.ExitCode != nil || r.ExpectMet != nil }

// copyFailed is Result.ExitCode when the hidden tests could not be copied.
const copyFailed = -1

// Verify scores the session that box holds, after its cut: it ends the
// session's shell and every process it left (so nothing rewrites files after
// the copy, and the check runs through none of its functions or variables),
// removes whatever stands at the hidden tests' paths and writes them there,
// then runs the check from the workspace in a fresh shell, bounded by the
// task's check timeout and keeping at most outputLimit bytes of output. A
// hidden test that cannot be written (the agent put a symlink or a file
// where its folder goes, or filled the workspace) fails the session.
//
// The error is the infrastructure's (ctx ended, the sandbox is closed, its
// shell could not start), never the task's: a runner records it as such and
// does not score the session. ctx bounds the check itself: it must not be
// the session's cut, which has passed.
func Verify(ctx context.Context, box *sandbox.Sandbox, t *recipes.Task, reply string, outputLimit int) (Result, error) {
	var res Result
	if t.Expect != "" {
		met := strings.Contains(reply, t.Expect)
		res.ExpectMet = &met
	}
	res.Passed = res.ExpectMet == nil || *res.ExpectMet
	if t.Check == "" {
		return res, nil
	}
	if t.CheckTimeout <= 0 {
		return res, fmt.Errorf("task %s: no check timeout (a task from recipes.Parse has one)", t.ID)
	}
	box.Restart()
	if why, err := copyTests(ctx, box, t); err != nil {
		return res, err
	} else if why != "" {
		code := copyFailed
		res.Passed, res.ExitCode, res.Output = false, &code, why
		return res, nil
	}
	start := time.Now()
	run, err := box.Exec(ctx, t.Check, t.CheckTimeout.D(), outputLimit)
	res.Duration = time.Since(start)
	if err != nil {
		return res, fmt.Errorf("task %s: check: %w", t.ID, err)
	}
	res.ExitCode, res.TimedOut, res.Output = &run.ExitCode, run.TimedOut, run.Output
	res.Passed = res.Passed && run.ExitCode == 0
	return res, nil
}

// copyTests puts the hidden tests in place; why says what the agent's
// workspace refused (the session fails), err what the sandbox could not do.
func copyTests(ctx context.Context, box *sandbox.Sandbox, t *recipes.Task) (why string, err error) {
	files := t.HiddenTests()
	if len(files) == 0 {
		return "", nil
	}
	// A directory, symlink or FIFO at a test's path is removed (never
	// followed) rather than written through or refused.
	quoted := make([]string, len(files))
	for i, f := range files {
		quoted[i] = shellQuote(f.Path)
	}
	run, err := box.Exec(ctx, "rm -rf -- "+strings.Join(quoted, " "), t.CheckTimeout.D(), 2000)
	if err != nil {
		return "", fmt.Errorf("task %s: clear the hidden tests' paths: %w", t.ID, err)
	}
	if run.ExitCode != 0 {
		return fmt.Sprintf("hidden tests: could not clear their paths (exit %d): %s", run.ExitCode, run.Output), nil
	}
	for _, f := range files {
		if err := box.WriteFile(f.Path, []byte(f.Content)); err != nil {
			if errors.Is(err, context.Canceled) || ctx.Err() != nil {
				return "", ctx.Err()
			}
			return fmt.Sprintf("hidden test %s: could not be written: %v", f.Path, err), nil
		}
	}
	return "", nil
}

// shellQuote quotes s for bash as one word.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
