package chat

import "strings"

// glm reads GLM-4.5/4.6/4.7's calls:
//
//	<tool_call>NAME
//	<arg_key>K</arg_key>
//	<arg_value>V</arg_value>
//	</tool_call>
//
// with or without the newlines (4.7 writes none). A value's type comes
// from the tool's schema (see xmlArgs).
type glm struct {
	state  glmState
	layout layout
	word   word
	args   xmlArgs
}

type glmState int

const (
	glmText  glmState = iota // content, up to <tool_call>
	glmName                  // the function's name, up to a newline, <arg_key> or </tool_call>
	glmArgs                  // between arguments: <arg_key> or </tool_call>
	glmKey                   // a key, up to </arg_key>
	glmGap                   // between a key and its value: up to <arg_value>
	glmValue                 // a value, up to </arg_value>
)

const (
	glmKeyOpen    = "<arg_key>"
	glmKeyClose   = "</arg_key>"
	glmValueOpen  = "<arg_value>"
	glmValueClose = "</arg_value>"
)

func (g *glm) next(p *Parser) bool {
	n := len(p.buf)
	switch g.state {
	case glmText:
		which, moved := p.text(&g.layout, ToolCallOpen)
		if which >= 0 {
			g.state = glmName
		}
		return moved
	case glmName:
		if g.word.pending() == "" { // the name starts at its first non-space byte
			p.buf = strings.TrimLeft(p.buf, " \t\r\n")
		}
		name, which, long := g.word.until(p, "\n", glmKeyOpen, ToolCallClose)
		switch {
		case long:
			p.content(ToolCallOpen + name)
			g.state = glmText
			return true
		case which < 0:
			return len(p.buf) != n
		case strings.TrimSpace(name) == "" && which > 0: // no name: not a call
			p.content(ToolCallOpen + []string{"\n", glmKeyOpen, ToolCallClose}[which])
			g.state = glmText
			return true
		case strings.TrimSpace(name) == "":
			return true // the newline before the name
		}
		name = strings.TrimSpace(name)
		p.startCall(name)
		g.args.begin(p, name)
		switch which {
		case 0:
			g.state = glmArgs
		case 1:
			g.state = glmKey
		case 2:
			g.end(p)
		}
		return true
	case glmArgs:
		_, which := p.upTo(glmKeyOpen, ToolCallClose)
		switch which {
		case 0:
			g.state = glmKey
		case 1:
			g.end(p)
		}
		return which >= 0 || len(p.buf) != n
	case glmKey:
		key, which, long := g.word.until(p, glmKeyClose)
		if which < 0 && !long {
			return len(p.buf) != n
		}
		g.args.key(p, strings.TrimSpace(key))
		g.state = glmGap
		return true
	case glmGap:
		_, which := p.upTo(glmValueOpen, ToolCallClose)
		switch which {
		case 0:
			g.state = glmValue
		case 1: // a key without a value
			g.args.endValue(p)
			g.end(p)
		}
		return which >= 0 || len(p.buf) != n
	case glmValue:
		text, which := p.upTo(glmValueClose)
		if which < 0 && p.final { // cut: a piece of the closing tag is markup
			text = text[:len(text)-heldPrefix(text, glmValueClose)]
		}
		g.args.value(p, text)
		if which >= 0 {
			g.args.endValue(p)
			g.state = glmArgs
			return true
		}
		return text != ""
	}
	return false
}

func (g *glm) end(p *Parser) {
	g.args.end(p)
	p.endCall()
	g.state, g.layout.after = glmText, true
}

func (g *glm) cut(*Parser) {}
