package chat

import "strings"

// bare reads a reply that is nothing but one call object,
// {"name": …, "parameters": {…}}, as Llama 3.1-3.3 answer (their
// <|python_tag|> is a control token, not text). A reply that does not open
// with one is all content. A call written name first streams; after its
// arguments the rest of the reply (the object's own closing brace) is
// dropped.
type bare struct {
	state bareState
	json  jsonArgs
}

type bareState int

const (
	bareStart bareState = iota // undecided: whitespace or a prefix of {"name"
	bareText                   // not a call: everything is content
	bareBody                   // a call object: name first, or held whole
	bareArgs                   // the name went out; the arguments stream
	bareAfter                  // the call is complete: the rest is dropped
)

func (b *bare) next(p *Parser) bool {
	switch b.state {
	case bareStart:
		switch bareKind(p.buf) {
		case undecided:
			if !p.final {
				return false
			}
			b.state = bareText
			cutOpening(p)
		case isBare:
			b.state = bareBody
		default:
			b.state = bareText
		}
		return true
	case bareText:
		moved := p.buf != ""
		p.content(p.buf)
		p.buf = ""
		return moved
	case bareBody:
		if m := nameFirst.FindStringSubmatchIndex(p.buf); m != nil {
			p.startCall(p.buf[m[2]:m[3]])
			p.consume(m[1] - 1)
			b.state, b.json = bareArgs, jsonArgs{}
			return true
		}
		if !p.final {
			return false
		}
		if name, args, ok := ParseCall(strings.TrimSpace(p.buf)); ok {
			p.call(name, args)
		} else if p.Forced || !closed(p.buf) { // cut short: markup
			cutBody(p, p.buf)
		} else {
			p.content(p.buf)
		}
		p.buf = ""
		b.state = bareAfter
		return true
	case bareArgs:
		moved, done, _ := b.json.feed(p)
		if done {
			p.endCall()
			b.state = bareAfter
		}
		return moved || done
	case bareAfter:
		moved := p.buf != ""
		p.buf = ""
		return moved
	}
	return false
}

func (b *bare) cut(*Parser) {}

// list reads a reply that is a list of call objects, [{"name": …,
// "arguments": {…}}, …] (Mistral's older form, its [TOOL_CALLS] being a
// control token), parsed whole at the end. A list that is not all calls
// is content as a whole; one cut short keeps its complete calls and a
// last one cut after its name.
type list struct{ held strings.Builder }

func (l *list) next(p *Parser) bool {
	moved := p.buf != ""
	l.held.WriteString(p.buf)
	p.buf = ""
	if !p.final {
		return moved
	}
	s := l.held.String()
	l.held.Reset()
	items, rest, ok := listItems(s)
	if !ok {
		p.content(s)
		return false
	}
	type call struct{ name, args string }
	var calls []call
	for _, it := range items {
		name, args, ok := ParseCall(it)
		if !ok {
			p.content(s) // one bad element: the reply is text, as a whole
			return false
		}
		calls = append(calls, call{name, args})
	}
	for _, c := range calls {
		if !p.done {
			p.call(c.name, c.args)
		}
	}
	if !p.done && rest != "" {
		cutBody(p, rest)
	}
	return false
}

func (l *list) cut(*Parser) {}

// listItems splits a JSON list into its elements' texts. A list cut short
// gives its complete elements and the rest of the text; ok is false for
// text that is not a list, or has more after its end.
func listItems(s string) (items []string, rest string, ok bool) {
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "[") {
		return nil, "", false
	}
	t = t[1:]
	for {
		t = strings.TrimLeft(t, " \t\r\n")
		if t == "" {
			return items, "", true // cut between elements
		}
		if t[0] == ']' {
			return items, "", strings.TrimSpace(t[1:]) == "" && len(items) > 0
		}
		if len(items) > 0 {
			if t[0] != ',' {
				return nil, "", false
			}
			t = strings.TrimLeft(t[1:], " \t\r\n")
		}
		var j jsonScan
		n, done := j.scan(t)
		if !done {
			return items, t, true
		}
		items, t = append(items, t[:n]), t[n:]
	}
}

// cutOpening drops, at the end, what can only be the opening of a bare
// call cut short (`{`, `[{`, `{"na`): markup, not content.
func cutOpening(p *Parser) {
	if strings.Contains(p.buf, "{") {
		p.buf = ""
	}
}

// closed reports whether s holds a whole JSON object or list (and maybe
// more): a call body that is not closed was cut short.
func closed(s string) bool {
	var j jsonScan
	_, done := j.scan(s)
	return done
}

// auto reads what the built-in templates and unknown templates produce:
// a bare call object or list as the whole reply, else Hermes tags.
type auto struct{ m machine }

func (a *auto) next(p *Parser) bool {
	if a.m != nil {
		return a.m.next(p)
	}
	switch bareKind(p.buf) {
	case undecided:
		if !p.final {
			return false
		}
		a.m = &hermes{}
		cutOpening(p)
	case isBare:
		a.m = &bare{state: bareBody}
	case isList:
		a.m = &list{}
	default:
		a.m = &hermes{}
	}
	return true
}

func (a *auto) cut(p *Parser) {
	if a.m != nil {
		a.m.cut(p)
	}
}

type bareShape int

const (
	notBare bareShape = iota
	undecided
	isBare
	isList
)

// bareKind tells from the output's beginning whether it opens a bare call
// object (`{` then `"name"`) or a list of them (`[` first), whitespace
// allowed around.
func bareKind(s string) bareShape {
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
