package chat

import "strings"

// harmony reads gpt-oss's output: a sequence of messages, each a header
// then <|message|> and a body, the first right after the prompt's
// <|start|>assistant, each later one after <|start|>:
//
//	<|channel|>analysis<|message|>…<|end|>
//	<|start|>assistant to=functions.NAME<|channel|>commentary <|constrain|>json<|message|>{…}<|call|>
//	<|start|>assistant<|channel|>final<|message|>…<|return|>
//
// analysis is reasoning, a message to=functions.NAME (in the header before
// or after its channel) is a call, any other is content. <|end|>,
// <|call|> and <|return|> are control tokens that a vocabulary may not
// render: a body also ends where the next message starts. Output that
// does not open with a header is content.
type harmony struct {
	state  harmonyState
	header word
	json   jsonArgs
	layout layout
	raw    bool // the call's arguments are not a JSON object: taken as text
}

type harmonyState int

const (
	harmonyHeader    harmonyState = iota // a message's header, up to <|message|>
	harmonyReasoning                     // an analysis body
	harmonyContent                       // a final (or commentary) body
	harmonyArgs                          // a call's arguments
	harmonyAfterArgs                     // after the arguments: drop to the message's end
	harmonyBetween                       // after a message: the next one's start
)

const (
	harmonyStart     = "<|start|>"
	harmonyMessage   = "<|message|>"
	harmonyConstrain = "<|constrain|>"
	harmonyEnd       = "<|end|>"
	harmonyCall      = "<|call|>"
	harmonyReturn    = "<|return|>"
)

// harmonyEnds end a body: the first three close it, the last two begin
// the next message.
var harmonyEnds = []string{harmonyEnd, harmonyCall, harmonyReturn, harmonyStart, harmonyChannel}

// headerOpenings are how a header may begin.
var headerOpenings = []string{harmonyChannel, "to=", "assistant", harmonyConstrain}

func (h *harmony) next(p *Parser) bool {
	n := len(p.buf)
	switch h.state {
	case harmonyHeader:
		if h.header.pending() == "" {
			switch isHeader(p.buf) {
			case undecided:
				if p.final { // cut inside the header's first word: markup
					p.buf = ""
				}
				return false
			case notBare:
				h.state = harmonyContent
				return true
			}
		}
		head, which, long := h.header.until(p, harmonyMessage)
		switch {
		case long: // not a header after all
			p.content(head)
			h.state = harmonyContent
			return true
		case which < 0:
			return len(p.buf) != n
		}
		channel, recipient := parseHeader(head)
		switch {
		case strings.TrimPrefix(recipient, "functions.") != "" && recipient != "assistant":
			p.startCall(strings.TrimPrefix(recipient, "functions."))
			h.state, h.json, h.raw = harmonyArgs, jsonArgs{}, false
		case channel == "analysis":
			h.state = harmonyReasoning
		default:
			h.state = harmonyContent
		}
		return true
	case harmonyReasoning, harmonyContent:
		text, which := p.upTo(harmonyEnds...)
		if h.state == harmonyReasoning {
			p.reasoning(text)
		} else {
			p.content(text)
		}
		if which >= 0 {
			h.ended(p, which)
		}
		return which >= 0 || text != ""
	case harmonyArgs:
		if h.raw {
			text, which := p.upTo(harmonyEnds...)
			p.args(text)
			if which >= 0 {
				p.endCall()
				h.ended(p, which)
			}
			return which >= 0 || text != ""
		}
		moved, done, bad := h.json.feed(p)
		switch {
		case bad:
			h.raw = true
			return true
		case done:
			h.state = harmonyAfterArgs
		}
		return moved || done
	case harmonyAfterArgs:
		_, which := p.upTo(harmonyEnds...)
		if which < 0 {
			return len(p.buf) != n
		}
		p.endCall()
		h.ended(p, which)
		return true
	case harmonyBetween:
		which, moved := p.text(&h.layout, harmonyStart, harmonyChannel)
		if which >= 0 {
			h.ended(p, which+3)
		}
		return moved
	}
	return false
}

// ended moves past the end of a body, ended by harmonyEnds[which].
func (h *harmony) ended(p *Parser, which int) {
	switch harmonyEnds[which] {
	case harmonyChannel: // the next header, without its <|start|>
		p.buf = harmonyChannel + p.buf
		h.state = harmonyHeader
	case harmonyStart:
		h.state = harmonyHeader
	default:
		h.state, h.layout.after = harmonyBetween, true
	}
}

// isHeader tells whether text opens a message header.
func isHeader(s string) bareShape {
	t := strings.TrimLeft(s, " \t\r\n")
	for _, o := range headerOpenings {
		switch {
		case strings.HasPrefix(t, o):
			return isBare
		case strings.HasPrefix(o, t):
			return undecided
		}
	}
	return notBare
}

// parseHeader reads a header's channel and recipient (to=…).
func parseHeader(head string) (channel, recipient string) {
	field := func(after string) string {
		i := strings.Index(head, after)
		if i < 0 {
			return ""
		}
		rest := head[i+len(after):]
		if j := strings.IndexAny(rest, " \t\n<"); j >= 0 {
			rest = rest[:j]
		}
		return rest
	}
	return field(harmonyChannel), field("to=")
}

func (h *harmony) cut(*Parser) {}
