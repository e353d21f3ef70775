package jinja

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Value is what templates compute with: nil (Python's None), Undefined,
// bool, int64, float64, string, *List, *Dict or *Func.
type Value = any

// Undefined is a name or attribute that does not exist: it prints as
// nothing, is false, iterates as empty, and fails in arithmetic.
type Undefined struct{ Name string }

// List is a Python list (or a tuple, which prints with parentheses).
type List struct {
	Items []Value
	tuple bool
}

// NewList makes a list of items.
func NewList(items ...Value) *List { return &List{Items: items} }

// Dict is an insertion-ordered mapping with string keys (what JSON objects
// and template dicts need), also used for namespace() objects.
type Dict struct {
	keys []string
	m    map[string]Value
	ns   bool
}

// NewDict makes an empty dict.
func NewDict() *Dict { return &Dict{m: map[string]Value{}} }

// Set sets key to v, keeping the key's first position.
func (d *Dict) Set(key string, v Value) {
	if _, ok := d.m[key]; !ok {
		d.keys = append(d.keys, key)
	}
	d.m[key] = v
}

// Get returns the value at key.
func (d *Dict) Get(key string) (Value, bool) {
	v, ok := d.m[key]
	return v, ok
}

// Keys returns the keys in insertion order.
func (d *Dict) Keys() []string { return d.keys }

// Len is the number of keys.
func (d *Dict) Len() int { return len(d.keys) }

func (d *Dict) del(key string) {
	if _, ok := d.m[key]; ok {
		delete(d.m, key)
		d.keys = slices.DeleteFunc(d.keys, func(k string) bool { return k == key })
	}
}

// Func is a callable: a global, a bound method, or a macro. It is called
// with the renderer of the call, whose budget it spends.
type Func struct {
	Name string
	fn   func(r *renderer, args []Value, kwargs *Dict) (Value, error)
}

// FromJSON decodes JSON keeping object key order and the int/float
// distinction, as Python's json.loads does.
func FromJSON(raw []byte) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeJSON(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("unexpected data after the JSON value")
	}
	return v, nil
}

func decodeJSON(dec *json.Decoder) (Value, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			d := NewDict()
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeJSON(dec)
				if err != nil {
					return nil, err
				}
				d.Set(k.(string), v)
			}
			_, err := dec.Token()
			return d, err
		case '[':
			l := NewList()
			for dec.More() {
				v, err := decodeJSON(dec)
				if err != nil {
					return nil, err
				}
				l.Items = append(l.Items, v)
			}
			_, err := dec.Token()
			return l, err
		}
	case json.Number:
		s := t.String()
		if !strings.ContainsAny(s, ".eE") {
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				return i, nil
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		return f, err
	case string, bool, nil:
		return t, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", t)
}

func truthy(v Value) bool {
	switch v := v.(type) {
	case nil, Undefined:
		return false
	case bool:
		return v
	case int64:
		return v != 0
	case float64:
		return v != 0
	case string:
		return v != ""
	case *List:
		return len(v.Items) > 0
	case *Dict:
		return v.ns || len(v.keys) > 0
	}
	return true
}

func typeName(v Value) string {
	switch v := v.(type) {
	case nil:
		return "NoneType"
	case Undefined:
		return "undefined"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case *List:
		if v.tuple {
			return "tuple"
		}
		return "list"
	case *Dict:
		if v.ns {
			return "Namespace"
		}
		return "dict"
	case *Func:
		return "function"
	}
	return fmt.Sprintf("%T", v)
}

// str is Python's str().
func str(v Value) string {
	switch v := v.(type) {
	case string:
		return v
	case Undefined:
		return ""
	}
	return repr(v)
}

// repr is Python's repr() for the values templates hold.
func repr(v Value) string {
	var b strings.Builder
	writeRepr(&b, v)
	return b.String()
}

func writeRepr(b *strings.Builder, v Value) {
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
		b.WriteString(pyQuote(v))
	case *List:
		open, close := "[", "]"
		if v.tuple {
			open, close = "(", ")"
		}
		b.WriteString(open)
		for i, x := range v.Items {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, x)
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
			if i > 0 {
				b.WriteString(", ")
			}
			if v.ns {
				b.WriteString(k + "=")
			} else {
				b.WriteString(pyQuote(k) + ": ")
			}
			writeRepr(b, v.m[k])
		}
		if v.ns {
			b.WriteString(">")
		} else {
			b.WriteString("}")
		}
	case *Func:
		b.WriteString("<function " + v.Name + ">")
	default:
		fmt.Fprint(b, v)
	}
}

// pyQuote quotes like Python's repr of a str: single quotes unless the
// string has a single quote and no double quote.
func pyQuote(s string) string {
	q := byte('\'')
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
	return b.String()
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

// toJSON writes v as Python's json.dumps(v, ensure_ascii=False, …) does.
func toJSON(v Value, o jsonOptions) (string, error) {
	var b strings.Builder
	if err := writeJSON(&b, v, o, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

func writeJSON(b *strings.Builder, v Value, o jsonOptions, depth int) error {
	if depth > 200 {
		return fmt.Errorf("tojson: value is nested too deeply")
	}
	newline := func(d int) {
		if o.hasIndent {
			b.WriteByte('\n')
			for range d {
				b.WriteString(o.indent)
			}
		}
	}
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case Undefined:
		return fmt.Errorf("tojson: %s is undefined", undefinedName(v))
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
		return fmt.Errorf("tojson: a %s is not JSON serializable", typeName(v))
	}
	return nil
}

func writeJSONString(b *strings.Builder, s string, ascii bool) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20:
			fmt.Fprintf(b, `\u%04x`, r)
		case ascii && r > 0x7e:
			if r >= 0x10000 {
				r -= 0x10000
				fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			} else {
				fmt.Fprintf(b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

func undefinedName(u Undefined) string {
	if u.Name == "" {
		return "a value"
	}
	return "'" + u.Name + "'"
}

// toFloat reads a number (bools count, as in Python).
func toNumber(v Value) (float64, bool) {
	switch v := v.(type) {
	case int64:
		return float64(v), true
	case float64:
		return v, true
	case bool:
		if v {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func toInt(v Value) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case bool:
		if v {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// equal is Python's ==.
func equal(a, b Value) bool {
	if x, ok := toNumber(a); ok {
		y, ok := toNumber(b)
		return ok && x == y
	}
	switch a := a.(type) {
	case nil:
		return b == nil
	case Undefined:
		_, ok := b.(Undefined)
		return ok
	case string:
		s, ok := b.(string)
		return ok && a == s
	case *List:
		c, ok := b.(*List)
		return ok && slices.EqualFunc(a.Items, c.Items, equal)
	case *Dict:
		c, ok := b.(*Dict)
		if !ok || len(a.keys) != len(c.keys) {
			return false
		}
		for _, k := range a.keys {
			y, ok := c.m[k]
			if !ok || !equal(a.m[k], y) {
				return false
			}
		}
		return true
	}
	return a == b
}

// compare orders numbers with numbers and strings with strings.
func compare(a, b Value) (int, error) {
	if x, ok := toNumber(a); ok {
		if y, ok := toNumber(b); ok {
			switch {
			case x < y:
				return -1, nil
			case x > y:
				return 1, nil
			}
			return 0, nil
		}
	}
	if x, ok := a.(string); ok {
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), nil
		}
	}
	if x, ok := a.(*List); ok {
		if y, ok := b.(*List); ok {
			for i := 0; i < len(x.Items) && i < len(y.Items); i++ {
				if c, err := compare(x.Items[i], y.Items[i]); err != nil || c != 0 {
					return c, err
				}
			}
			return len(x.Items) - len(y.Items), nil
		}
	}
	return 0, fmt.Errorf("cannot compare %s with %s", typeName(a), typeName(b))
}

// iterate lists what a for loop walks: list items, dict keys, string
// characters; undefined and none iterate as empty only for undefined.
func iterate(v Value) ([]Value, error) {
	switch v := v.(type) {
	case Undefined:
		return nil, nil
	case *List:
		return v.Items, nil
	case *Dict:
		out := make([]Value, len(v.keys))
		for i, k := range v.keys {
			out[i] = k
		}
		return out, nil
	case string:
		var out []Value
		for _, r := range v {
			out = append(out, string(r))
		}
		return out, nil
	}
	return nil, fmt.Errorf("a %s is not iterable", typeName(v))
}

func length(v Value) (int64, error) {
	switch v := v.(type) {
	case Undefined:
		return 0, nil
	case string:
		return int64(utf8.RuneCountInString(v)), nil
	case *List:
		return int64(len(v.Items)), nil
	case *Dict:
		return int64(len(v.keys)), nil
	}
	return 0, fmt.Errorf("a %s has no length", typeName(v))
}
