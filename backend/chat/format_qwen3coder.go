package chat

import "strings"

// qwenXML reads Qwen3-Coder's calls:
//
//	<tool_call>
//	<function=NAME>
//	<parameter=P>
//	value
//	</parameter>
//	</function>
//	</tool_call>
//
// A value loses one newline at each edge, as the template writes them;
// its type comes from the tool's schema (see xmlArgs). A <function=…>
// block without the <tool_call> around it is read too, as vLLM reads it.
type qwenXML struct {
	state   qwenState
	layout  layout
	bare    bool // the block came without <tool_call>
	name    word
	args    xmlArgs
	leading bool // a value's first byte is due: a newline there is dropped
}

type qwenState int

const (
	qwenText   qwenState = iota // content, up to <tool_call> or <function=
	qwenOpen                    // after <tool_call>: <function= is due
	qwenName                    // the function's name, up to '>'
	qwenParams                  // between parameters: <parameter= or </function>
	qwenKey                     // a parameter's name, up to '>'
	qwenValue                   // a parameter's value, up to </parameter>
	qwenClose                   // after </function>: drop up to </tool_call>
)

const (
	qwenFunction    = "<function="
	qwenFunctionEnd = "</function>"
	qwenParam       = "<parameter="
	qwenParamEnd    = "</parameter>"
)

func (q *qwenXML) next(p *Parser) bool {
	n := len(p.buf)
	switch q.state {
	case qwenText:
		which, moved := p.text(&q.layout, ToolCallOpen, qwenFunction)
		switch which {
		case 0:
			q.state, q.bare = qwenOpen, false
		case 1:
			q.state, q.bare = qwenName, true
		}
		return moved
	case qwenOpen:
		which, decided := p.prefix(qwenFunction)
		switch {
		case !decided:
			return false
		case which < 0 && p.final && strings.HasPrefix(qwenFunction, strings.TrimSpace(p.buf)):
			p.buf = "" // cut right after the tag: markup
			return false
		case which < 0: // not a call after all: the tag is text
			p.content(ToolCallOpen)
			q.state = qwenText
			return true
		}
		q.state = qwenName
		return true
	case qwenName:
		name, which, long := q.name.until(p, ">")
		switch {
		case long:
			q.malformed(p, name)
			return true
		case which < 0:
			return len(p.buf) != n
		case strings.TrimSpace(name) == "":
			q.malformed(p, name+">")
			return true
		}
		name = strings.TrimSpace(name)
		p.startCall(name)
		q.args.begin(p, name)
		q.state = qwenParams
		return true
	case qwenParams:
		_, which := p.upTo(qwenParam, qwenFunctionEnd)
		switch which {
		case 0:
			q.state = qwenKey
		case 1:
			q.args.end(p)
			if q.bare {
				q.endCall(p)
			} else {
				q.state = qwenClose
			}
		}
		return which >= 0 || len(p.buf) != n
	case qwenKey:
		key, which, long := q.name.until(p, ">")
		switch {
		case long:
			q.args.key(p, key) // a runaway key: the value is what follows
			q.args.endValue(p)
			q.state = qwenParams
			return true
		case which < 0:
			return len(p.buf) != n
		}
		q.args.key(p, strings.TrimSpace(key))
		q.state, q.leading = qwenValue, true
		return true
	case qwenValue:
		if q.leading {
			if p.buf == "" && !p.final {
				return false
			}
			if strings.HasPrefix(p.buf, "\n") {
				p.consume(1)
			}
			q.leading = false
		}
		text, which := p.upTo(qwenParamEnd)
		if which >= 0 {
			q.args.value(p, strings.TrimSuffix(text, "\n"))
			q.args.endValue(p)
			q.state = qwenParams
			return true
		}
		if p.final { // cut: a piece of the closing tag is markup
			text = text[:len(text)-heldPrefix(text, qwenParamEnd)]
		}
		if strings.HasSuffix(text, "\n") { // perhaps the newline before </parameter>
			text = text[:len(text)-1]
			if !p.final {
				p.buf = "\n" + p.buf
			}
		}
		q.args.value(p, text)
		return text != ""
	case qwenClose:
		if _, which := p.upTo(ToolCallClose); which < 0 {
			return len(p.buf) != n
		}
		q.endCall(p)
		return true
	}
	return false
}

func (q *qwenXML) endCall(p *Parser) {
	p.endCall()
	q.state, q.layout.after = qwenText, true
}

// malformed gives back markup that turned out not to be a call, as text.
func (q *qwenXML) malformed(p *Parser, name string) {
	if !q.bare {
		p.content(ToolCallOpen)
	}
	p.content(qwenFunction + name)
	q.state = qwenText
}

// cut: a call whose name was not complete is dropped; an open one keeps
// the arguments that went out (the parser ends it).
func (q *qwenXML) cut(*Parser) {}
