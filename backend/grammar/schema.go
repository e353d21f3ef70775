package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Limits keep a constrained output finite even when a model never chooses
// to close a string or an array.
const (
	DefaultMaxString = 256
	DefaultMaxItems  = 8
	maxDepth         = 4
)

// Grammar is a compiled constraint root.
type Grammar struct{ root *node }

// FromSchema compiles a JSON schema.
func FromSchema(schema []byte) (*Grammar, error) {
	var v any
	if len(bytes.TrimSpace(schema)) == 0 {
		v = map[string]any{}
	} else {
		dec := json.NewDecoder(bytes.NewReader(schema))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("schema: %w", err)
		}
	}
	c := &compiler{root: v, refs: map[string]*node{}}
	n, err := c.compile(v, 0)
	if err != nil {
		return nil, err
	}
	return &Grammar{root: n}, nil
}

// compiler turns one schema document into grammar nodes. A reference
// compiles once and every use shares its node, so a recursive schema makes
// a cyclic grammar (bounded at run time by maxStack).
type compiler struct {
	root any
	refs map[string]*node
}

// ref resolves a local $ref: "#" or a JSON pointer into the document, such
// as "#/$defs/Item" (what Pydantic and zod write) or "#/definitions/Item".
func (c *compiler) ref(ref string, depth int) (*node, error) {
	if n, ok := c.refs[ref]; ok {
		return n, nil
	}
	if !strings.HasPrefix(ref, "#") {
		return nil, fmt.Errorf("schema $ref %q is not local; only #/… references are supported", ref)
	}
	target := c.root
	if ptr := ref[1:]; ptr != "" {
		if !strings.HasPrefix(ptr, "/") {
			return nil, fmt.Errorf("schema $ref %q is not a JSON pointer", ref)
		}
		for _, tok := range strings.Split(ptr[1:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			var ok bool
			switch x := target.(type) {
			case map[string]any:
				target, ok = x[tok]
			case []any:
				if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(x) {
					target, ok = x[i], true
				}
			}
			if !ok {
				return nil, fmt.Errorf("schema $ref %q: nothing at %q", ref, tok)
			}
		}
	}
	n := &node{}
	c.refs[ref] = n // uses inside the target share n
	compiled, err := c.compile(target, depth+1)
	if err != nil {
		return nil, err
	}
	*n = *compiled
	return n, nil
}

// AnyJSON is a grammar for any JSON object (response_format json_object).
func AnyJSON() *Grammar { return &Grammar{root: anyObject(0)} }

// Tool is a callable function for ToolCall.
type Tool struct {
	Name   string
	Schema []byte
}

// ToolCall compiles one to maxCalls calls, each
// open{"name":N,"arguments":A}close where N is one of the tools' names and A
// follows that tool's schema, separated by sep. After each complete call the
// output may end (end-of-generation is allowed there) or go on to the next.
func ToolCall(open, close, sep string, tools []Tool, maxCalls int) (*Grammar, error) {
	var opts []*node
	for _, t := range tools {
		g, err := FromSchema(t.Schema)
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", t.Name, err)
		}
		// Keys in sorted order: "arguments" before "name".
		opts = append(opts, seq(lit(`{"name":`+jsonString(t.Name)+`,"arguments":`), g.root, lit(`}`)))
	}
	if len(opts) == 0 {
		return nil, fmt.Errorf("no tools to call")
	}
	call := seq(lit(open), alt(opts...), lit(close))
	more := lit("")
	for k := 1; k < maxCalls; k++ {
		more = alt(lit(""), seq(lit(sep), call, more))
	}
	return &Grammar{root: seq(call, more)}, nil
}

func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

func anyValue(depth int) *node {
	opts := []*node{str(DefaultMaxString), num(false), lit("true"), lit("false"), lit("null")}
	if depth < maxDepth {
		opts = append(opts, anyObject(depth+1), rep('[', ']', anyValue(depth+1), 0, DefaultMaxItems))
	}
	return alt(opts...)
}

func anyObject(depth int) *node {
	pair := seq(str(64), lit(":"), anyValue(depth+1))
	return rep('{', '}', pair, 0, DefaultMaxItems)
}

func intOf(v any, dflt int) int {
	if n, ok := v.(json.Number); ok {
		if i, err := strconv.Atoi(n.String()); err == nil {
			return i
		}
	}
	return dflt
}

func (c *compiler) compile(v any, depth int) (*node, error) {
	if depth > 16 {
		return nil, fmt.Errorf("schema nested too deeply")
	}
	if b, ok := v.(bool); ok {
		if b {
			return anyValue(depth), nil
		}
		return nil, fmt.Errorf("schema false admits nothing")
	}
	s, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("schema must be an object, got %T", v)
	}
	if r, ok := s["$ref"]; ok {
		ref, _ := r.(string)
		return c.ref(ref, depth)
	}
	if c, ok := s["const"]; ok {
		b, _ := json.Marshal(c)
		return lit(string(b)), nil
	}
	if e, ok := s["enum"].([]any); ok {
		var opts []*node
		for _, x := range e {
			b, _ := json.Marshal(x)
			opts = append(opts, lit(string(b)))
		}
		if len(opts) == 0 {
			return nil, fmt.Errorf("schema enum is empty")
		}
		return alt(opts...), nil
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		if list, ok := s[key].([]any); ok {
			var opts []*node
			for _, x := range list {
				n, err := c.compile(x, depth+1)
				if err != nil {
					return nil, err
				}
				opts = append(opts, n)
			}
			if len(opts) > 0 {
				return alt(opts...), nil
			}
		}
	}
	if list, ok := s["allOf"].([]any); ok && len(list) == 1 {
		return c.compile(list[0], depth+1)
	}
	switch t := s["type"].(type) {
	case []any:
		var opts []*node
		for _, x := range t {
			one := map[string]any{}
			for k, v := range s {
				one[k] = v
			}
			one["type"] = x
			n, err := c.compile(one, depth+1)
			if err != nil {
				return nil, err
			}
			opts = append(opts, n)
		}
		return alt(opts...), nil
	case string:
		return c.compileType(t, s, depth)
	case nil:
		if _, ok := s["properties"]; ok {
			return c.compileType("object", s, depth)
		}
		if _, ok := s["items"]; ok {
			return c.compileType("array", s, depth)
		}
		return anyValue(depth), nil
	}
	return nil, fmt.Errorf("schema type must be a string or an array")
}

func (c *compiler) compileType(t string, s map[string]any, depth int) (*node, error) {
	switch t {
	case "string":
		return str(intOf(s["maxLength"], DefaultMaxString)), nil
	case "integer":
		return num(true), nil
	case "number":
		return num(false), nil
	case "boolean":
		return alt(lit("true"), lit("false")), nil
	case "null":
		return lit("null"), nil
	case "array":
		item := anyValue(depth + 1)
		if it, ok := s["items"]; ok {
			var err error
			if item, err = c.compile(it, depth+1); err != nil {
				return nil, err
			}
		}
		lo, hi := intOf(s["minItems"], 0), intOf(s["maxItems"], DefaultMaxItems)
		if hi < lo {
			return nil, fmt.Errorf("schema maxItems %d < minItems %d", hi, lo)
		}
		return rep('[', ']', item, lo, hi), nil
	case "object":
		props, _ := s["properties"].(map[string]any)
		if len(props) == 0 {
			if ap, ok := s["additionalProperties"].(bool); ok && !ap {
				return lit("{}"), nil
			}
			return anyObject(depth), nil
		}
		required := map[string]bool{}
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				k, _ := r.(string)
				if _, ok := props[k]; !ok {
					return nil, fmt.Errorf("schema requires %q, which is not among its properties", k)
				}
				required[k] = true
			}
		}
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		obj := &node{kind: kObj}
		for _, k := range keys {
			n, err := c.compile(props[k], depth+1)
			if err != nil {
				return nil, fmt.Errorf("property %s: %w", k, err)
			}
			key := jsonString(k) + ":"
			obj.props = append(obj.props, prop{first: seq(lit(key), n), later: seq(lit(","+key), n), required: required[k]})
		}
		return seq(lit("{"), obj), nil
	}
	return nil, fmt.Errorf("schema type %q is not supported", t)
}
