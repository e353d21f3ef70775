// Package jinja renders the Jinja2 chat templates that GGUF files carry
// (tokenizer.chat_template), with the settings Hugging Face's
// apply_chat_template uses: trim_blocks, lstrip_blocks, loop controls, and
// a tojson that writes what Python's json.dumps writes. It covers the
// language those templates use (statements if/for/set/macro/call/filter/
// break/continue/raw/generation, Python-like expressions, the common
// filters, tests and str/dict/list methods); a template using anything
// else fails to compile with its line, so a caller can fall back.
//
// A template is untrusted code (a GGUF from anywhere carries its own): a
// render spends one budget (budget.go) on everything it builds, every step
// it takes and every level it nests, and a template that runs out fails
// with an error for that render, never the process.
package jinja

import (
	"fmt"
	"strings"
)

type tokKind int

const (
	tEOF tokKind = iota
	tText
	tVarBegin   // {{
	tVarEnd     // }}
	tBlockBegin // {%
	tBlockEnd   // %}
	tName
	tString
	tInt
	tFloat
	tOp
)

type token struct {
	kind tokKind
	val  string
	line int
}

func (t token) String() string {
	switch t.kind {
	case tEOF:
		return "end of template"
	case tText:
		return "text"
	case tVarBegin:
		return "'{{'"
	case tVarEnd:
		return "'}}'"
	case tBlockBegin:
		return "'{%'"
	case tBlockEnd:
		return "'%}'"
	case tString:
		return fmt.Sprintf("string %q", t.val)
	}
	return fmt.Sprintf("'%s'", t.val)
}

// Error is a compile or render error with its template line.
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

func errorf(line int, format string, args ...any) *Error {
	return &Error{Line: line, Msg: fmt.Sprintf(format, args...)}
}

// lexer turns source into tokens with whitespace control already applied
// to the text between tags.
type lexer struct {
	src  string
	pos  int
	line int
	toks []token
	// stripNext: the last tag ended with '-' (strip all leading whitespace
	// of the next text) or was a block/comment (trim one newline).
	stripNext, trimNext bool
}

func lex(src string) ([]token, error) {
	src = strings.ReplaceAll(src, "\r\n", "\n")
	lx := &lexer{src: src, line: 1}
	if err := lx.run(); err != nil {
		return nil, err
	}
	return lx.toks, nil
}

func (lx *lexer) emit(k tokKind, v string, line int) {
	lx.toks = append(lx.toks, token{kind: k, val: v, line: line})
}

// text emits src[start:end] after applying the pending strip/trim of the
// previous tag and the lstrip of the tag that follows (kind 0 for none,
// '%' or '#' for a block or comment tag, '{' for a variable tag) with its
// modifier ('-', '+' or 0).
func (lx *lexer) text(start, end int, next byte, mod byte) {
	s := lx.src[start:end]
	line := lx.line
	switch {
	case lx.stripNext:
		t := strings.TrimLeft(s, " \t\n\r\v\f")
		start += len(s) - len(t)
		s = t
	case lx.trimNext && strings.HasPrefix(s, "\n"):
		s, start = s[1:], start+1
	}
	lx.stripNext, lx.trimNext = false, false
	switch {
	case mod == '-':
		s = strings.TrimRight(s, " \t\n\r\v\f")
	case (next == '%' || next == '#') && mod != '+':
		// lstrip_blocks: spaces and tabs from the start of the line to the tag.
		i := strings.LastIndexByte(s, '\n') + 1
		if strings.Trim(s[i:], " \t") == "" && (i > 0 || start == 0 || lx.src[start-1] == '\n') {
			s = s[:i]
		}
	}
	if s != "" {
		lx.emit(tText, s, line)
	}
	lx.line += strings.Count(lx.src[lx.pos:end], "\n")
}

func (lx *lexer) run() error {
	for {
		i := indexTag(lx.src, lx.pos)
		if i < 0 {
			lx.text(lx.pos, len(lx.src), 0, 0)
			lx.emit(tEOF, "", lx.line)
			return nil
		}
		kind := lx.src[i+1]
		var mod byte
		if i+2 < len(lx.src) && (lx.src[i+2] == '-' || lx.src[i+2] == '+' && kind != '{') {
			mod = lx.src[i+2]
		}
		lx.text(lx.pos, i, kind, mod)
		lx.pos = i + 2
		if mod != 0 {
			lx.pos++
		}
		var err error
		switch kind {
		case '#':
			err = lx.comment()
		case '%':
			raw, err := lx.rawBlock()
			if err != nil {
				return err
			}
			if raw {
				continue
			}
			lx.emit(tBlockBegin, "{%", lx.line)
			err = lx.inside('%')
		default:
			lx.emit(tVarBegin, "{{", lx.line)
			err = lx.inside('}')
		}
		if err != nil {
			return err
		}
	}
}

func indexTag(s string, from int) int {
	for i := from; i+1 < len(s); i++ {
		if s[i] == '{' && (s[i+1] == '{' || s[i+1] == '%' || s[i+1] == '#') {
			return i
		}
	}
	return -1
}

// closeTag notes how a tag ended: '-' strips the next text, a block or
// comment without '+' trims one newline.
func (lx *lexer) closeTag(kind, mod byte) {
	switch {
	case mod == '-':
		lx.stripNext = true
	case kind != '}' && mod != '+':
		lx.trimNext = true
	}
}

func (lx *lexer) comment() error {
	j := strings.Index(lx.src[lx.pos:], "#}")
	if j < 0 {
		return errorf(lx.line, "comment is not closed with #}")
	}
	end := lx.pos + j
	var mod byte
	if j > 0 && (lx.src[end-1] == '-' || lx.src[end-1] == '+') {
		mod = lx.src[end-1]
	}
	lx.line += strings.Count(lx.src[lx.pos:end], "\n")
	lx.pos = end + 2
	lx.closeTag('#', mod)
	return nil
}

// rawBlock handles {% raw %}…{% endraw %}: its content is text as is. A
// raw block that is not closed is an error at once (scanning on from each
// of many would cost the square of the source).
func (lx *lexer) rawBlock() (bool, error) {
	p := lx.pos
	for p < len(lx.src) && isSpace(lx.src[p]) {
		p++
	}
	if !strings.HasPrefix(lx.src[p:], "raw") {
		return false, nil
	}
	p += 3
	for p < len(lx.src) && isSpace(lx.src[p]) {
		p++
	}
	var mod byte
	if p < len(lx.src) && (lx.src[p] == '-' || lx.src[p] == '+') {
		mod, p = lx.src[p], p+1
	}
	if !strings.HasPrefix(lx.src[p:], "%}") {
		return false, nil
	}
	p += 2
	// Find {% endraw %} with optional modifiers.
	for q := p; ; {
		k := strings.Index(lx.src[q:], "{%")
		if k < 0 {
			return false, errorf(lx.line, "raw block is not closed with {%% endraw %%}")
		}
		k += q
		r := k + 2
		var emod byte
		if r < len(lx.src) && (lx.src[r] == '-' || lx.src[r] == '+') {
			emod, r = lx.src[r], r+1
		}
		for r < len(lx.src) && isSpace(lx.src[r]) {
			r++
		}
		if !strings.HasPrefix(lx.src[r:], "endraw") {
			q = k + 2
			continue
		}
		r += 6
		for r < len(lx.src) && isSpace(lx.src[r]) {
			r++
		}
		var cmod byte
		if r < len(lx.src) && (lx.src[r] == '-' || lx.src[r] == '+') {
			cmod, r = lx.src[r], r+1
		}
		if !strings.HasPrefix(lx.src[r:], "%}") {
			q = k + 2
			continue
		}
		lx.closeTag('%', mod)
		lx.pos = p
		lx.text(p, k, '%', emod)
		lx.pos = r + 2
		lx.closeTag('%', cmod)
		return true, nil
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isNameStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

var operators = []string{"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "=", "|", ".", ",", ":", "(", ")", "[", "]", "{", "}"}

// inside lexes the expression tokens of a tag up to its closer ('}' for
// }} or '%' for %}), tracking brackets so a dict's '}}' does not end it.
func (lx *lexer) inside(closer byte) error {
	depth := 0
	start := lx.line
	for {
		for lx.pos < len(lx.src) && isSpace(lx.src[lx.pos]) {
			if lx.src[lx.pos] == '\n' {
				lx.line++
			}
			lx.pos++
		}
		if lx.pos >= len(lx.src) {
			return errorf(start, "tag is not closed")
		}
		rest := lx.src[lx.pos:]
		if depth == 0 {
			end := string(closer) + "}"
			for _, mod := range []string{"-", "+", ""} {
				if strings.HasPrefix(rest, mod+end) && (mod != "+" || closer == '%') {
					if closer == '}' {
						lx.emit(tVarEnd, "}}", lx.line)
					} else {
						lx.emit(tBlockEnd, "%}", lx.line)
					}
					lx.pos += len(mod) + 2
					var m byte
					if mod != "" {
						m = mod[0]
					}
					lx.closeTag(closer, m)
					return nil
				}
			}
		}
		c := rest[0]
		switch {
		case isNameStart(c):
			j := 1
			for j < len(rest) && (isNameStart(rest[j]) || isDigit(rest[j])) {
				j++
			}
			lx.emit(tName, rest[:j], lx.line)
			lx.pos += j
		case isDigit(c):
			j, float := 0, false
			for j < len(rest) && (isDigit(rest[j]) || rest[j] == '_') {
				j++
			}
			if j+1 < len(rest) && rest[j] == '.' && isDigit(rest[j+1]) {
				float = true
				j++
				for j < len(rest) && (isDigit(rest[j]) || rest[j] == '_') {
					j++
				}
			}
			if j < len(rest) && (rest[j] == 'e' || rest[j] == 'E') {
				k := j + 1
				if k < len(rest) && (rest[k] == '+' || rest[k] == '-') {
					k++
				}
				if k < len(rest) && isDigit(rest[k]) {
					float = true
					for j = k; j < len(rest) && isDigit(rest[j]); j++ {
					}
				}
			}
			kind := tInt
			if float {
				kind = tFloat
			}
			lx.emit(kind, strings.ReplaceAll(rest[:j], "_", ""), lx.line)
			lx.pos += j
		case c == '"' || c == '\'':
			s, n, err := unquote(rest)
			if err != nil {
				return errorf(lx.line, "%v", err)
			}
			lx.emit(tString, s, lx.line)
			lx.line += strings.Count(rest[:n], "\n")
			lx.pos += n
		default:
			op := ""
			for _, o := range operators {
				if strings.HasPrefix(rest, o) {
					op = o
					break
				}
			}
			if op == "" {
				return errorf(lx.line, "unexpected character %q", c)
			}
			switch op {
			case "(", "[", "{":
				// The parser bounds nesting too; here a million brackets
				// stop before they are a million tokens.
				if depth++; depth > maxNest {
					return errorf(lx.line, "the template nests over %d deep", maxNest)
				}
			case ")", "]", "}":
				depth--
			}
			lx.emit(tOp, op, lx.line)
			lx.pos += len(op)
		}
	}
}

// unquote reads a quoted string literal at the start of s with Python's
// escapes (Jinja decodes literals as unicode-escape) and returns it and
// the bytes consumed.
func unquote(s string) (string, int, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == q:
			return b.String(), i + 1, nil
		case c != '\\':
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(s) {
			break
		}
		switch e := s[i]; e {
		case '\n':
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'v':
			b.WriteByte('\v')
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+n >= len(s) {
				return "", 0, fmt.Errorf("truncated \\%c escape in string literal", e)
			}
			var r rune
			for _, h := range s[i+1 : i+1+n] {
				d := hexVal(byte(h))
				if d < 0 {
					return "", 0, fmt.Errorf("bad \\%c escape in string literal", e)
				}
				r = r*16 + rune(d)
			}
			b.WriteRune(r)
			i += n
		case '0', '1', '2', '3', '4', '5', '6', '7':
			r, k := rune(0), 0
			for ; k < 3 && i+k < len(s) && s[i+k] >= '0' && s[i+k] <= '7'; k++ {
				r = r*8 + rune(s[i+k]-'0')
			}
			b.WriteRune(r)
			i += k - 1
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return "", 0, fmt.Errorf("string literal is not closed")
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
