package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	"jspark/agent/record"
	"jspark/recipes"
	"jspark/sandbox"
)

// score gives session i its verdict once it has stopped (cut, done, or at a
// limit): its task's check runs in its sandbox on what the agent left. A
// session that failed for the infrastructure is not scored; a check that
// could not run is such a failure.
func (r *round) score(ctx context.Context, i int, final string) {
	sr := &r.res.Sessions[i]
	if sr.Infra != "" {
		return
	}
	task := r.plan[i]
	if task.Check == "" && task.Expect == "" {
		return
	}
	v, err := verify(ctx, r.boxes[i], task, final, r.o.Recipe.Shell.OutputLimit, r.o.Recipe.Shell.Timeout.D())
	if err != nil {
		sr.Infra = "check: " + err.Error()
		return
	}
	sr.Passed = &v.Passed
	sr.ExpectMet = v.expectMet
	if v.check != nil {
		sr.Check = v.check
		sr.CheckExit = v.check.ExitCode
	}
}

// verdict is a session's score.
type verdict struct {
	Passed    bool
	check     *record.Check // nil: the task has no check
	expectMet *bool         // nil: the task expects no text
}

// verify runs task t's check in box, after the session, and looks for its
// expected text in the final reply; the error is the infrastructure's.
func verify(ctx context.Context, box *sandbox.Sandbox, t *recipes.Task, final string, outputLimit int, timeout time.Duration) (verdict, error) {
	var v verdict
	v.Passed = true
	if t.Expect != "" {
		met := strings.Contains(final, t.Expect)
		v.expectMet, v.Passed = &met, met
	}
	if t.Check == "" {
		return v, nil
	}
	start := time.Now()
	res, err := box.Exec(ctx, t.Check, timeout, outputLimit)
	if err != nil {
		return v, fmt.Errorf("task %s: %w", t.ID, err)
	}
	code := res.ExitCode
	v.check = &record.Check{Passed: code == 0, ExitCode: &code, TimedOut: res.TimedOut, Output: record.Clip(res.Output), Seconds: time.Since(start).Seconds()}
	v.Passed = v.Passed && code == 0
	return v, nil
}
