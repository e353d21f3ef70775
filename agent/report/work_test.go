package report

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"jspark/agent/metrics"
	"jspark/agent/record"
)

// The combined Work table prints what it is given, row per target and
// round, an unmeasured TTFT as "–", and reads back through ParseTable.
func TestWorkTable(t *testing.T) {
	ttft := 2.1194
	round := func(name string, s record.Summary) *record.Round {
		return &record.Round{Name: name, Summary: s}
	}
	res := &record.WorkTargets{Recipe: "work", Window: 180, Targets: []record.WorkTarget{
		{Name: "L4", Kind: "boot", Work: &record.Work{Rounds: []*record.Round{
			round("c3-first", record.Summary{BackendTokS: 80.7, InitialTTFT: &ttft, ToolCalls: 26, CountedBy: metrics.ByEngine, ChecksPassed: 2, Checks: 3}),
			round("c3-repeat", record.Summary{BackendTokS: 79.544, PendingAtCut: 3, WaitingMax: 2, CountedBy: metrics.ByEngine}),
		}}},
		{Name: "Tony", Kind: "endpoint", Work: &record.Work{Rounds: []*record.Round{
			round("c3-first", record.Summary{BackendTokS: 76.36, RunningMax: 3, Preemptions: 1, CountedBy: metrics.ByPrometheus, Checks: 3}),
		}}},
	}}
	tb := Targets(res)
	var b strings.Builder
	tb.Write(&b)
	got, ok := ParseTable(b.String(), "Work: 2 backends, c3-first, c3-repeat")
	if !ok {
		t.Fatalf("no table in\n%s", b.String())
	}
	want := [][]string{
		{"L4", "c3-first", "80.70", "2.119", "–", "26", "0", "0", "0", "0", "0", "0", "2/3"},
		{"L4", "c3-repeat", "79.54", "–", "–", "0", "0", "0", "3", "2", "0", "0", "–"},
		{"Tony", "c3-first", "76.36", "–", "–", "0", "0", "0", "0", "0", "3", "1", "0/3"},
	}
	if d := cmp.Diff(want, got.Rows); d != "" {
		t.Errorf("rows (-want +got):\n%s", d)
	}
	if !strings.Contains(got.Note, "180-second window") || !strings.Contains(got.Note, "L4 engine, Tony prometheus") {
		t.Errorf("note %q", got.Note)
	}
}

// The time line gives the mean working time where the backend reports its
// queueing, says how many requests' queueing it could not know, and says
// that working time is not knowable where the backend reports none.
func TestTimeLine(t *testing.T) {
	working := 150.0
	for _, c := range []struct {
		name string
		r    record.Round
		want string
	}{
		{"endpoint", record.Round{Summary: record.Summary{WallSec: 180}},
			"session time (mean): wall 180.0 s; working time not knowable from this backend (no usage.jspark timing: its TTFT mixes queueing and prefill)"},
		{"engine", record.Round{Summary: record.Summary{WallSec: 180, WorkingSec: &working}},
			"session time (mean): wall 180.0 s, working 150.0 s (wall less the engine's queueing, from usage.jspark)"},
		{"engine, cut requests", record.Round{Summary: record.Summary{WallSec: 180, WorkingSec: &working},
			Sessions: []record.Session{{Time: record.SessionTime{Unreported: 1}}, {Time: record.SessionTime{Unreported: 2}}}},
			"session time (mean): wall 180.0 s, working 150.0 s (wall less the engine's queueing, from usage.jspark); 3 requests cut before their usage came count as working: an upper bound"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := TimeLine(&c.r); got != c.want {
				t.Errorf("%s\nwant %s", got, c.want)
			}
		})
	}
}

// An external agent's line says how it ended: at its exit, at a limit of
// the recipe, or at the cut.
func TestAgentLineSaysHowItEnded(t *testing.T) {
	zero, secs := 0, 12.5
	r := &record.Round{Window: 180}
	for _, c := range []struct {
		s    record.Session
		want string
	}{
		{record.Session{Agent: "pi 0.73.1", AgentExit: &zero, AgentSeconds: &secs, End: record.EndAgentDone}, "pi 0.73.1 exited 0 after 12.500 s: "},
		{record.Session{Agent: "pi 0.73.1", End: record.EndTurns}, "pi 0.73.1 stopped at the recipe's limit (limit_turns): "},
		{record.Session{Agent: "pi 0.73.1", End: record.EndCut}, "pi 0.73.1 cut at 180 s: "},
	} {
		if got := AgentLine(r, &c.s); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: %q, want it to begin %q", c.s.End, got, c.want)
		}
	}
}
