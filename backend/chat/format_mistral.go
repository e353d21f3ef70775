package chat

import "strings"

// mistral reads Mistral's calls: [TOOL_CALLS]NAME[ARGS]{…} (Devstral,
// Ministral 3), with [CALL_ID]ID before [ARGS] (Mistral Small 3.2), one
// after another; or the older [TOOL_CALLS][{"name": …, "arguments": …}, …],
// which is also read as the whole reply when [TOOL_CALLS] is a control
// token that the output does not show.
type mistral struct {
	state  mistralState
	layout layout
	name   word
	json   jsonArgs
	list   list
	raw    bool // the arguments are not a JSON object: taken as text
}

type mistralState int

const (
	mistralStart     mistralState = iota // undecided: a bare list, or text
	mistralText                          // content, up to [TOOL_CALLS]
	mistralOpen                          // after [TOOL_CALLS]: a name, or a list
	mistralName                          // the name, up to [ARGS] or [CALL_ID]
	mistralID                            // the call's id, up to [ARGS]
	mistralArguments                     // the arguments
	mistralList                          // a list of calls, parsed at the end
)

const (
	mistralCalls  = "[TOOL_CALLS]"
	mistralArgs   = "[ARGS]"
	mistralCallID = "[CALL_ID]"
)

func (m *mistral) next(p *Parser) bool {
	n := len(p.buf)
	switch m.state {
	case mistralStart:
		switch bareKind(p.buf) {
		case undecided:
			if !p.final {
				return false
			}
			m.state = mistralText
			cutOpening(p)
		case isList:
			m.state = mistralList
		default:
			m.state = mistralText
		}
		return true
	case mistralText:
		which, moved := p.text(&m.layout, mistralCalls)
		if which >= 0 {
			m.state = mistralOpen
		}
		return moved
	case mistralOpen:
		t := strings.TrimLeft(p.buf, " \t\r\n")
		switch {
		case t == "" && !p.final:
			return false
		case strings.HasPrefix(t, "["):
			m.state = mistralList
		default:
			m.state = mistralName
		}
		return true
	case mistralName:
		name, which, long := m.name.until(p, mistralArgs, mistralCallID)
		switch {
		case long || strings.TrimSpace(name) == "" && which >= 0:
			p.content(mistralCalls + name + []string{"", mistralArgs, mistralCallID}[which+1])
			m.state = mistralText
			return true
		case which < 0:
			return len(p.buf) != n
		}
		p.startCall(strings.TrimSpace(name))
		m.json, m.raw = jsonArgs{}, false
		m.state = mistralArguments
		if which == 1 {
			m.state = mistralID
		}
		return true
	case mistralID:
		if _, which := p.upTo(mistralArgs); which < 0 {
			return len(p.buf) != n
		}
		m.state = mistralArguments
		return true
	case mistralArguments:
		if m.raw {
			text, which := p.upTo(mistralCalls)
			p.args(text)
			if which >= 0 {
				p.endCall()
				m.state = mistralOpen
			}
			return which >= 0 || text != ""
		}
		moved, done, bad := m.json.feed(p)
		switch {
		case bad:
			m.raw = true
			return true
		case done:
			p.endCall()
			m.state, m.layout.after = mistralText, true
		}
		return moved || done
	case mistralList:
		return m.list.next(p)
	}
	return false
}

func (m *mistral) cut(*Parser) {}
