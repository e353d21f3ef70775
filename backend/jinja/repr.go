package jinja

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// str is Python's str() of a value whose text is small by construction (a
// number, a name, a key); values that may be large go through r.str.
func str(v Value) string {
	switch v := v.(type) {
	case string:
		return v
	case Undefined:
		return ""
	}
	return repr(v)
}

// repr is Python's repr() cut at 200 bytes, for error messages.
func repr(v Value) string {
	s := newSink(200)
	writeRepr(s, v, 0)
	if s.err != nil {
		return s.String() + "…"
	}
	return s.String()
}

// str is Python's str(), built within the render's budget.
func (r *renderer) str(v Value) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case Undefined:
		return "", nil
	}
	return r.build(func(s *sink) error { writeRepr(s, v, 0); return nil })
}

func writeRepr(b *sink, v Value, depth int) {
	if b.deep(depth) {
		return
	}
	switch v := v.(type) {
	case nil:
		b.WriteString("None")
	case Undefined:
	case bool:
		if v {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case float64:
		b.WriteString(pyFloat(v))
	case string:
		writePyQuote(b, v)
	case *List:
		open, close := "[", "]"
		if v.tuple {
			open, close = "(", ")"
		}
		b.WriteString(open)
		for i, x := range v.Items {
			if b.err != nil {
				return
			}
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, x, depth+1)
		}
		if v.tuple && len(v.Items) == 1 {
			b.WriteString(",")
		}
		b.WriteString(close)
	case *Dict:
		if v.ns {
			b.WriteString("<Namespace ")
		} else {
			b.WriteString("{")
		}
		for i, k := range v.keys {
			if b.err != nil {
				return
			}
			if i > 0 {
				b.WriteString(", ")
			}
			if v.ns {
				b.WriteString(k + "=")
			} else {
				writePyQuote(b, k)
				b.WriteString(": ")
			}
			writeRepr(b, v.m[k], depth+1)
		}
		if v.ns {
			b.WriteString(">")
		} else {
			b.WriteString("}")
		}
	case *Func:
		b.WriteString("<function " + v.Name + ">")
	case *loopState:
		b.WriteString("<LoopContext>")
	default:
		fmt.Fprint(b, v)
	}
}

// pyQuote quotes like Python's repr of a str: single quotes unless the
// string has a single quote and no double quote.
func pyQuote(s string) string {
	b := newSink(math.MaxInt64)
	writePyQuote(b, s)
	return b.String()
}

func writePyQuote(b *sink, s string) {
	q := byte('\'')
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		q = '"'
	}
	b.WriteByte(q)
	// Runs that need no escape are written whole.
	plain := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		esc := ""
		switch {
		case r == utf8.RuneError && n == 1:
			esc = string(utf8.RuneError)
		case r == rune(q) || r == '\\':
			esc = "\\" + string(r)
		case r == '\n':
			esc = `\n`
		case r == '\r':
			esc = `\r`
		case r == '\t':
			esc = `\t`
		case r < 0x20 || r == 0x7f:
			esc = fmt.Sprintf(`\x%02x`, r)
		default:
			i += n
			continue
		}
		b.WriteString(s[plain:i])
		b.WriteString(esc)
		i += n
		plain = i
		if b.err != nil {
			return
		}
	}
	b.WriteString(s[plain:])
	b.WriteByte(q)
}

// pyFloat is Python's repr of a float: shortest round-trip digits, fixed
// notation for exponents in [-4, 16), and always a '.' or exponent.
func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(e, "e")
	x, _ := strconv.Atoi(exp)
	if x >= -4 && x < 16 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.ContainsAny(s, ".") {
			s += ".0"
		}
		return s
	}
	sign := "+"
	if x < 0 {
		sign, x = "-", -x
	}
	return fmt.Sprintf("%se%s%02d", mant, sign, x)
}

// jsonOptions are json.dumps' arguments that tojson passes through.
type jsonOptions struct {
	indent     string // "" with hasIndent false: one line
	hasIndent  bool
	itemSep    string
	keySep     string
	sortKeys   bool
	ensureASCI bool
}

func newJSONOptions() jsonOptions { return jsonOptions{itemSep: ", ", keySep: ": "} }

// toJSON writes v as Python's json.dumps(v, ensure_ascii=False, …) does,
// within the render's budget.
func (r *renderer) toJSON(v Value, o jsonOptions) (string, error) {
	s, err := r.build(func(b *sink) error { return writeJSON(b, v, o, 0) })
	if err != nil {
		return "", fmt.Errorf("tojson: %w", err)
	}
	return s, nil
}

func writeJSON(b *sink, v Value, o jsonOptions, depth int) error {
	if b.deep(depth) {
		return nil
	}
	newline := func(d int) {
		if o.hasIndent {
			b.WriteByte('\n')
			for range d {
				if b.err != nil {
					return
				}
				b.WriteString(o.indent)
			}
		}
	}
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case Undefined:
		return fmt.Errorf("%s is undefined", undefinedName(v))
	case bool:
		if v {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case float64:
		switch {
		case math.IsInf(v, 1):
			b.WriteString("Infinity")
		case math.IsInf(v, -1):
			b.WriteString("-Infinity")
		case math.IsNaN(v):
			b.WriteString("NaN")
		default:
			b.WriteString(pyFloat(v))
		}
	case string:
		writeJSONString(b, v, o.ensureASCI)
	case *List:
		if len(v.Items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, x := range v.Items {
			if b.err != nil {
				return nil
			}
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			newline(depth + 1)
			if err := writeJSON(b, x, o, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteByte(']')
	case *Dict:
		if len(v.keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		keys := v.keys
		if o.sortKeys {
			keys = slices.Clone(keys)
			slices.Sort(keys)
		}
		b.WriteByte('{')
		for i, k := range keys {
			if b.err != nil {
				return nil
			}
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			newline(depth + 1)
			writeJSONString(b, k, o.ensureASCI)
			b.WriteString(o.keySep)
			if err := writeJSON(b, v.m[k], o, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteByte('}')
	default:
		return fmt.Errorf("a %s is not JSON serializable", typeName(v))
	}
	return nil
}

func writeJSONString(b *sink, s string, ascii bool) {
	b.WriteByte('"')
	plain := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		esc := ""
		switch {
		case r == utf8.RuneError && n == 1 && ascii:
			esc = `\ufffd`
		case r == utf8.RuneError && n == 1:
			esc = string(utf8.RuneError)
		case r == '"':
			esc = `\"`
		case r == '\\':
			esc = `\\`
		case r == '\n':
			esc = `\n`
		case r == '\r':
			esc = `\r`
		case r == '\t':
			esc = `\t`
		case r == '\b':
			esc = `\b`
		case r == '\f':
			esc = `\f`
		case r < 0x20:
			esc = fmt.Sprintf(`\u%04x`, r)
		case ascii && r >= 0x10000:
			r -= 0x10000
			esc = fmt.Sprintf(`\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		case ascii && r > 0x7e:
			esc = fmt.Sprintf(`\u%04x`, r)
		default:
			i += n
			continue
		}
		b.WriteString(s[plain:i])
		b.WriteString(esc)
		i += n
		plain = i
		if b.err != nil {
			return
		}
	}
	b.WriteString(s[plain:])
	b.WriteByte('"')
}

func undefinedName(u Undefined) string {
	if u.Name == "" {
		return "a value"
	}
	return "'" + u.Name + "'"
}
