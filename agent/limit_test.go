package agent

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"jspark/agent/external"
	"jspark/agent/record"
	"jspark/recipes"
)

// An external agent runs its own loop: the round stops it at the recipe's
// limits, counting the requests it sees end (a session held until the cut
// ends at its limit instead, long before the window); one under its limits
// ends as it says; jspark's own loop is left to check them itself.
func TestRoundStopsAnExternalAgentAtItsLimits(t *testing.T) {
	reqs := func() []record.Request {
		return []record.Request{{CompletionTokens: 10}, {CompletionTokens: 10}, {CompletionTokens: 10}}
	}
	for _, c := range []struct {
		name   string
		limits recipes.Limits
		agent  bool
		hold   bool
		want   record.End
	}{
		{"turns", recipes.Limits{Turns: 2}, true, true, record.EndTurns},
		{"output tokens", recipes.Limits{OutputTokens: 25}, true, true, record.EndOutputTokens},
		{"under its limits", recipes.Limits{Turns: 5, OutputTokens: 100}, true, false, record.EndAgentDone},
		{"tool seconds alone", recipes.Limits{ToolSeconds: 1}, true, false, record.EndAgentDone},
		{"own loop", recipes.Limits{Turns: 2}, false, false, record.EndNoToolCall},
	} {
		t.Run(c.name, func(t *testing.T) {
			end := record.EndAgentDone
			if !c.agent {
				end = record.EndNoToolCall
			}
			w := &fakeWorker{reqs: reqs(), hold: c.hold, end: end}
			// A limit missed is a cut at this window, not a hang.
			r := sampleRound(20*time.Second, nil, w)
			r.o.Recipe = &recipes.Recipe{Limits: c.limits}
			if c.agent {
				r.o.Agent = &external.Installation{}
			}
			r.sample(context.Background())
			if d := cmp.Diff([]record.End{c.want}, r.ends); d != "" {
				t.Errorf("ends (-want +got):\n%s", d)
			}
		})
	}
}
