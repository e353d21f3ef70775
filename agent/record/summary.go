package record

import (
	"sort"

	"jspark/agent/metrics"
)

// Summary is the round's line of the Work table.
type Summary struct {
	BackendTokS  float64 `json:"backend_tok_s"` // accepted output tokens / window
	OutputTokens float64 `json:"output_tokens"` // the counter's delta over the window
	// TTFTs in seconds; nil (null) when no such request had a first output:
	// a mean over nothing is not 0.
	InitialTTFT     *float64     `json:"initial_ttft"`      // mean over sessions' first requests
	LaterMedianTTFT *float64     `json:"later_median_ttft"` // median over every later request
	ToolCalls       int          `json:"tool_calls"`
	NonzeroExits    int          `json:"nonzero_shell_exits"`
	APIErrors       int          `json:"api_errors"`
	PendingAtCut    int          `json:"first_output_pending_at_cut"`
	WaitingMax      float64      `json:"waiting_max"`
	RunningMax      float64      `json:"running_max"`
	Preemptions     float64      `json:"preemptions"`
	PrefixHits      float64      `json:"prefix_hits"` // the counter's delta: prompt tokens the prefix cache served
	CountedBy       metrics.Kind `json:"counted_by"`
	// The pass column: sessions that passed of those scored (an
	// infrastructure failure is not scored: InfraFailures counts them).
	ChecksPassed  int `json:"checks_passed"`
	Checks        int `json:"checks"`
	InfraFailures int `json:"infra_failures"`
	// Mean session times (see SessionTime): working is nil where the
	// backend reported no timing.
	WallSec    float64  `json:"session_wall_s"`
	WorkingSec *float64 `json:"session_working_s"`
	// WindowUse is where the window went, summed over the round's
	// requests; nil when the backend reported no request's timing.
	WindowUse *WindowUse `json:"window_use"`
}

// WindowUse sums, over a round's requests, the engine's timing of each
// (usage.jspark.timing: those that reported one) and the time their tool
// calls ran. Sessions run side by side, so the sums exceed the window.
type WindowUse struct {
	QueuedSec    float64 `json:"queued_s"`
	PrefillSec   float64 `json:"prefill_s"`
	DecodeSec    float64 `json:"decode_s"`
	PreemptedSec float64 `json:"preempted_s"`
	ToolsSec     float64 `json:"tools_s"`
	Reported     int     `json:"reported_requests"` // requests with a timing
}

// Summarize is the round's summary from its sessions and samples, the
// counters' deltas taken from first to last.
func Summarize(r *Round, first, last Sample, kind metrics.Kind) Summary {
	s := Summary{CountedBy: kind}
	s.OutputTokens = last.Generation - first.Generation
	s.BackendTokS = s.OutputTokens / r.Window
	s.Preemptions = last.Preemptions - first.Preemptions
	s.PrefixHits = last.PrefixHits - first.PrefixHits
	for _, x := range r.Samples {
		s.WaitingMax = max(s.WaitingMax, x.Waiting)
		s.RunningMax = max(s.RunningMax, x.Running)
	}
	var initial, later, wall, working []float64
	for _, sr := range r.Sessions {
		s.ToolCalls += sr.ToolCalls
		s.NonzeroExits += sr.NonzeroExits
		s.APIErrors += sr.APIErrors
		if sr.FirstOutputPending {
			s.PendingAtCut++
		}
		for j, q := range sr.Requests {
			if q.TTFT < 0 {
				continue
			}
			if j == 0 {
				initial = append(initial, q.TTFT)
			} else {
				later = append(later, q.TTFT)
			}
		}
		if sr.Passed != nil {
			s.Checks++
			if *sr.Passed {
				s.ChecksPassed++
			}
		}
		if sr.Infra != "" {
			s.InfraFailures++
		}
		wall = append(wall, sr.Time.WallSec)
		if sr.Time.WorkingSec != nil {
			working = append(working, *sr.Time.WorkingSec)
		}
	}
	if m := mean(wall); m != nil {
		s.WallSec = *m
	}
	// Working time is the backend's to report: a mean over some sessions
	// only would not be the round's.
	if len(working) == len(r.Sessions) {
		s.WorkingSec = mean(working)
	}
	s.InitialTTFT = mean(initial)
	s.LaterMedianTTFT = median(later)
	s.WindowUse = windowUse(r.Sessions)
	return s
}

// windowUse sums the sessions' requests; nil when none reported a timing.
func windowUse(ss []Session) *WindowUse {
	var w WindowUse
	for _, sr := range ss {
		for _, q := range sr.Requests {
			w.ToolsSec += q.ToolsSec
			if t := q.Timing; t != nil {
				w.QueuedSec += t.QueuedSec
				w.PrefillSec += t.PrefillSec
				w.DecodeSec += t.DecodeSec
				w.PreemptedSec += t.PreemptedSec
				w.Reported++
			}
		}
	}
	if w.Reported == 0 {
		return nil
	}
	return &w
}

// mean is nil over no samples.
func mean(xs []float64) *float64 {
	if len(xs) == 0 {
		return nil
	}
	t := 0.0
	for _, x := range xs {
		t += x
	}
	t /= float64(len(xs))
	return &t
}

// median is nil over no samples.
func median(xs []float64) *float64 {
	if len(xs) == 0 {
		return nil
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + m) / 2
	}
	return &m
}
