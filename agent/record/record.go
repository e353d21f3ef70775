// Package record is the runner's records: what results.json and the
// trajectories hold of a `jspark work` run, as their own versioned schema.
// Only the runner writes them; the report, the bench's combined tables and
// anything that reads a run back (a resume, a replay, an export) read them
// here. What a backend reported (usage.jspark) is kept in its wire types
// (jspark/backend/usage), never the engine's.
package record

import (
	"encoding/json"
	"fmt"
	"time"

	"jspark/agent/metrics"
	"jspark/backend/usage"
	"jspark/sandbox"
)

// Version is results.json's schema version. 1 is the first versioned
// schema: the unversioned one before it, plus the version field. 2 scores
// the sessions: trials (work's trials, a round's trial and seed, the pass
// rates), each session's verdict (passed, check, infra_error), workspace
// and time (wall, queued, working), and the summary's infra failures and
// session times.
const Version = 2

// Work is results.json of a `jspark work` run on one target.
type Work struct {
	Version     int         `json:"version"`
	Recipe      string      `json:"recipe"`
	Backends    []string    `json:"backends"`
	Window      float64     `json:"window"`
	Trials      int         `json:"trials"` // times each round ran, each with its own seed
	Rounds      []*Round    `json:"rounds"` // each round's trials in the order they ran
	RepeatPairs RepeatPairs `json:"repeat_pairs"`
	// PassRates are the rounds' pass rates, per task and for each round's
	// tasks together, over its trials (see Rates).
	PassRates []PassRate `json:"pass_rates"`
}

// Label is how tables name round r of w: its name, with its trial after a
// # when the run had several.
func (w *Work) Label(r *Round) string {
	if w.Trials > 1 {
		return fmt.Sprintf("%s#%d", r.Name, r.Trial)
	}
	return r.Name
}

// WorkTargets is results.json of a `jspark work` run over several targets;
// a run on one target writes Work.
type WorkTargets struct {
	Version int          `json:"version"`
	Recipe  string       `json:"recipe"`
	Window  float64      `json:"window"`
	Targets []WorkTarget `json:"targets"`
}

// WorkTarget is one target of a run over several: its own run's
// results.json, whole, with the target's name beside it.
type WorkTarget struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // boot or endpoint
	Spec string `json:"spec"` // the boot's engine flags, or the endpoints' URLs
	Out  string `json:"out"`  // its folder: results.json, report.html, trajectories
	*Work
}

// RepeatPairs is how many repeat sessions sent exactly their twin's first
// request.
type RepeatPairs struct {
	Identical int `json:"identical"`
	Total     int `json:"total"`
}

// Round is everything a round recorded.
type Round struct {
	Name        string    `json:"name"`
	RepeatOf    string    `json:"repeat_of,omitempty"`
	Trial       int       `json:"trial"` // 1, 2, … (--trials)
	Dir         string    `json:"dir"`   // its folder, relative to the run's: ROUND, or ROUND/tK with trials
	Seed        *int      `json:"seed"`  // the sampling seed its requests carried; nil: none
	Concurrency int       `json:"concurrency"`
	Window      float64   `json:"window"`
	Started     time.Time `json:"started"`
	// Retried is why the trial's first attempt was set aside (an
	// infrastructure failure; its files are under a folder ending in
	// .failed-1): this record is the second attempt's.
	Retried  string    `json:"retried,omitempty"`
	Sessions []Session `json:"sessions"`
	Samples  []Sample  `json:"samples"`
	Summary  Summary   `json:"summary"`
	// Isolation is what confined the round's sandboxes (the first one's
	// report: they are made alike), warnings included.
	Isolation *sandbox.Isolation `json:"isolation,omitempty"`
}

// Sample is one reading of the backend counters, summed over backends.
type Sample struct {
	T float64 `json:"t"` // seconds from the round's start
	metrics.Counters
}

// Session is one session's record.
type Session struct {
	Name               string    `json:"name"`
	Task               string    `json:"task"`
	Backend            string    `json:"backend"`
	End                End       `json:"end"`
	Requests           []Request `json:"requests"`
	ToolCalls          int       `json:"tool_calls"`
	NonzeroExits       int       `json:"nonzero_shell_exits"`
	APIErrors          int       `json:"api_errors"`
	FirstOutputPending bool      `json:"first_output_pending"`
	InitialPayload     string    `json:"initial_payload_sha256"`
	// Passed is the session's verdict: its task's check passed with the
	// hidden tests copied in after it stopped, and its final reply holds
	// the expected text, each where the task has one. nil: not scored (the
	// task has neither, or an infrastructure failure: Infra says which).
	Passed    *bool  `json:"passed"`
	Check     *Check `json:"check,omitempty"`
	CheckExit *int   `json:"check_exit,omitempty"` // Check's exit code
	ExpectMet *bool  `json:"expect_met,omitempty"` // the final reply holds the task's expected text
	// Infra is an infrastructure failure (the backend unreachable or
	// failing, a sandbox or agent that could not start, a check that could
	// not run): the session is not scored, and its trial is retried once.
	Infra    string `json:"infra_error,omitempty"`
	Isolated bool   `json:"isolated"`
	// Workspace is what the copy of a capped workspace holds on disk (nil:
	// the workspace is its folder itself).
	Workspace *sandbox.Kept `json:"workspace,omitempty"`
	Time      SessionTime   `json:"time"`
	// An external agent's run: which, its exit status and time (both nil
	// when cut), why it could not run, and its printed answer (clipped).
	Agent        string   `json:"agent,omitempty"`
	AgentExit    *int     `json:"agent_exit,omitempty"`
	AgentSeconds *float64 `json:"agent_seconds,omitempty"`
	AgentError   string   `json:"agent_error,omitempty"`
	AgentOutput  string   `json:"agent_output,omitempty"`
}

// End says why a session stopped.
type End string

const (
	EndCut         End = "cut"          // the window ended
	EndNoToolCall  End = "no_tool_call" // the nudges ran out
	EndContextFull End = "context_full"
	EndAPIErrors   End = "api_errors"
	EndAgentDone   End = "agent_done"   // an external agent exited 0 before the cut
	EndAgentFailed End = "agent_failed" // it exited otherwise, or could not start
	// The recipe's limits (budgets beyond the window), each its own end.
	EndTurns        End = "limit_turns"         // it made the recipe's limits.turns requests
	EndOutputTokens End = "limit_output_tokens" // its completions reached limits.output_tokens
	EndToolSeconds  End = "limit_tool_seconds"  // its tool calls ran limits.tool_seconds
	EndInfra        End = "infra"               // it could not run: its sandbox, say (see Session.Infra)
)

// Check is how a session's task check ran after the session stopped, with
// the task's hidden tests copied into its workspace over whatever the agent
// left at their paths.
type Check struct {
	Passed      bool    `json:"passed"`
	ExitCode    *int    `json:"exit_code"` // -1: the hidden tests could not be copied in (Output says why)
	TimedOut    bool    `json:"timed_out,omitempty"`
	Output      string  `json:"output"`       // clipped
	Seconds     float64 `json:"seconds"`      // how long the check ran
	HiddenTests int     `json:"hidden_tests"` // files copied in before it
}

// SessionTime is where a session's time went: its wall time (the round's
// start to its end: the cut, a limit, or its own end), the time its
// requests spent queued in the engine (usage.jspark's timing) and the
// working time, the wall time less the queueing. At C6 the window charges
// queueing to the agent; working time does not.
type SessionTime struct {
	WallSec float64 `json:"wall_s"`
	// QueuedSec and WorkingSec are nil where the backend reports no timing
	// (any endpoint but jspark serve): not knowable from the client, whose
	// TTFT mixes queueing and prefill.
	QueuedSec  *float64 `json:"queued_s"`
	WorkingSec *float64 `json:"working_s"`
	// Unreported counts the requests without a timing (cut before their
	// usage came): their queueing, if any, is counted as working.
	Unreported int `json:"unreported_requests,omitempty"`
}

// Times is a session's time from its wall time and its requests' timings;
// timed says that its backend reports them (some request of its round had
// one), so that a session whose every request was cut before its usage
// came still has a working time: its wall time, an upper bound.
func Times(wall float64, reqs []Request, timed bool) SessionTime {
	t := SessionTime{WallSec: wall}
	queued, reported := 0.0, 0
	for _, q := range reqs {
		if q.Timing == nil {
			t.Unreported++
			continue
		}
		queued += q.Timing.QueuedSec
		reported++
	}
	if reported > 0 || timed {
		working := max(wall-queued, 0)
		t.QueuedSec, t.WorkingSec = &queued, &working
	}
	return t
}

// Call is one tool call of a response.
type Call struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Args      string `json:"arguments"`           // clipped (see Limit)
	ArgsBytes int    `json:"arguments_bytes"`     // the arguments' full length
	ExitCode  *int   `json:"exit_code,omitempty"` // bash only
	Failed    bool   `json:"failed,omitempty"`    // the call was wrong: bad arguments, unknown tool, no match
}

// NewCall is a call as records keep it: texts clipped, the arguments' full
// length noted.
func NewCall(id, name, args string) Call {
	return Call{ID: Clip(id), Name: Clip(name), Args: Clip(args), ArgsBytes: len(args)}
}

// Request is what one model request of a session did. Times are seconds
// from the round's start; TTFT is -1 when no output arrived.
type Request struct {
	Turn             int     `json:"turn"`
	Sent             float64 `json:"sent"`
	TTFT             float64 `json:"ttft"`
	End              float64 `json:"end"`
	PromptTokens     int     `json:"prompt_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
	CachedTokens     int     `json:"cached_tokens"`
	StreamedTokens   int     `json:"streamed_tokens"` // output chunks seen, for backends that report no usage
	Finish           string  `json:"finish_reason,omitempty"`
	Calls            []Call  `json:"tool_calls,omitempty"`
	Error            string  `json:"error,omitempty"`
	Cut              bool    `json:"cut,omitempty"` // the window ended during this request
	Trimmed          bool    `json:"trimmed,omitempty"`
	// Timing is where the request's time went by the server's engine clock
	// (usage.jspark.timing of jspark serve); nil when the backend reports
	// none or the request did not finish.
	Timing *usage.Timing `json:"timing,omitempty"`
	// ToolsSec is how long the reply's tool calls ran (jspark's own loop;
	// an external agent runs its tools out of sight).
	ToolsSec float64 `json:"tools_s,omitempty"`
}

// OutputTokens are the request's output tokens: the usage's count, or the
// chunks streamed where the backend reported no usage.
func (q *Request) OutputTokens() int { return max(q.CompletionTokens, q.StreamedTokens) }

// requestJSON is Request as results.json and trajectories write it: a TTFT
// nobody measured (no first output, -1 in memory) is null, never a number.
type requestJSON struct {
	requestFields
	TTFT *float64 `json:"ttft"`
}

type requestFields Request

func (q Request) MarshalJSON() ([]byte, error) {
	out := requestJSON{requestFields: requestFields(q)}
	if q.TTFT >= 0 {
		out.TTFT = &q.TTFT
	}
	return json.Marshal(out)
}

func (q *Request) UnmarshalJSON(b []byte) error {
	var in requestJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*q = Request(in.requestFields)
	q.TTFT = -1
	if in.TTFT != nil {
		q.TTFT = *in.TTFT
	}
	return nil
}

// Tally counts the session's tool calls, nonzero shell exits and API errors
// (a request the runner retried after trimming its history is none) from
// its requests, and whether its first output was still pending at the end.
func (s *Session) Tally() {
	for _, r := range s.Requests {
		if r.Error != "" && !r.Trimmed {
			s.APIErrors++
		}
		for _, c := range r.Calls {
			s.ToolCalls++
			if c.ExitCode != nil && *c.ExitCode != 0 {
				s.NonzeroExits++
			}
		}
	}
	s.FirstOutputPending = len(s.Requests) == 0 || s.Requests[0].TTFT < 0
}
