package agent

import (
	"context"

	"jspark/agent/record"
	"jspark/recipes/check"
)

// score gives session i its verdict once it has stopped (cut, done, or at a
// limit): check.Verify ends what the session left running, copies the
// task's hidden tests into its workspace over whatever the agent wrote at
// their paths, runs the task's check there in a fresh shell and looks for
// the expected text in the final reply. A session that failed for the
// infrastructure is not scored; a check that could not run is such a
// failure. ctx is the run's, not the window's, which has passed.
func (r *round) score(ctx context.Context, i int, final string) {
	sr := &r.res.Sessions[i]
	task := r.plan[i]
	if sr.Infra != "" || task.Check == "" && task.Expect == "" {
		return
	}
	v, err := check.Verify(ctx, r.boxes[i], task, final, r.o.Recipe.Shell.OutputLimit)
	if err != nil {
		sr.Infra = "check: " + err.Error()
		return
	}
	sr.Passed = &v.Passed
	sr.ExpectMet = v.ExpectMet
	if v.ExitCode != nil {
		sr.CheckExit = v.ExitCode
		sr.Check = &record.Check{Passed: *v.ExitCode == 0 && !v.TimedOut, ExitCode: v.ExitCode, TimedOut: v.TimedOut,
			Output: record.Clip(v.Output), Seconds: v.Duration.Seconds(), HiddenTests: len(task.HiddenTests())}
	}
}
