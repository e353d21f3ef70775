package record

import (
	"jspark/agent/metrics"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSummary(t *testing.T) {
	one, three := 1, 3
	r := &Round{Window: 10, Samples: []Sample{{Counters: metrics.Counters{Generation: 50, Preemptions: 1}}, {T: 5, Counters: metrics.Counters{Generation: 60, Running: 3, Waiting: 2}}, {T: 10, Counters: metrics.Counters{Generation: 150, Preemptions: 2}}},
		Sessions: []Session{
			{ToolCalls: 2, NonzeroExits: 1, Requests: []Request{{TTFT: 2}, {TTFT: 1}, {TTFT: 3}}, CheckExit: &one},
			{FirstOutputPending: true, Requests: []Request{{TTFT: -1, Cut: true}}, CheckExit: &three},
			{APIErrors: 1, Requests: []Request{{TTFT: 4}, {TTFT: 5}}},
		}}
	got := Summarize(r, r.Samples[0], r.Samples[2], metrics.ByEngine)
	ttft := 3.0
	want := Summary{BackendTokS: 10, OutputTokens: 100, InitialTTFT: &ttft, LaterMedianTTFT: &ttft, ToolCalls: 2, NonzeroExits: 1, APIErrors: 1,
		PendingAtCut: 1, WaitingMax: 2, RunningMax: 3, Preemptions: 1, CountedBy: metrics.ByEngine, Checks: 2}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("summary (-want +got):\n%s", d)
	}
}
