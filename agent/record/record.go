// Package record is the runner's records: what results.json and the
// trajectories hold of a `jspark work` run, as their own versioned schema.
// Only the runner writes them; the report, the bench's combined tables and
// anything that reads a run back (a resume, a replay, an export) read them
// here. What a backend reported (usage.jspark) is kept in its wire types
// (jspark/backend/usage), never the engine's.
package record

import (
	"encoding/json"
	"time"

	"jspark/agent/metrics"
	"jspark/backend/usage"
	"jspark/sandbox"
)

// Version is results.json's schema version. 1 is the first versioned
// schema: the unversioned one before it, plus the version field.
const Version = 1

// Work is results.json of a `jspark work` run on one target.
type Work struct {
	Version     int         `json:"version"`
	Recipe      string      `json:"recipe"`
	Backends    []string    `json:"backends"`
	Window      float64     `json:"window"`
	Rounds      []*Round    `json:"rounds"`
	RepeatPairs RepeatPairs `json:"repeat_pairs"`
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
	Concurrency int       `json:"concurrency"`
	Window      float64   `json:"window"`
	Started     time.Time `json:"started"`
	Sessions    []Session `json:"sessions"`
	Samples     []Sample  `json:"samples"`
	Summary     Summary   `json:"summary"`
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
	CheckExit          *int      `json:"check_exit,omitempty"`
	ExpectMet          *bool     `json:"expect_met,omitempty"` // the final reply holds the task's expected text
	Isolated           bool      `json:"isolated"`
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
)

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
