package chat

import (
	"regexp"
	"strings"
)

// hermes reads <tool_call>{"name": …, "arguments": {…}}</tool_call>. A
// body written name first streams; any other body is parsed whole at its
// closing tag, and one that is not a call goes out as content, tags and
// all.
type hermes struct {
	state  hermesState
	layout layout
	json   jsonArgs
	// searched is how much of a held body holds no closing tag (less the
	// tag's length), so a long body is not searched again from its start.
	searched int
}

type hermesState int

const (
	hermesText  hermesState = iota // content, up to an opening tag
	hermesBody                     // after <tool_call>: name first, or held whole
	hermesArgs                     // the name went out; the arguments stream
	hermesAfter                    // the arguments are complete: drop up to </tool_call>
)

// nameFirst matches the start of a name-first call body up to the opening
// brace of its arguments.
var nameFirst = regexp.MustCompile(`^\s*\{\s*"name"\s*:\s*"([^"\\]{1,256})"\s*,\s*"(?:arguments|parameters)"\s*:\s*\{`)

// nameOnly matches a call body whose name is complete (its closing quote
// arrived) and whose arguments have not begun.
var nameOnly = regexp.MustCompile(`^\s*\{\s*"name"\s*:\s*"([^"\\]{1,256})"`)

func (h *hermes) next(p *Parser) bool {
	switch h.state {
	case hermesText:
		which, moved := p.text(&h.layout, ToolCallOpen)
		if which >= 0 {
			h.state = hermesBody
		}
		return moved
	case hermesBody:
		if m := nameFirst.FindStringSubmatchIndex(p.buf); m != nil {
			p.startCall(p.buf[m[2]:m[3]])
			p.consume(m[1] - 1) // up to the arguments' opening brace
			h.state, h.json, h.searched = hermesArgs, jsonArgs{}, 0
			return true
		}
		j := strings.Index(p.buf[h.searched:], ToolCallClose)
		if j < 0 {
			h.searched = max(0, len(p.buf)-len(ToolCallClose))
			return false
		}
		j += h.searched
		h.searched = 0
		body := p.buf[:j]
		p.consume(j + len(ToolCallClose))
		h.state = hermesText
		if name, args, ok := ParseCall(strings.TrimSpace(body)); ok {
			p.call(name, args)
			h.layout.after = true
		} else {
			p.content(ToolCallOpen + body + ToolCallClose)
		}
		return true
	case hermesArgs:
		moved, done, _ := h.json.feed(p)
		if done {
			h.state = hermesAfter
		}
		return moved || done
	case hermesAfter:
		if _, which := p.upTo(ToolCallClose); which < 0 {
			return false
		}
		p.endCall()
		h.state, h.layout.after = hermesText, true
		return true
	}
	return false
}

// cut ends a body cut before its closing tag: complete but for the tag it
// is the call; with its name complete, a call without arguments; else
// nothing. A streaming call is ended by the parser.
func (h *hermes) cut(p *Parser) {
	if h.state == hermesBody {
		cutBody(p, p.buf)
	}
}

// cutBody ends a held call body cut short (see hermes.cut).
func cutBody(p *Parser, body string) {
	body = strings.TrimSpace(body)
	if name, args, ok := ParseCall(body); ok {
		p.call(name, args)
	} else if m := nameOnly.FindStringSubmatch(body); m != nil {
		p.startCall(m[1])
	}
}
