package chat

import (
	"encoding/json"
	"regexp"
	"strings"
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

// Parser splits streamed model output into content and tool calls. Text
// that may be the start of a call marker is held back until it is known.
// A call written name first ({"name": "x", "arguments": {…}}, the shape every
// supported template and the constrained grammar produce) streams as OpenAI
// streams it: the name as soon as it is decoded, then the arguments' JSON text
// fragment by fragment. Any other body waits for the closing marker and is
// parsed whole. Feeding the output in any split yields the same content, and
// calls whose fragments concatenate to the same text.
type Parser struct {
	buf    strings.Builder // held text
	inCall bool
	calls  int
	IDFunc func(i int) string
	// MaxCalls > 0 ends the output after that many calls (a request with
	// parallel_tool_calls false gets one): whatever follows is dropped and
	// Done reports true, so generation can stop.
	MaxCalls int
	// Forced says the output is nothing but calls (a forced call, decoded
	// under its grammar): text left unfinished at the end is markup.
	Forced bool
	done   bool

	// A streaming call: its arguments are being emitted (args) or are
	// complete and the rest up to the closing marker is dropped (argsDone).
	streaming, argsDone bool
	json                jsonScan

	// A reply that is nothing but a call object ({"name": …, "parameters":
	// …}, as Llama 3.1 answers; its <|python_tag|> is a control token and not
	// text) is a call that ends with the output (bare).
	started, bare, truncated bool
	list                     bool // the bare reply is a list of calls ([{"name": …}, …], Mistral's form), parsed at the end
}

// Feed consumes the next piece of output.
func (p *Parser) Feed(s string) Delta {
	if p.done {
		return Delta{}
	}
	p.buf.WriteString(s)
	return p.drain(false)
}

// Done reports that MaxCalls calls are complete and later output is ignored.
func (p *Parser) Done() bool { return p.done }

// callEnded counts a completed call and reports whether that was the last
// one allowed.
func (p *Parser) callEnded() bool {
	p.calls++
	if p.MaxCalls > 0 && p.calls >= p.MaxCalls {
		p.done = true
		p.reset("")
		p.inCall, p.streaming, p.argsDone, p.bare, p.list = false, false, false, false, false
	}
	return p.done
}

// Finish flushes what is held. A call cut short never leaves its markup in
// content: cut before its name is complete it is dropped; with its name
// complete it is a call with the arguments that arrived (none, or a
// prefix: the finish reason says why). truncated reports a cut call.
func (p *Parser) Finish() (d Delta, truncated bool) {
	if p.done {
		return Delta{}, false
	}
	if p.inCall && !p.streaming && !p.list && (!p.bare || p.Forced) {
		body := strings.TrimSpace(p.buf.String())
		if name, args, ok := ParseCall(body); ok { // complete, only its closing marker missing
			d.Calls = append(d.Calls, CallDelta{Index: p.calls, ID: p.id(p.calls), Type: "function", Name: name},
				CallDelta{Index: p.calls, Arguments: args})
			p.calls++
		} else if m := nameOnly.FindStringSubmatch(body); m != nil {
			d.Calls = append(d.Calls, CallDelta{Index: p.calls, ID: p.id(p.calls), Type: "function", Name: m[1]})
			p.calls++
		}
		p.reset("")
		p.inCall, p.bare = false, false
		return d, true
	}
	d = p.drain(true)
	if p.Forced {
		// The output is calls only: text left at the end is the start of
		// a call's markup (a partial marker, an undecided opening brace).
		d.Content = ""
	}
	if p.truncated {
		return d, true
	}
	if p.inCall { // a streaming call cut in its arguments
		p.calls++
		p.buf.Reset()
		p.inCall, p.streaming, p.argsDone = false, false, false
		truncated = true
	}
	return d, truncated
}

// Calls is the number of calls seen so far (a streaming call counts once
// its closing marker arrives, or at Finish).
func (p *Parser) Calls() int { return p.calls }

// nameFirst matches the start of a name-first call body up to the opening
// brace of its arguments.
var nameFirst = regexp.MustCompile(`^\s*\{\s*"name"\s*:\s*"([^"\\]+)"\s*,\s*"(?:arguments|parameters)"\s*:\s*\{`)

// nameOnly matches a call body whose name is complete (its closing quote
// arrived) and whose arguments have not begun.
var nameOnly = regexp.MustCompile(`^\{\s*"name"\s*:\s*"([^"\\]+)"`)

func (p *Parser) drain(final bool) Delta {
	var d Delta
	for {
		s := p.buf.String()
		if !p.inCall && !p.started {
			switch bareStart(s) {
			case undecided:
				if !final {
					return d
				}
			case isBare:
				p.inCall, p.bare, p.started = true, true, true
				continue
			case isList:
				p.inCall, p.bare, p.list, p.started = true, true, true, true
				continue
			}
			p.started = strings.TrimSpace(s) != ""
		}
		if !p.inCall {
			// Whitespace after a call (the newline between two calls, or
			// before the end) is layout, not content: it waits until text
			// follows it, and is dropped when a call or the end does.
			layout := func(t string) bool { return p.calls > 0 && strings.TrimSpace(t) == "" }
			i := strings.Index(s, ToolCallOpen)
			if i >= 0 {
				if !layout(s[:i]) {
					d.Content += s[:i]
				}
				p.reset(s[i+len(ToolCallOpen):])
				p.inCall, p.started = true, true
				continue
			}
			keep := 0
			if !final {
				keep = heldPrefix(s, ToolCallOpen)
			}
			switch text := s[:len(s)-keep]; {
			case layout(text) && final:
				p.reset("")
			case layout(text):
				p.reset(s)
			default:
				d.Content += text
				p.reset(s[len(s)-keep:])
			}
			return d
		}
		if !p.streaming && !p.list {
			if m := nameFirst.FindStringSubmatchIndex(s); m != nil {
				d.Calls = append(d.Calls, CallDelta{Index: p.calls, ID: p.id(p.calls), Type: "function", Name: s[m[2]:m[3]]})
				p.streaming, p.json = true, jsonScan{}
				p.reset(s[m[1]-1:]) // from the arguments' opening brace
				continue
			}
		}
		if p.streaming && !p.argsDone {
			n, done := p.json.scan(s)
			if n > 0 {
				d.Calls = append(d.Calls, CallDelta{Index: p.calls, Arguments: s[:n]})
			}
			p.reset(s[n:])
			if !done {
				return d
			}
			p.argsDone = true
			continue
		}
		if p.bare {
			return p.endBare(d, s, final)
		}
		j := strings.Index(s, ToolCallClose)
		if j < 0 {
			if p.argsDone { // what follows the arguments is the call's own "}": drop all but a possible marker start
				p.reset(s[len(s)-heldPrefix(s, ToolCallClose):])
			}
			return d
		}
		body := strings.TrimSpace(s[:j])
		p.reset(s[j+len(ToolCallClose):])
		p.inCall = false
		if p.streaming {
			p.streaming, p.argsDone = false, false
			if p.callEnded() {
				return d
			}
			continue
		}
		name, args, ok := ParseCall(body)
		if !ok {
			d.Content += ToolCallOpen + s[:j+len(ToolCallClose)]
			continue
		}
		d.Calls = append(d.Calls,
			CallDelta{Index: p.calls, ID: p.id(p.calls), Type: "function", Name: name},
			CallDelta{Index: p.calls, Arguments: args})
		if p.callEnded() {
			return d
		}
	}
}

// id names call i (empty without IDFunc).
func (p *Parser) id(i int) string {
	if p.IDFunc == nil {
		return ""
	}
	return p.IDFunc(i)
}

// endBare handles a bare call, which closes only with the output.
func (p *Parser) endBare(d Delta, s string, final bool) Delta {
	if p.argsDone {
		p.reset("") // the object's own closing brace and any trailing space
	}
	if !final {
		return d
	}
	p.reset("")
	p.inCall, p.bare = false, false
	if p.streaming {
		p.truncated = !p.argsDone
		p.streaming, p.argsDone = false, false
		p.calls++
		return d
	}
	bodies := []string{strings.TrimSpace(s)}
	if p.list {
		p.list = false
		var items []json.RawMessage
		if json.Unmarshal([]byte(s), &items) != nil || len(items) == 0 {
			d.Content += s
			return d
		}
		bodies = bodies[:0]
		for _, it := range items {
			bodies = append(bodies, string(it))
		}
		if p.MaxCalls > 0 && len(bodies) > p.MaxCalls-p.calls {
			bodies = bodies[:p.MaxCalls-p.calls]
		}
	}
	var calls []CallDelta
	for i, b := range bodies {
		name, args, ok := ParseCall(b)
		if !ok {
			d.Content += s // one bad element: the reply is text, as a whole
			return d
		}
		calls = append(calls, CallDelta{Index: p.calls + i, ID: p.id(p.calls + i), Type: "function", Name: name}, CallDelta{Index: p.calls + i, Arguments: args})
	}
	d.Calls = append(d.Calls, calls...)
	p.calls += len(bodies)
	return d
}

type bareState int

const (
	notBare bareState = iota
	undecided
	isBare
	isList
)

// bareStart tells from the output's beginning whether it opens a bare call
// object (`{` then `"name"`) or a list of them (`[` first), whitespace
// allowed around.
func bareStart(s string) bareState {
	t := strings.TrimLeft(s, " \t\r\n")
	if t == "" {
		return undecided
	}
	found := isBare
	if t[0] == '[' {
		found = isList
		if t = strings.TrimLeft(t[1:], " \t\r\n"); t == "" {
			return undecided
		}
	}
	if t[0] != '{' {
		return notBare
	}
	rest := strings.TrimLeft(t[1:], " \t\r\n")
	switch {
	case strings.HasPrefix(rest, `"name"`):
		return found
	case strings.HasPrefix(`"name"`, rest):
		return undecided
	}
	return notBare
}

// jsonScan follows one JSON object through its text: depth, strings, escapes.
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
			if j.depth == 0 {
				return i + 1, true
			}
		}
	}
	return len(s), false
}

func (p *Parser) reset(s string) {
	p.buf.Reset()
	p.buf.WriteString(s)
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
