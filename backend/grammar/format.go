package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
)

// syntax is how one tool-call format writes calls (one file per format):
// begin, then one to max calls with sep between them, then end. A call to
// a tool is wrap(name, its arguments, its index).
type syntax struct {
	begin, end, sep string
	single          bool // the format writes one call per turn
	// args compiles a tool's parameters schema: JSON (jsonArgs) or the
	// XML formats' parameter lists.
	args func(c *compiler, root any) (*node, error)
	wrap func(name string, args *node, k int) *node
}

// syntaxes are the formats by chat.Format's names ("" is auto).
var syntaxes = map[string]syntax{
	"": hermesSyntax, "auto": hermesSyntax, "hermes": hermesSyntax, "llama3": llamaSyntax,
	"mistral": mistralSyntax, "qwen3coder": qwenSyntax, "glm": glmSyntax, "harmony": harmonySyntax,
	"kimi": kimiSyntax, "deepseek": deepseekSyntax,
}

// ToolCalls compiles one to maxCalls calls (one, for a format that writes
// one per turn) in format's syntax, each to one of tools with arguments
// following that tool's schema. After each complete call the output may
// end (end-of-generation is allowed there) or go on to the next. All the
// tools share one budget, DefaultLimits.
func ToolCalls(format string, tools []Tool, maxCalls int) (*Grammar, error) {
	syn, ok := syntaxes[format]
	if !ok {
		return nil, fmt.Errorf("no grammar for tool-call format %q", format)
	}
	if syn.single {
		maxCalls = 1
	}
	b := newBudget(DefaultLimits())
	args := make([]*node, len(tools))
	for i, t := range tools {
		n, err := compileWith(t.Schema, b, syn.args)
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", t.Name, err)
		}
		args[i] = n
	}
	if len(tools) == 0 {
		return nil, fmt.Errorf("no tools to call")
	}
	call := func(k int) *node {
		opts := make([]*node, len(tools))
		for i, t := range tools {
			opts[i] = syn.wrap(t.Name, args[i], k)
		}
		return alt(opts...)
	}
	more := lit("")
	for k := maxCalls - 1; k >= 1; k-- {
		more = alt(lit(""), seq(lit(syn.sep), call(k), more))
	}
	return &Grammar{root: seq(lit(syn.begin), call(0), more, lit(syn.end))}, nil
}

// compileWith compiles one schema document through compile.
func compileWith(schema []byte, b *budget, compile func(c *compiler, root any) (*node, error)) (*node, error) {
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
	c := &compiler{root: v, refs: map[string]*node{}, pending: map[*node]bool{}, b: b}
	return compile(c, v)
}

// jsonArgs compiles arguments written as a JSON object.
func jsonArgs(c *compiler, root any) (*node, error) { return c.compile(root, "#", 0) }

// xmlArgs compiles the parameters of the XML formats: each property as
// member(key, value), in key order, the required ones always, then end. A
// value whose schema takes a string is raw text that never holds stop
// (the tag that closes it); any other is JSON.
func xmlArgs(member func(key string, value *node) *node, end, stop string) func(c *compiler, root any) (*node, error) {
	return func(c *compiler, root any) (*node, error) {
		s, _ := root.(map[string]any)
		props := map[string]any{}
		if p, ok := s["properties"].(map[string]any); ok {
			for k, v := range p {
				props[k] = v
			}
		}
		required := map[string]bool{}
		if list, ok := s["required"].([]any); ok {
			for _, x := range list {
				if k, ok := x.(string); ok {
					required[k] = true
				}
			}
		}
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		for k := range required {
			if _, ok := props[k]; !ok {
				keys = append(keys, k)
				props[k] = true
			}
		}
		sort.Strings(keys)
		if err := c.b.node("#", len(keys)+1); err != nil {
			return nil, err
		}
		obj := &node{kind: kObj, end: lit(end)}
		for _, k := range keys {
			path := "#/properties/" + pointerEscape(k)
			var v *node
			var err error
			if takesString(props[k], 0) {
				v, err = c.rawValue(props[k], path, stop)
			} else {
				v, err = c.compile(props[k], path, 1)
			}
			if err != nil {
				return nil, err
			}
			m := member(k, v)
			obj.props = append(obj.props, prop{first: m, later: m, required: required[k]})
		}
		return newNode(*obj), nil
	}
}

// rawValue compiles a string parameter's value as raw text: its enum or
// const as they are, or its type's length and pattern.
func (c *compiler) rawValue(schema any, path, stop string) (*node, error) {
	s, _ := schema.(map[string]any)
	var vals []any
	if e, ok := s["enum"].([]any); ok {
		vals = e
	} else if v, ok := s["const"]; ok {
		vals = []any{v}
	}
	if len(vals) > 0 {
		var texts []string
		for _, v := range vals {
			if t, ok := v.(string); ok && !bytes.Contains([]byte(t), []byte(stop)) {
				texts = append(texts, t)
			}
		}
		if len(texts) == 0 {
			return nil, &SchemaError{path, "enum", "no string value to write"}
		}
		return oneOf(texts), nil
	}
	spec := plainSpec(0, DefaultMaxString)
	if types, _ := c.types(s, path); len(types) > 0 {
		n, err := c.stringType(s, path)
		if err != nil {
			return nil, err
		}
		spec = n.str
	}
	return rawNode(spec, stop), nil
}

// TakesString reports whether a parameter's schema takes a string, so that
// the XML formats write its value raw: it names no type, or string among
// its types (type, or the branches of anyOf and oneOf), or its enum is all
// strings. The parser (chat) reads values by the same rule.
func TakesString(schema []byte) bool {
	var v any
	if json.Unmarshal(schema, &v) != nil {
		return true
	}
	return takesString(v, 0)
}

func takesString(schema any, depth int) bool {
	s, ok := schema.(map[string]any)
	if !ok || depth > maxNesting {
		return true
	}
	switch t := s["type"].(type) {
	case string:
		return t == "string"
	case []any:
		for _, x := range t {
			if x == "string" {
				return true
			}
		}
		return false
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		if branches, ok := s[key].([]any); ok && len(branches) > 0 {
			for _, b := range branches {
				if takesString(b, depth+1) {
					return true
				}
			}
			return false
		}
	}
	if e, ok := s["enum"].([]any); ok {
		for _, v := range e {
			if _, ok := v.(string); !ok {
				return false
			}
		}
	}
	return true
}

func itoa(k int) string { return strconv.Itoa(k) }
