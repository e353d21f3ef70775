package jinja

import (
	"bytes"
	"encoding/json"
	"fmt"
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

func (d *Dict) values() []Value {
	out := make([]Value, len(d.keys))
	for i, k := range d.keys {
		out[i] = d.m[k]
	}
	return out
}

// Len is the number of keys.
func (d *Dict) Len() int { return len(d.keys) }

// Delete removes key.
func (d *Dict) Delete(key string) { d.del(key) }

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
	recv Value // a bound method's receiver, whose size counts as work
}

// ErrNested is the error FromJSON wraps for JSON nested past what a
// render may walk (maxValueDepth): rejected before it is decoded, so deep
// input costs neither stack nor memory.
var ErrNested = fmt.Errorf("JSON is nested over %d deep", maxValueDepth)

// FromJSON decodes JSON keeping object key order and the int/float
// distinction, as Python's json.loads does.
func FromJSON(raw []byte) (Value, error) {
	if err := checkNesting(raw); err != nil {
		return nil, err
	}
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

// checkNesting fails on JSON whose brackets nest past maxValueDepth,
// counting only outside strings.
func checkNesting(raw []byte) error {
	depth, inString := 0, false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			if depth++; depth > maxValueDepth {
				return fmt.Errorf("at byte %d: %w", i, ErrNested)
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return nil
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

// equal is Python's ==. Its work is r's: a byte compared is one unit, a
// value visited elemWork; past the budget or maxValueDepth it answers
// false and r holds the error.
func (r *renderer) equal(a, b Value) bool { return r.eq(a, b, 0) }

func (r *renderer) eq(a, b Value, depth int) bool {
	if r.work(elemWork) != nil {
		return false
	}
	if depth > maxValueDepth {
		r.fail(fmt.Errorf("== on values nested over %d deep", maxValueDepth))
		return false
	}
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
		if !ok || len(a) != len(s) {
			return false
		}
		return r.work(int64(len(a))) == nil && a == s
	case *List:
		c, ok := b.(*List)
		return ok && slices.EqualFunc(a.Items, c.Items, func(x, y Value) bool { return r.eq(x, y, depth+1) })
	case *Dict:
		c, ok := b.(*Dict)
		if !ok || len(a.keys) != len(c.keys) {
			return false
		}
		for _, k := range a.keys {
			y, ok := c.m[k]
			if !ok || !r.eq(a.m[k], y, depth+1) {
				return false
			}
		}
		return true
	}
	return a == b
}

// compare orders numbers with numbers, strings with strings and lists
// item by item; its work is r's, as equal's.
func (r *renderer) compare(a, b Value) (int, error) { return r.cmp(a, b, 0) }

func (r *renderer) cmp(a, b Value, depth int) (int, error) {
	if err := r.work(elemWork); err != nil {
		return 0, err
	}
	if depth > maxValueDepth {
		return 0, fmt.Errorf("comparing values nested over %d deep", maxValueDepth)
	}
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
			if err := r.work(int64(min(len(x), len(y)))); err != nil {
				return 0, err
			}
			return strings.Compare(x, y), nil
		}
	}
	if x, ok := a.(*List); ok {
		if y, ok := b.(*List); ok {
			for i := 0; i < len(x.Items) && i < len(y.Items); i++ {
				if c, err := r.cmp(x.Items[i], y.Items[i], depth+1); err != nil || c != 0 {
					return c, err
				}
			}
			return len(x.Items) - len(y.Items), nil
		}
	}
	return 0, fmt.Errorf("cannot compare %s with %s", typeName(a), typeName(b))
}

// iterate lists what a for loop walks: list items, dict keys, string
// characters (built within the budget); undefined iterates as empty.
func (r *renderer) iterate(v Value) ([]Value, error) {
	switch v := v.(type) {
	case Undefined:
		return nil, nil
	case *List:
		return v.Items, nil
	case *Dict:
		if err := r.spendN(int64(len(v.keys)), 32); err != nil {
			return nil, err
		}
		out := make([]Value, len(v.keys))
		for i, k := range v.keys {
			out[i] = k
		}
		return out, nil
	case string:
		n := int64(utf8.RuneCountInString(v))
		if err := r.spendN(n, 32); err != nil {
			return nil, err
		}
		out := make([]Value, 0, n)
		for _, c := range v {
			out = append(out, string(c))
		}
		return out, nil
	}
	return nil, fmt.Errorf("a %s is not iterable", typeName(v))
}

func (r *renderer) length(v Value) (int64, error) {
	switch v := v.(type) {
	case Undefined:
		return 0, nil
	case string:
		return int64(utf8.RuneCountInString(v)), r.work(int64(len(v)) * runeWork)
	case *List:
		return int64(len(v.Items)), nil
	case *Dict:
		return int64(len(v.keys)), nil
	}
	return 0, fmt.Errorf("a %s has no length", typeName(v))
}
