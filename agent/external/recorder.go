package external

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"jspark/agent/record"
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
	onStep  func(*record.Request)
	// key is the session key sent to the engine (X-Session-Id) when the
	// agent sends none: round/session, as jspark's own loop sends.
	key string
	// bodies is the session's record.BodiesFile, which every request body
	// is appended to ("": none kept).
	bodies string

	mu     sync.Mutex
	reqs   []record.Request
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
	turn, added := rc.arrive(arrived, r.URL.Path, body, err)
	sw := &statusWriter{ResponseWriter: w}
	ob := rc.serve(sw, r, body, err)
	end := time.Now()

	rc.mu.Lock()
	q := &rc.reqs[turn]
	q.End = end.Sub(rc.start).Seconds()
	if ob != nil {
		rc.observed(turn, ob, arrived)
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

// arrive records a request's arrival: its turn, and what its history (when
// its body could be read) says of earlier requests' calls.
func (rc *recorder) arrive(arrived time.Time, path string, body []byte, bodyErr error) (turn int, added []historyItem) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	turn = len(rc.reqs)
	rc.reqs = append(rc.reqs, record.Request{Turn: turn, Sent: arrived.Sub(rc.start).Seconds(), TTFT: -1})
	if rc.first == nil {
		rc.first = body
	}
	if bodyErr == nil {
		added = rc.history(turn, body)
	}
	// Every request has its line, one refused here too (as far as it was
	// read), so that line i stays request i.
	if rc.bodies != "" && rc.logErr == nil {
		rc.logErr = record.AppendBody(rc.bodies, strings.TrimPrefix(path, "/v1"), body)
	}
	return turn, added
}

// serve hands the request to the server with an observer, and returns what
// the server observed (nil for a body refused here).
func (rc *recorder) serve(sw *statusWriter, r *http.Request, body []byte, bodyErr error) *server.Observation {
	if bodyErr != nil {
		sw.WriteHeader(http.StatusRequestEntityTooLarge)
		fmt.Fprintf(sw, `{"error":{"message":%q,"type":"invalid_request_error"}}`, bodyErr.Error())
		return nil
	}
	var ob *server.Observation
	r.Body = io.NopCloser(bytes.NewReader(body))
	// The server reports before its handler returns, on this goroutine.
	ctx := server.WithObserver(r.Context(), func(o server.Observation) { ob = &o })
	rc.next.ServeHTTP(sw, r.WithContext(ctx))
	return ob
}

// observed fills request turn from what the server saw of it: times,
// tokens, timing, finish, calls and error. Called with rc.mu held.
func (rc *recorder) observed(turn int, ob *server.Observation, arrived time.Time) {
	q := &rc.reqs[turn]
	if !ob.FirstOutput.IsZero() {
		q.TTFT = ob.FirstOutput.Sub(arrived).Seconds()
	}
	q.PromptTokens, q.CompletionTokens, q.CachedTokens = ob.Usage.PromptTokens, ob.Usage.CompletionTokens, ob.Usage.PromptTokensDetails.CachedTokens
	if j := ob.Usage.Jspark; j != nil && !ob.Accepted.IsZero() && ob.Err == nil {
		q.Timing = &j.Timing
	}
	q.Finish = ob.Finish
	// A fast client may send its next request, naming these calls, before
	// this handler returns: the calls that request's history put here are
	// these calls, and keep their exit codes.
	early := q.Calls
	q.Calls = nil
	for _, c := range ob.Calls {
		made := record.NewCall(c.ID, c.Function.Name, c.Function.Arguments)
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
func (rc *recorder) requests() []record.Request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]record.Request(nil), rc.reqs...)
}

// externalStep is one trajectory line of an external agent's session.
type externalStep struct {
	Session string          `json:"session"`
	Request *record.Request `json:"request"`
	History []historyItem   `json:"history_added,omitempty"` // what the agent sent new in this request
}

func (rc *recorder) write(q *record.Request, added []historyItem) {
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
