package record

import (
	"jspark/agent/metrics"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSummary(t *testing.T) {
	one, three := 1, 3
	eight, four := 8.0, 4.0
	r := &Round{Window: 10, Samples: []Sample{{Counters: metrics.Counters{Generation: 50, Preemptions: 1}}, {T: 5, Counters: metrics.Counters{Generation: 60, Running: 3, Waiting: 2}}, {T: 10, Counters: metrics.Counters{Generation: 150, Preemptions: 2}}},
		Sessions: []Session{
			{ToolCalls: 2, NonzeroExits: 1, Requests: []Request{{TTFT: 2}, {TTFT: 1}, {TTFT: 3}}, CheckExit: &one, Passed: passed(false),
				Time: SessionTime{WallSec: 10, WorkingSec: &eight}},
			{FirstOutputPending: true, Requests: []Request{{TTFT: -1, Cut: true}}, CheckExit: &three, Passed: passed(true), Time: SessionTime{WallSec: 10, WorkingSec: &four}},
			{APIErrors: 1, Requests: []Request{{TTFT: 4}, {TTFT: 5}}, Infra: "backend unreachable", Time: SessionTime{WallSec: 1}},
		}}
	got := Summarize(r, r.Samples[0], r.Samples[2], metrics.ByEngine)
	ttft := 3.0
	want := Summary{BackendTokS: 10, OutputTokens: 100, InitialTTFT: &ttft, LaterMedianTTFT: &ttft, ToolCalls: 2, NonzeroExits: 1, APIErrors: 1,
		PendingAtCut: 1, WaitingMax: 2, RunningMax: 3, Preemptions: 1, CountedBy: metrics.ByEngine, Checks: 2, ChecksPassed: 1, InfraFailures: 1, WallSec: 7}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("summary (-want +got):\n%s", d)
	}
	// Working time is the mean over every session, or unknown: the third
	// session's backend reported no timing.
	r.Sessions[2].Time.WorkingSec = &four
	if got := Summarize(r, r.Samples[0], r.Samples[2], metrics.ByEngine); got.WorkingSec == nil || *got.WorkingSec != 16.0/3 {
		t.Errorf("working time %v", got.WorkingSec)
	}
}
