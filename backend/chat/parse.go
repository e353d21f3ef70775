package chat

import (
	"encoding/json"
	"strings"
	"unsafe"
)

// Delta is what one piece of model output adds: reasoning text, content
// text and/or tool-call events.
type Delta struct {
	Reasoning string
	Content   string
	Calls     []CallDelta
}

// Add appends x to d, as a client would accumulate them.
func (d *Delta) Add(x Delta) {
	d.Reasoning += x.Reasoning
	d.Content += x.Content
	d.Calls = append(d.Calls, x.Calls...)
}

// CallDelta is one streamed tool-call fragment, as OpenAI sends them: the
// first fragment of a call has ID, Type and Name; later ones add Arguments.
type CallDelta struct {
	Index     int
	ID        string
	Type      string
	Name      string
	Arguments string
}

// Parser splits streamed model output into content, reasoning (harmony's
// analysis channel) and tool calls written in one Format's syntax. Text
// that may be the start of a marker is held back until it is known. A call
// streams as OpenAI streams it: its name as soon as it is decoded, then the
// arguments' JSON text fragment by fragment. Feeding the output in any
// split yields the same content, and calls whose fragments concatenate to
// the same text.
//
// Each format is a state machine (one file each) over the plumbing here:
// the held text, what a step adds, and the call bookkeeping.
type Parser struct {
	// Format is the syntax of the model's calls; the zero value is
	// FormatAuto.
	Format Format
	// Tools type the parameter values of the XML formats (qwen3coder, glm):
	// a string parameter stays raw text, any other is read as JSON.
	Tools  []Tool
	IDFunc func(i int) string
	// MaxCalls > 0 ends the output after that many calls (a request with
	// parallel_tool_calls false gets one): whatever follows is dropped and
	// Done reports true, so generation can stop.
	MaxCalls int
	// Forced says the output is nothing but calls (a forced call, decoded
	// under its grammar): text left unfinished at the end is markup.
	Forced bool

	m     machine
	buf   string          // text not yet consumed
	in    strings.Builder // holds buf at its end while buf is held (see grow)
	final bool            // no more text will come
	out   Delta           // what the current Feed or Finish adds
	calls int             // calls opened and finished so far
	open  bool            // a call's name went out and the call has not ended
	done  bool
	// types are the parameter types of the tools (tool → parameter →
	// whether its value is a string), built on first use.
	types map[string]map[string]bool
}

// machine is one format's state machine. next consumes what it can of the
// parser's held text and reports whether it moved (consumed text or changed
// state); the parser calls it until it does not. cut runs once at the end,
// after next has drained with final set, to end what is left unfinished
// (a call cut short, held markup).
type machine interface {
	next(p *Parser) bool
	cut(p *Parser)
}

// Feed consumes the next piece of output.
func (p *Parser) Feed(s string) Delta {
	if p.done {
		return Delta{}
	}
	p.grow(s)
	p.run()
	return p.take()
}

// grow appends s to the held text in amortized constant time a byte: a
// body held until its closing marker (up to the whole output) must not
// be copied at every piece. While buf is the builder's tail, s is
// appended in place; otherwise (a machine replaced buf) buf is copied in
// once. The consumed text before buf is let go once it outweighs buf.
func (p *Parser) grow(s string) {
	all := p.in.String()
	view := len(p.buf) > 0 && len(p.buf) <= len(all) && unsafe.StringData(p.buf) == unsafe.StringData(all[len(all)-len(p.buf):])
	if !view || len(all) > 2*len(p.buf)+4096 {
		p.in = strings.Builder{}
		p.in.WriteString(p.buf)
	}
	n := len(p.buf) + len(s)
	p.in.WriteString(s)
	all = p.in.String()
	p.buf = all[len(all)-n:]
}

// Finish flushes what is held. A call cut short never leaves its markup in
// content: cut before its name is complete it is dropped; with its name
// complete it is a call with the arguments that arrived (none, or a
// prefix: the finish reason says why). truncated reports a cut call.
func (p *Parser) Finish() (d Delta, truncated bool) {
	if p.done {
		return Delta{}, false
	}
	p.final = true
	p.run()
	if p.Forced {
		// The output is calls only: text left at the end is the start of
		// a call's markup (a partial marker, an undecided opening brace).
		p.out.Content = ""
	}
	if !p.done {
		calls := p.calls
		p.machine().cut(p)
		if p.open {
			p.endCall()
		}
		truncated = p.calls > calls
	}
	p.buf = ""
	p.done = true
	return p.take(), truncated
}

// Done reports that MaxCalls calls are complete and later output is ignored.
func (p *Parser) Done() bool { return p.done && !p.final }

// Calls is the number of calls seen so far (a streaming call counts once
// its closing marker arrives, or at Finish).
func (p *Parser) Calls() int { return p.calls }

func (p *Parser) machine() machine {
	if p.m == nil {
		p.m = p.Format.machine()
	}
	return p.m
}

func (p *Parser) run() {
	m := p.machine()
	for !p.done && m.next(p) {
	}
}

func (p *Parser) take() Delta {
	d := p.out
	p.out = Delta{}
	return d
}

// content emits answer text.
func (p *Parser) content(s string) { p.out.Content += s }

// reasoning emits reasoning text.
func (p *Parser) reasoning(s string) { p.out.Reasoning += s }

// startCall emits a call's first fragment: its index, id and name.
func (p *Parser) startCall(name string) {
	p.out.Calls = append(p.out.Calls, CallDelta{Index: p.calls, ID: p.id(p.calls), Type: "function", Name: name})
	p.open = true
}

// args emits a fragment of the open call's arguments.
func (p *Parser) args(s string) {
	if s != "" {
		p.out.Calls = append(p.out.Calls, CallDelta{Index: p.calls, Arguments: s})
	}
}

// endCall counts the open call; after MaxCalls calls the output is done.
func (p *Parser) endCall() {
	p.open = false
	p.calls++
	if p.MaxCalls > 0 && p.calls >= p.MaxCalls {
		p.done = true
		p.buf = ""
	}
}

// call emits a whole call at once.
func (p *Parser) call(name, args string) {
	p.startCall(name)
	p.args(args)
	p.endCall()
}

// id names call i (empty without IDFunc).
func (p *Parser) id(i int) string {
	if p.IDFunc == nil {
		return ""
	}
	return p.IDFunc(i)
}

// consume drops the first n bytes of the held text.
func (p *Parser) consume(n int) { p.buf = p.buf[n:] }

// upTo finds the earliest of markers in the held text. Found, it returns
// the text before it and which marker, consuming both. Otherwise it
// returns (and consumes) all the text that cannot begin a marker, which at
// the end is all of it, with which -1.
func (p *Parser) upTo(markers ...string) (text string, which int) {
	at, which := -1, -1
	for k, m := range markers {
		if i := strings.Index(p.buf, m); i >= 0 && (at < 0 || i < at) {
			at, which = i, k
		}
	}
	if which >= 0 {
		text = p.buf[:at]
		p.buf = p.buf[at+len(markers[which]):]
		return text, which
	}
	keep := 0
	if !p.final {
		for _, m := range markers {
			keep = max(keep, heldPrefix(p.buf, m))
		}
	}
	text = p.buf[:len(p.buf)-keep]
	p.buf = p.buf[len(p.buf)-keep:]
	return text, -1
}

// prefix tells whether the held text, after leading whitespace, begins
// with one of markers: which marker (consumed with the whitespace), or -1
// when it cannot; decided is false while the text is still a prefix of one
// and more may come.
func (p *Parser) prefix(markers ...string) (which int, decided bool) {
	t := strings.TrimLeft(p.buf, " \t\r\n")
	for k, m := range markers {
		if strings.HasPrefix(t, m) {
			p.buf = t[len(m):]
			return k, true
		}
	}
	if p.final {
		return -1, true
	}
	for _, m := range markers {
		if strings.HasPrefix(m, t) {
			return -1, false
		}
	}
	return -1, true
}

// heldPrefix is the length of the longest suffix of s that is a proper
// prefix of marker.
func heldPrefix(s, marker string) int {
	for n := min(len(s), len(marker)-1); n > 0; n-- {
		if strings.HasSuffix(s, marker[:n]) {
			return n
		}
	}
	return 0
}

// layout holds the whitespace after a call: dropped when another call or
// the end follows it, content with the text when text does.
type layout struct{ after bool }

// jsonScan follows one JSON value through its text: depth, strings, escapes.
type jsonScan struct {
	depth         int
	inString, esc bool
}

// scan consumes s up to the end of the object (n bytes, done) or all of it.
func (j *jsonScan) scan(s string) (n int, done bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case j.esc:
			j.esc = false
		case j.inString:
			switch c {
			case '\\':
				j.esc = true
			case '"':
				j.inString = false
			}
		case c == '"':
			j.inString = true
		case c == '{' || c == '[':
			j.depth++
		case c == '}' || c == ']':
			j.depth--
			if j.depth <= 0 {
				return i + 1, true
			}
		}
	}
	return len(s), false
}

// jsonArgs streams a call's JSON arguments object from the held text as
// it arrives: the object's text goes out as it is, up to its closing brace.
type jsonArgs struct {
	scan    jsonScan
	started bool
}

// feed reports whether it consumed text, whether the object is complete,
// and, before any of it went out, whether the arguments are not an object
// at all (bad: nothing is consumed, the format reads them otherwise).
func (a *jsonArgs) feed(p *Parser) (moved, done, bad bool) {
	if !a.started {
		t := strings.TrimLeft(p.buf, " \t\r\n")
		if t == "" {
			return false, false, p.final
		}
		if t[0] != '{' {
			return false, false, true
		}
		p.buf, a.started = t, true
	}
	n, done := a.scan.scan(p.buf)
	p.args(p.buf[:n])
	p.consume(n)
	return n > 0, done, false
}

// ParseCall reads {"name": …, "arguments": {…}} (or "parameters", as
// Llama 3.1 writes) and returns the arguments as canonical JSON text.
func ParseCall(body string) (name, args string, ok bool) {
	var c struct {
		Name       string          `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
		Parameters json.RawMessage `json:"parameters"`
	}
	if err := json.Unmarshal([]byte(body), &c); err != nil || c.Name == "" {
		return "", "", false
	}
	raw := c.Arguments
	if raw == nil {
		raw = c.Parameters
	}
	if len(raw) > 0 && raw[0] == '"' { // arguments sent as a JSON string
		var s string
		if json.Unmarshal(raw, &s) == nil {
			raw = json.RawMessage(s)
		}
	}
	a, err := CanonicalJSON(raw)
	if err != nil {
		return "", "", false
	}
	return c.Name, a, true
}

// text emits content up to the earliest of markers, under the layout rule
// after a call. It returns which marker it reached (consumed), or -1, and
// whether it moved.
func (p *Parser) text(l *layout, markers ...string) (which int, moved bool) {
	text, which := p.upTo(markers...)
	blank := l.after && strings.TrimSpace(text) == ""
	switch {
	case which >= 0:
		if !blank {
			p.content(text)
		}
		l.after = false
		return which, true
	case blank && !p.final: // whitespace after a call: known only when more comes
		p.buf = text + p.buf
		return -1, false
	case blank:
		return -1, text != ""
	}
	l.after = false
	p.content(text)
	return -1, text != ""
}
