package atif

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"jspark/agent/record"
)

// Info is what the run knows of a session beyond its folder.
type Info struct {
	Round   string          // the round's name: the session id is ROUND/SESSION
	Trial   int             // the round's trial (--trials): K > 1 adds #K to the id
	Started time.Time       // the round's start, the zero of the requests' times
	Model   string          // the model the session's requests named
	Version string          // jspark's version ("dev" when empty)
	Session *record.Session // the session's record (results.json's)
}

// line is one line of trajectory.jsonl: jspark's own loop writes the reply
// and the tools' results of each request; an external agent's recorder
// writes what the agent sent new with each request (its previous reply and
// the results among it).
type line struct {
	Request *record.Request `json:"request"`
	Reply   *message        `json:"reply"`
	Results []message       `json:"tool_results"`
	History []struct {
		Role   string        `json:"role"`
		Text   string        `json:"text"`
		Calls  []record.Call `json:"tool_calls"`
		CallID string        `json:"tool_call_id"`
	} `json:"history_added"`
}

// message is a chat message as the trajectory and request bodies hold it.
type message struct {
	Role       string            `json:"role"`
	Content    json.RawMessage   `json:"content"`
	Reasoning  string            `json:"reasoning_content"`
	ToolCallID string            `json:"tool_call_id"`
	ToolCalls  []record.WireCall `json:"tool_calls"`
}

func (m *message) item() item {
	it := item{role: m.Role, text: record.ContentText(m.Content), reasoning: m.Reasoning, callID: m.ToolCallID}
	for _, c := range m.ToolCalls {
		it.calls = append(it.calls, ToolCall{ToolCallID: c.ID, FunctionName: c.Function.Name, Arguments: arguments(c.Function.Arguments)})
	}
	return it
}

// arguments is a call's arguments as ATIF wants them, a JSON object: the
// arguments when they are one, else (clipped, or not JSON) the text under
// "raw", so nothing of it is lost.
func arguments(s string) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(s), &obj) == nil && obj != nil {
		var b bytes.Buffer
		if json.Compact(&b, []byte(s)) == nil {
			return b.Bytes()
		}
	}
	if strings.TrimSpace(s) == "" {
		return json.RawMessage("{}")
	}
	b, _ := json.Marshal(map[string]string{"raw": s})
	return b
}

// Build reads the session recorded in dir into a trajectory; a session
// that sent nothing, or has no trajectory.jsonl, has no steps (Write then
// writes nothing).
func Build(dir string, in Info) (*Trajectory, error) {
	s := in.Session
	lines, err := readLines(filepath.Join(dir, "trajectory.jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		return &Trajectory{}, nil // no trajectory: nothing to export
	}
	if err != nil {
		return nil, err
	}
	name, version := "jspark", in.Version
	if version == "" {
		version = "dev"
	}
	if s.Agent != "" {
		name = s.Agent
	}
	id := in.Round + "/" + s.Name
	if in.Trial > 1 {
		id += fmt.Sprintf("#%d", in.Trial)
	}
	b := &builder{in: in, t: &Trajectory{
		SchemaVersion: Version, SessionID: id,
		Agent: Agent{Name: name, Version: version, ModelName: in.Model},
		Notes: "Exported by jspark from the session's trajectory.jsonl: texts are clipped as it clips them (head and tail kept); " +
			"a call's arguments that are not a JSON object are kept as text under \"raw\". Times in seconds from the round's start.",
	}}
	if s.Agent == "" {
		if err := b.ownLoop(dir, lines); err != nil {
			return nil, err
		}
	} else {
		for _, l := range lines {
			for _, h := range l.History {
				it := item{role: h.Role, text: h.Text, callID: h.CallID}
				for _, c := range h.Calls {
					it.calls = append(it.calls, ToolCall{ToolCallID: c.ID, FunctionName: c.Name, Arguments: arguments(c.Args)})
				}
				b.item(it)
			}
			if l.Request != nil {
				b.request(l.Request)
			}
		}
	}
	b.flush()
	b.final()
	return b.t, nil
}

// ownLoop feeds jspark's loop's session: the first request's messages
// (initial_request.json), each request with its reply and results, and
// each nudge, the last user message of the request after a reply without
// calls (requests.jsonl, where the run kept it).
func (b *builder) ownLoop(dir string, lines []line) error {
	first, err := os.ReadFile(filepath.Join(dir, "initial_request.json"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var body struct {
		Messages []message `json:"messages"`
	}
	if len(first) > 0 {
		if err := json.Unmarshal(first, &body); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(dir, "initial_request.json"), err)
		}
	}
	for _, m := range body.Messages {
		b.item(m.item())
	}
	bodies, err := record.ReadBodies(filepath.Join(dir, record.BodiesFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for i, l := range lines {
		if l.Request != nil {
			b.request(l.Request)
		}
		if l.Reply != nil {
			b.item(l.Reply.item())
		}
		for _, r := range l.Results {
			b.item(r.item())
		}
		if l.Reply != nil && len(l.Reply.ToolCalls) == 0 && i+1 < len(bodies) {
			var next struct {
				Messages []message `json:"messages"`
			}
			if json.Unmarshal(bodies[i+1].JSON, &next) == nil && len(next.Messages) > 0 && next.Messages[len(next.Messages)-1].Role == "user" {
				b.item(next.Messages[len(next.Messages)-1].item())
			}
		}
	}
	return nil
}

// maxLine bounds a trajectory line (its texts are clipped; a history may
// hold many).
const maxLine = 64 << 20

func readLines(file string) ([]line, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, maxLine)
	var out []line
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("%s, line %d: %w", file, n, err)
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return out, nil
}

// item is one message of the conversation, whoever wrote it.
type item struct {
	role, text, reasoning, callID string
	calls                         []ToolCall
}

// builder turns requests and messages, in conversation order, into steps:
// a request opens an agent step that the reply after it fills; results go
// to the step whose call they answer; anything else is a step of its own.
type builder struct {
	in      Info
	t       *Trajectory
	pending *Step           // the last request's step, until the next step
	req     *record.Request // its request
	filled  bool            // its reply is known
}

func (b *builder) add(s Step) *Step {
	s.StepID = len(b.t.Steps) + 1
	b.t.Steps = append(b.t.Steps, s)
	return &b.t.Steps[len(b.t.Steps)-1]
}

func (b *builder) request(q *record.Request) {
	b.flush()
	st := &Step{Source: "agent", ModelName: b.in.Model, Metrics: metrics(q)}
	if !b.in.Started.IsZero() {
		st.Timestamp = b.in.Started.Add(time.Duration(q.Sent * float64(time.Second))).UTC().Format(time.RFC3339Nano)
	}
	b.pending, b.req, b.filled = st, q, false
}

// flush adds the pending step; a reply never seen (an external agent's
// last) leaves the calls the record has.
func (b *builder) flush() {
	if b.pending == nil {
		return
	}
	if !b.filled {
		for _, c := range b.req.Calls {
			b.pending.ToolCalls = append(b.pending.ToolCalls, ToolCall{ToolCallID: c.ID, FunctionName: c.Name, Arguments: arguments(c.Args)})
		}
	}
	b.add(*b.pending)
	b.pending, b.req = nil, nil
}

func (b *builder) item(it item) {
	switch it.role {
	case "assistant":
		switch {
		case b.pending != nil && !b.filled:
			b.pending.Message, b.pending.ReasoningContent, b.pending.ToolCalls = it.text, it.reasoning, it.calls
			b.filled = true
		case b.pending != nil && it.text == "" && it.reasoning == "":
			b.pending.ToolCalls = append(b.pending.ToolCalls, it.calls...) // a Responses call item of the same reply
		default:
			b.flush()
			b.pending, b.req, b.filled = &Step{Source: "agent", Message: it.text, ReasoningContent: it.reasoning, ToolCalls: it.calls}, &record.Request{}, true
		}
	case "tool":
		st := b.pending
		if st == nil {
			for i := len(b.t.Steps) - 1; i >= 0 && st == nil; i-- {
				if b.t.Steps[i].Source == "agent" {
					st = &b.t.Steps[i]
				}
			}
		}
		if st == nil { // a result of no step: kept as the environment's
			b.add(Step{Source: "system", Message: "", Observation: &Observation{Results: []Result{{Content: it.text}}}})
			return
		}
		r := Result{Content: it.text}
		for _, c := range st.ToolCalls {
			if c.ToolCallID == it.callID {
				r.SourceCallID = it.callID
			}
		}
		if st.Observation == nil {
			st.Observation = &Observation{Results: []Result{}}
		}
		st.Observation.Results = append(st.Observation.Results, r)
	default:
		b.flush()
		src := "user"
		if it.role == "system" || it.role == "developer" {
			src = "system"
		}
		b.add(Step{Source: src, Message: it.text})
	}
}

// metrics are a request's counts (when it finished) and its timings.
func metrics(q *record.Request) *Metrics {
	extra := map[string]any{"turn": q.Turn, "sent_s": q.Sent, "end_s": q.End}
	if q.TTFT >= 0 {
		extra["ttft_s"] = q.TTFT
	}
	for k, v := range map[string]string{"finish_reason": q.Finish, "error": q.Error} {
		if v != "" {
			extra[k] = v
		}
	}
	if q.Cut {
		extra["cut"] = true
	}
	if q.StreamedTokens > 0 { // a cut request's output so far
		extra["streamed_tokens"] = q.StreamedTokens
	}
	if q.ToolsSec > 0 {
		extra["tools_s"] = q.ToolsSec
	}
	m := &Metrics{Extra: extra}
	if q.Error == "" && !q.Cut {
		p, c, k := q.PromptTokens, q.OutputTokens(), q.CachedTokens
		m.PromptTokens, m.CompletionTokens, m.CachedTokens = &p, &c, &k
	}
	return m
}

// final sums the steps' metrics and says how the session ended.
func (b *builder) final() {
	f := &FinalMetrics{TotalSteps: len(b.t.Steps), Extra: map[string]any{}}
	for _, s := range b.t.Steps {
		if m := s.Metrics; m != nil && m.PromptTokens != nil {
			f.TotalPromptTokens += *m.PromptTokens
			f.TotalCompletionTokens += *m.CompletionTokens
			f.TotalCachedTokens += *m.CachedTokens
		}
	}
	s := b.in.Session
	f.Extra["end"], f.Extra["task"] = string(s.End), s.Task
	if s.CheckExit != nil {
		f.Extra["check_exit"] = *s.CheckExit
	}
	if s.ExpectMet != nil {
		f.Extra["expect_met"] = *s.ExpectMet
	}
	b.t.FinalMetrics = f
}
