package chat

import "strings"

// sectionSpec is the markup of a format that writes its calls in a
// section of marked calls, each a name and a JSON object:
//
//	BEGIN CALL name NAMEEND {…} CALLEND CALL … END
type sectionSpec struct {
	begin, call, nameEnd, callEnd, end string
	// name turns what the model writes before nameEnd into the function's
	// name.
	name func(string) string
}

func (s sectionSpec) markers() []string {
	return []string{s.begin, s.call, s.nameEnd, s.callEnd, s.end}
}

// kimiSpec is Kimi-K2's: the name is written functions.NAME:INDEX.
var kimiSpec = sectionSpec{
	begin: "<|tool_calls_section_begin|>", call: "<|tool_call_begin|>", nameEnd: "<|tool_call_argument_begin|>",
	callEnd: "<|tool_call_end|>", end: "<|tool_calls_section_end|>",
	name: func(s string) string {
		s = strings.TrimPrefix(strings.TrimSpace(s), "functions.")
		if i := strings.LastIndexByte(s, ':'); i >= 0 {
			s = s[:i]
		}
		return s
	},
}

// deepseekSpec is DeepSeek V3.1's.
var deepseekSpec = sectionSpec{
	begin: "<｜tool▁calls▁begin｜>", call: "<｜tool▁call▁begin｜>", nameEnd: "<｜tool▁sep｜>",
	callEnd: "<｜tool▁call▁end｜>", end: "<｜tool▁calls▁end｜>",
	name: strings.TrimSpace,
}

// section reads a sectionSpec's calls. A call marker outside a section
// opens one (models skip the section's marker at times).
type section struct {
	spec   sectionSpec
	state  sectionState
	layout layout
	name   word
	json   jsonArgs
	raw    bool // the arguments are not a JSON object: taken as text
}

type sectionState int

const (
	sectionText  sectionState = iota // content, up to the section or a call
	sectionIn                        // in the section: a call, or its end
	sectionName                      // a call's name, up to nameEnd
	sectionArgs                      // its arguments
	sectionAfter                     // after them: drop up to callEnd
)

func (s *section) next(p *Parser) bool {
	n := len(p.buf)
	switch s.state {
	case sectionText:
		which, moved := p.text(&s.layout, s.spec.begin, s.spec.call)
		switch which {
		case 0:
			s.state = sectionIn
		case 1:
			s.state = sectionName
		}
		return moved
	case sectionIn:
		_, which := p.upTo(s.spec.call, s.spec.end)
		switch which {
		case 0:
			s.state = sectionName
		case 1:
			s.state, s.layout.after = sectionText, true
		}
		return which >= 0 || len(p.buf) != n
	case sectionName:
		name, which, long := s.name.until(p, s.spec.nameEnd)
		switch {
		case long || s.spec.name(name) == "" && which >= 0:
			if which >= 0 {
				name += s.spec.nameEnd
			}
			p.content(s.spec.call + name)
			s.state = sectionText
			return true
		case which < 0:
			return len(p.buf) != n
		}
		p.startCall(s.spec.name(name))
		s.state, s.json, s.raw = sectionArgs, jsonArgs{}, false
		return true
	case sectionArgs:
		if s.raw {
			text, which := p.upTo(s.spec.callEnd)
			p.args(text)
			if which >= 0 {
				p.endCall()
				s.state = sectionIn
			}
			return which >= 0 || text != ""
		}
		moved, done, bad := s.json.feed(p)
		switch {
		case bad:
			s.raw = true
			return true
		case done:
			s.state = sectionAfter
		}
		return moved || done
	case sectionAfter:
		if _, which := p.upTo(s.spec.callEnd); which < 0 {
			return len(p.buf) != n
		}
		p.endCall()
		s.state = sectionIn
		return true
	}
	return false
}

func (s *section) cut(*Parser) {}
