package chat

import (
	"bytes"
	"encoding/json"
	"strings"

	"jspark/backend/grammar"
)

// The XML formats (qwen3coder, glm) write each parameter's value as text:
// a string as it is, anything else as JSON. xmlArgs turns them into the
// call's JSON arguments, streamed: a string value goes out escaped as it
// arrives, any other value once complete.
type xmlArgs struct {
	tool    string
	members int
	str     bool         // the value being read is a string
	held    bytes.Buffer // a non-string value, until its end
}

// begin opens the arguments object of a call to tool.
func (x *xmlArgs) begin(p *Parser, tool string) {
	*x = xmlArgs{tool: tool}
	p.args("{")
}

// key starts member k, typed by the tool's schema.
func (x *xmlArgs) key(p *Parser, k string) {
	sep := ""
	if x.members > 0 {
		sep = ","
	}
	x.members++
	x.str = p.stringParam(x.tool, k)
	x.held.Reset()
	q := `"` + escapeJSON(k) + `":`
	if x.str {
		q += `"`
	}
	p.args(sep + q)
}

// value adds text to the value being read.
func (x *xmlArgs) value(p *Parser, s string) {
	if x.str {
		p.args(escapeJSON(s))
	} else {
		x.held.WriteString(s)
	}
}

// endValue closes the value: a string's quote, or the held value as JSON
// when it is JSON, else as a string.
func (x *xmlArgs) endValue(p *Parser) {
	if x.str {
		p.args(`"`)
		return
	}
	v := bytes.TrimSpace(x.held.Bytes())
	var out bytes.Buffer
	if json.Valid(v) && json.Compact(&out, v) == nil {
		p.args(out.String())
	} else {
		p.args(`"` + escapeJSON(x.held.String()) + `"`)
	}
	x.held.Reset()
}

// end closes the arguments object.
func (x *xmlArgs) end(p *Parser) { p.args("}") }

// escapeJSON escapes s for a JSON string byte by byte, so that escaping
// the pieces of a text and joining them is escaping the text (a piece may
// end inside a UTF-8 character).
func escapeJSON(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[c>>4])
			b.WriteByte("0123456789abcdef"[c&15])
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// stringParam reports whether the schema of tool's parameter param takes
// a string (grammar.TakesString, the rule the grammar writes them by). A
// parameter the tools do not describe is a string, as vLLM reads them.
func (p *Parser) stringParam(tool, param string) bool {
	if p.types == nil {
		p.types = map[string]map[string]bool{}
		for _, t := range p.Tools {
			var s struct {
				Properties map[string]json.RawMessage `json:"properties"`
			}
			if json.Unmarshal(t.Function.Parameters, &s) != nil {
				continue
			}
			m := map[string]bool{}
			for name, raw := range s.Properties {
				m[name] = grammar.TakesString(raw)
			}
			p.types[t.Function.Name] = m
		}
	}
	str, ok := p.types[tool][param]
	return str || !ok
}

// maxWord bounds a name or key read between markers: past it the markup
// is not a call.
const maxWord = 256

// word gathers a name or key across pieces of output, up to a marker.
type word struct{ b strings.Builder }

// until reads up to the earliest of markers: the word and which marker
// (consumed), or -1 while it goes on; long reports a word past maxWord.
func (w *word) until(p *Parser, markers ...string) (s string, which int, long bool) {
	text, which := p.upTo(markers...)
	w.b.WriteString(text)
	if w.b.Len() > maxWord {
		s = w.b.String()
		w.b.Reset()
		return s, -1, true
	}
	if which < 0 {
		return "", -1, false
	}
	s = w.b.String()
	w.b.Reset()
	return s, which, false
}

// pending is what the word holds so far.
func (w *word) pending() string { return w.b.String() }
