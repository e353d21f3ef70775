package chat

import (
	"encoding/json"
	"strings"
)

// Delta is what one piece of model output adds: content text and/or
// tool-call events.
type Delta struct {
	Content string
	Calls   []CallDelta
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
// Feeding the output in any split yields the same content and calls.
type Parser struct {
	buf    strings.Builder // held text
	inCall bool
	calls  int
	IDFunc func(i int) string
}

// Feed consumes the next piece of output.
func (p *Parser) Feed(s string) Delta {
	p.buf.WriteString(s)
	return p.drain(false)
}

// Finish flushes what is held. An unterminated call is returned as content
// so that nothing is lost; truncated reports whether that happened.
func (p *Parser) Finish() (d Delta, truncated bool) {
	d = p.drain(true)
	if p.inCall {
		d.Content += ToolCallOpen + p.buf.String()
		p.buf.Reset()
		p.inCall = false
		truncated = true
	}
	return d, truncated
}

// Calls is the number of complete calls seen so far.
func (p *Parser) Calls() int { return p.calls }

func (p *Parser) drain(final bool) Delta {
	var d Delta
	for {
		s := p.buf.String()
		if !p.inCall {
			i := strings.Index(s, ToolCallOpen)
			if i >= 0 {
				d.Content += s[:i]
				p.reset(s[i+len(ToolCallOpen):])
				p.inCall = true
				continue
			}
			keep := 0
			if !final {
				keep = heldPrefix(s, ToolCallOpen)
			}
			d.Content += s[:len(s)-keep]
			p.reset(s[len(s)-keep:])
			return d
		}
		j := strings.Index(s, ToolCallClose)
		if j < 0 {
			return d
		}
		body := strings.TrimSpace(s[:j])
		p.reset(s[j+len(ToolCallClose):])
		p.inCall = false
		name, args, ok := ParseCall(body)
		if !ok {
			d.Content += ToolCallOpen + s[:j+len(ToolCallClose)]
			continue
		}
		id := ""
		if p.IDFunc != nil {
			id = p.IDFunc(p.calls)
		}
		d.Calls = append(d.Calls,
			CallDelta{Index: p.calls, ID: id, Type: "function", Name: name},
			CallDelta{Index: p.calls, Arguments: args})
		p.calls++
	}
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
