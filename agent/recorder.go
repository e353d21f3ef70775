package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"jspark/backend/server"
)

// recorder stands in front of the engine's HTTP server for one external
// agent's session and records each of its generation requests from the server
// side, with the same fields jspark's own loop records: times (TTFT is the
// request's arrival to the server's first output), tokens and cached tokens
// as the engine counted them, and tool calls, named by the output that made
// them and followed through the agent's later request histories (where the
// results say how a shell call exited).
type recorder struct {
	next    http.Handler
	session string
	start   time.Time   // the round's start, the zero of every time
	cut     func() bool // the window has ended
	log     io.Writer   // the trajectory
	onStep  func(*Request)
	// key is the session key sent to the engine (X-Session-Id) when the
	// agent sends none: round/session, as jspark's own loop sends.
	key string

	mu     sync.Mutex
	reqs   []Request
	calls  map[string][2]int // call id → (request, call) index
	seen   int               // history items of the last request
	first  []byte            // the first request's body
	logErr error
}

func newRecorder(next http.Handler, session string, start time.Time, cut func() bool, log io.Writer) *recorder {
	return &recorder{next: next, session: session, start: start, cut: cut, log: log, calls: map[string][2]int{}}
}

// generation reports whether a request asks for model output.
func generation(r *http.Request) bool {
	switch r.URL.Path {
	case "/v1/chat/completions", "/v1/responses", "/v1/completions":
		return r.Method == http.MethodPost
	}
	return false
}

// maxRecordedBody is the server's own body bound: a larger request is the
// server's 413 either way.
const maxRecordedBody = 32 << 20

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !generation(r) {
		rc.next.ServeHTTP(w, r)
		return
	}
	arrived := time.Now()
	if rc.key != "" && r.Header.Get("X-Session-Id") == "" {
		r.Header.Set("X-Session-Id", rc.key)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRecordedBody+1))
	if err == nil && len(body) > maxRecordedBody {
		err = fmt.Errorf("the request body is over %d bytes", maxRecordedBody)
	}
	rc.mu.Lock()
	turn := len(rc.reqs)
	rc.reqs = append(rc.reqs, Request{Turn: turn, Sent: arrived.Sub(rc.start).Seconds(), TTFT: -1})
	if rc.first == nil {
		rc.first = body
	}
	var added []historyItem
	if err == nil {
		added = rc.history(turn, body)
	}
	rc.mu.Unlock()

	sw := &statusWriter{ResponseWriter: w}
	var ob *server.Observation
	if err != nil {
		sw.WriteHeader(http.StatusRequestEntityTooLarge)
		fmt.Fprintf(sw, `{"error":{"message":%q,"type":"invalid_request_error"}}`, err.Error())
	} else {
		r.Body = io.NopCloser(bytes.NewReader(body))
		// The server reports before its handler returns, on this goroutine.
		ctx := server.WithObserver(r.Context(), func(o server.Observation) { ob = &o })
		rc.next.ServeHTTP(sw, r.WithContext(ctx))
	}
	end := time.Now()

	rc.mu.Lock()
	q := &rc.reqs[turn]
	q.End = end.Sub(rc.start).Seconds()
	if ob != nil {
		if !ob.FirstOutput.IsZero() {
			q.TTFT = ob.FirstOutput.Sub(arrived).Seconds()
		}
		q.PromptTokens, q.CompletionTokens, q.CachedTokens = ob.Usage.PromptTokens, ob.Usage.CompletionTokens, ob.Usage.CachedTokens
		if !ob.Accepted.IsZero() && ob.Err == nil {
			q.Timing = &ob.Usage.Timing
		}
		q.Finish = ob.Finish
		// A fast client may send its next request, naming these calls, before
		// this handler returns: the calls that request's history put here are
		// these calls, and keep their exit codes.
		early := q.Calls
		q.Calls = nil
		for _, c := range ob.Calls {
			made := Call{ID: clip(c.ID), Name: clip(c.Function.Name), Args: clip(c.Function.Arguments), ArgsBytes: len(c.Function.Arguments)}
			for j := range early {
				if c.ID != "" && early[j].ID == c.ID {
					made.ExitCode = early[j].ExitCode
					early = append(early[:j], early[j+1:]...)
					break
				}
			}
			q.Calls = append(q.Calls, made)
		}
		q.Calls = append(q.Calls, early...)
		for i, c := range q.Calls {
			if c.ID != "" {
				rc.calls[c.ID] = [2]int{turn, i}
			}
		}
		if ob.Err != nil {
			q.Error = ob.Err.Error()
		}
	}
	if sw.status >= 400 {
		msg := q.Error
		if msg == "" {
			msg = errorMessage(sw.errBody.Bytes())
		}
		q.Error = fmt.Sprintf("HTTP %d: %s", sw.status, msg)
	}
	if q.Error != "" && rc.cut() {
		q.Cut, q.Error = true, ""
	}
	rec := *q
	rc.write(&rec, added)
	rc.mu.Unlock()
	if rc.onStep != nil {
		rc.onStep(&rec)
	}
}

// errorMessage is an OpenAI-style error body's message, else the body.
func errorMessage(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	return strings.TrimSpace(string(body))
}

// requests is the record so far, in arrival order.
func (rc *recorder) requests() []Request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Request(nil), rc.reqs...)
}

// historyItem is one message or item of a request's history as the
// trajectory keeps it, texts clipped.
type historyItem struct {
	Role   string `json:"role"`
	Text   string `json:"text,omitempty"`
	Calls  []Call `json:"tool_calls,omitempty"`
	CallID string `json:"tool_call_id,omitempty"` // a tool result's call
}

// history reads a request's conversation (chat messages or Responses input
// items): calls the agent sent back that no output of this session made are
// its previous request's; results give shell calls their exit codes. It
// returns the items new since the previous request.
func (rc *recorder) history(turn int, body []byte) []historyItem {
	items := parseHistory(body)
	for _, it := range items {
		for _, c := range it.Calls {
			if _, ok := rc.calls[c.ID]; ok || turn == 0 || c.ID == "" {
				continue
			}
			prev := &rc.reqs[turn-1]
			rc.calls[c.ID] = [2]int{turn - 1, len(prev.Calls)}
			prev.Calls = append(prev.Calls, c)
		}
		if at, ok := rc.calls[it.CallID]; ok && it.CallID != "" {
			c := &rc.reqs[at[0]].Calls[at[1]]
			if c.ExitCode == nil {
				c.ExitCode = shellExit(c.Name, it.Text)
			}
		}
	}
	var added []historyItem
	if rc.seen < len(items) {
		added = items[rc.seen:]
	}
	rc.seen = len(items)
	for i := range added {
		added[i].Text = clip(added[i].Text)
	}
	return added
}

// parseHistory normalises chat messages and Responses input items.
func parseHistory(body []byte) []historyItem {
	var req struct {
		Messages []struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
		Input json.RawMessage `json:"input"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil // the server says what is wrong with it
	}
	var out []historyItem
	for _, m := range req.Messages {
		it := historyItem{Role: m.Role, Text: partsText(m.Content), CallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			it.Calls = append(it.Calls, Call{ID: c.ID, Name: clip(c.Function.Name), Args: clip(c.Function.Arguments), ArgsBytes: len(c.Function.Arguments)})
		}
		out = append(out, it)
	}
	var items []struct {
		Type      string          `json:"type"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		CallID    string          `json:"call_id"`
		Name      string          `json:"name"`
		Arguments string          `json:"arguments"`
		Output    json.RawMessage `json:"output"`
	}
	if json.Unmarshal(req.Input, &items) != nil {
		if s := partsText(req.Input); s != "" {
			out = append(out, historyItem{Role: "user", Text: s})
		}
		return out
	}
	for _, it := range items {
		switch it.Type {
		case "function_call":
			out = append(out, historyItem{Role: "assistant", Calls: []Call{{ID: it.CallID, Name: clip(it.Name), Args: clip(it.Arguments), ArgsBytes: len(it.Arguments)}}})
		case "function_call_output":
			out = append(out, historyItem{Role: "tool", Text: partsText(it.Output), CallID: it.CallID})
		default:
			out = append(out, historyItem{Role: it.Role, Text: partsText(it.Content)})
		}
	}
	return out
}

// partsText is a content field's text: a string, or the texts of its parts.
func partsText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// exitPatterns find a shell call's exit status in what the agent's tool
// returned (Pi: "Command exited with code 2"; others "exit code: 2" or a
// JSON exit_code).
var exitPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?i)exit(?:ed with)? code:? (-?\d+)`),
	regexp.MustCompile(`"exit_code":\s*(-?\d+)`),
}

// shellExit is the exit code of a shell-like call from its result text
// (0 when it states none); nil for other tools.
func shellExit(name, result string) *int {
	switch name {
	case "bash", "shell", "exec_command", "local_shell":
	default:
		return nil
	}
	code := 0
	for _, p := range exitPatterns {
		if m := p.FindAllStringSubmatch(result, -1); m != nil {
			fmt.Sscan(m[len(m)-1][1], &code)
			break
		}
	}
	return &code
}

// externalStep is one trajectory line of an external agent's session.
type externalStep struct {
	Session string        `json:"session"`
	Request *Request      `json:"request"`
	History []historyItem `json:"history_added,omitempty"` // what the agent sent new in this request
}

func (rc *recorder) write(q *Request, added []historyItem) {
	if rc.log == nil || rc.logErr != nil {
		return
	}
	b, err := json.Marshal(externalStep{Session: rc.session, Request: q, History: added})
	if err == nil {
		_, err = rc.log.Write(append(b, '\n'))
	}
	rc.logErr = err
}

// statusWriter notes a response's status and the start of an error body;
// it flushes (streams must) and unwraps for http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	status  int
	errBody bytes.Buffer
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.status >= 400 && w.errBody.Len() < 1024 {
		w.errBody.Write(b[:min(len(b), 1024-w.errBody.Len())])
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
