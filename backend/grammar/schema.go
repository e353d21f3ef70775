package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Limits keep a constrained output finite even when a model never chooses
// to close a string or an array. A schema's own maxLength and maxItems
// replace them.
const (
	DefaultMaxString = 256
	DefaultMaxItems  = 8
	maxDepth         = 4       // nesting of values a schema leaves open ({} or true)
	maxNesting       = 32      // nesting of schema objects
	maxCount         = 1 << 14 // the most characters or items a bound may ask for
	// maxJSONDepth bounds the document's JSON nesting (a const or enum
	// value nests inside its schema), checked before it is decoded.
	maxJSONDepth = 128
)

// Grammar is a compiled constraint root.
type Grammar struct{ root *node }

// FromSchema compiles a JSON schema under DefaultLimits.
func FromSchema(schema []byte) (*Grammar, error) { return Compile(schema, DefaultLimits()) }

// Compile compiles a JSON schema under lim. A keyword it cannot enforce
// is a *SchemaError; a schema past lim a *BudgetError (ErrBudget).
func Compile(schema []byte, lim Limits) (*Grammar, error) {
	n, err := compileDoc(schema, newBudget(lim))
	if err != nil {
		return nil, err
	}
	return &Grammar{root: n}, nil
}

func compileDoc(schema []byte, b *budget) (*node, error) {
	var v any
	if len(bytes.TrimSpace(schema)) == 0 {
		v = map[string]any{}
	} else {
		if at := nestedPast(schema, maxJSONDepth); at >= 0 {
			return nil, &SchemaError{"#", "", fmt.Sprintf("JSON nested more than %d deep (at byte %d)", maxJSONDepth, at)}
		}
		dec := json.NewDecoder(bytes.NewReader(schema))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("schema: %w", err)
		}
	}
	c := &compiler{root: v, refs: map[string]*node{}, pending: map[*node]bool{}, b: b}
	return c.compile(v, "#", 0)
}

// nestedPast is where b's brackets, outside strings, first nest past max,
// or -1.
func nestedPast(b []byte, max int) int {
	depth, inString := 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			if depth++; depth > max {
				return i
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return -1
}

// compiler turns one schema document into grammar nodes. A reference
// compiles once and every use shares its node, so a recursive schema makes
// a cyclic grammar (bounded at run time by maxStack).
type compiler struct {
	root    any
	refs    map[string]*node
	pending map[*node]bool // references being compiled
	b       *budget
}

// ref resolves a local $ref: "#" or a JSON pointer into the document, such
// as "#/$defs/Item" (what Pydantic and zod write) or "#/definitions/Item".
func (c *compiler) ref(ref, path string, depth int) (*node, error) {
	if n, ok := c.refs[ref]; ok {
		return n, nil
	}
	if !strings.HasPrefix(ref, "#") {
		return nil, &SchemaError{path, "$ref", fmt.Sprintf("%q is not local; only #/… references are supported", ref)}
	}
	target := c.root
	if ptr := ref[1:]; ptr != "" {
		if !strings.HasPrefix(ptr, "/") {
			return nil, &SchemaError{path, "$ref", fmt.Sprintf("%q is not a JSON pointer", ref)}
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
				return nil, &SchemaError{path, "$ref", fmt.Sprintf("%q: nothing at %q", ref, tok)}
			}
		}
	}
	n := newNode(node{})
	c.refs[ref] = n // uses inside the target share n
	c.pending[n] = true
	compiled, err := c.compile(target, ref, depth+1)
	delete(c.pending, n)
	if err != nil {
		return nil, err
	}
	if c.pending[compiled] || compiled == n {
		return nil, &SchemaError{path, "$ref", fmt.Sprintf("%q refers only to itself", ref)}
	}
	id := n.id
	*n = *compiled
	n.id = id
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
// All the tools share one budget, DefaultLimits.
func ToolCall(open, close, sep string, tools []Tool, maxCalls int) (*Grammar, error) {
	b := newBudget(DefaultLimits())
	var opts []*node
	for _, t := range tools {
		root, err := compileDoc(t.Schema, b)
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", t.Name, err)
		}
		// Keys in sorted order: "arguments" before "name".
		opts = append(opts, seq(lit(`{"name":`+jsonString(t.Name)+`,"arguments":`), root, lit(`}`)))
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

// canonical is v as the output writes it: compact, keys sorted, no HTML
// escapes (chat.CanonicalJSON's form).
func canonical(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

func jsonString(s string) string { return canonical(s) }

// The open values ({} and true schemas), built once per depth: every
// grammar shares them.
var anyValues = sync.OnceValues(func() (vals, objs []*node) {
	vals, objs = make([]*node, maxDepth+3), make([]*node, maxDepth+3)
	num := newNode(node{kind: kNum, num: newNumSpec(false, bound{}, bound{})})
	for d := maxDepth + 2; d >= 0; d-- {
		opts := []*node{strNode(plainSpec(0, DefaultMaxString)), num, lit("true"), lit("false"), lit("null")}
		if d < maxDepth && d+2 < len(vals) {
			opts = append(opts, objs[d+1], rep('[', ']', vals[d+1], 0, DefaultMaxItems))
		}
		vals[d] = alt(opts...)
		if d+1 < len(vals) {
			objs[d] = rep('{', '}', seq(strNode(plainSpec(0, 64)), lit(":"), vals[d+1]), 0, DefaultMaxItems)
		} else {
			objs[d] = lit("{}")
		}
	}
	return vals, objs
})

func anyValue(depth int) *node {
	vals, _ := anyValues()
	return vals[min(depth, len(vals)-1)]
}

func anyObject(depth int) *node {
	_, objs := anyValues()
	return objs[min(depth, len(objs)-1)]
}

func strNode(p *strSpec) *node { return newNode(node{kind: kStr, str: p}) }

// Keywords. Annotations change nothing a value must be; the rest are what
// the compiler enforces. Anything else is refused by name.
var (
	annotations = set("$schema", "$id", "$anchor", "$dynamicAnchor", "$comment", "$defs", "definitions", "$vocabulary",
		"title", "description", "default", "examples", "example", "deprecated", "readOnly", "writeOnly",
		"format", "contentEncoding", "contentMediaType", "contentSchema", "discriminator", "externalDocs", "xml",
		"markdownDescription")
	supported = set("type", "enum", "const", "$ref", "anyOf", "oneOf", "allOf",
		"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
		"minLength", "maxLength", "pattern",
		"items", "minItems", "maxItems", "uniqueItems",
		"properties", "required", "additionalProperties", "unevaluatedProperties", "minProperties", "maxProperties", "propertyNames")
	// Keywords per type, for a schema that names no type.
	typeKeywords = map[string][]string{
		"object": {"properties", "required", "additionalProperties", "unevaluatedProperties", "minProperties", "maxProperties", "propertyNames"},
		"array":  {"items", "minItems", "maxItems", "uniqueItems"},
		"string": {"minLength", "maxLength", "pattern"},
		"number": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"},
	}
	jsonTypes = []string{"array", "boolean", "integer", "null", "number", "object", "string"}
)

func set(keys ...string) map[string]bool {
	m := map[string]bool{}
	for _, k := range keys {
		m[k] = true
	}
	return m
}

func (c *compiler) compile(v any, path string, depth int) (*node, error) {
	if depth > maxNesting {
		return nil, &SchemaError{path, "", fmt.Sprintf("nested more than %d schemas deep", maxNesting)}
	}
	if err := c.b.node(path, 1); err != nil {
		return nil, err
	}
	if b, ok := v.(bool); ok {
		if b {
			return anyValue(depth), nil
		}
		return nil, &SchemaError{path, "", "false admits no value"}
	}
	s, ok := v.(map[string]any)
	if !ok {
		return nil, &SchemaError{path, "", fmt.Sprintf("a schema is an object or a boolean, not %s", typeOf(v))}
	}
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var asserts []string // the keywords that constrain, in order
	for _, k := range keys {
		switch {
		case annotations[k] || strings.HasPrefix(k, "x-"):
		case supported[k]:
			asserts = append(asserts, k)
		default:
			return nil, &SchemaError{path, k, "keyword not supported by constrained decoding"}
		}
	}
	// besides refuses any constraining keyword next to the one that decides
	// this schema, except those allowed with it.
	besides := func(main string, allowed ...string) error {
		for _, k := range asserts {
			if k != main && !slices.Contains(allowed, k) {
				return &SchemaError{path, k, fmt.Sprintf("not supported beside %s", main)}
			}
		}
		return nil
	}
	if r, ok := s["$ref"]; ok {
		if err := besides("$ref"); err != nil {
			return nil, err
		}
		ref, ok := r.(string)
		if !ok {
			return nil, &SchemaError{path, "$ref", "must be a string"}
		}
		return c.ref(ref, path, depth)
	}
	if _, ok := s["const"]; ok {
		return c.enum(s, "const", path, besides)
	}
	if _, ok := s["enum"]; ok {
		return c.enum(s, "enum", path, besides)
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		if list, ok := s[key]; ok {
			if err := besides(key); err != nil {
				return nil, err
			}
			return c.anyOf(list, key, path, depth)
		}
	}
	if list, ok := s["allOf"]; ok {
		if err := besides("allOf"); err != nil {
			return nil, err
		}
		l, ok := list.([]any)
		if !ok || len(l) != 1 {
			return nil, &SchemaError{path, "allOf", "only an allOf of one schema is supported"}
		}
		return c.compile(l[0], path+"/allOf/0", depth+1)
	}
	types, err := c.types(s, path)
	if err != nil {
		return nil, err
	}
	if types == nil {
		return anyValue(depth), nil
	}
	var opts []*node
	for _, t := range types {
		n, err := c.compileType(t, s, path, depth)
		if err != nil {
			return nil, err
		}
		opts = append(opts, n)
	}
	if len(opts) == 1 {
		return opts[0], nil
	}
	return alt(opts...), nil
}

// types lists the JSON types a schema admits (nil: any value): its "type",
// or, without one, the types its keywords are about.
func (c *compiler) types(s map[string]any, path string) ([]string, error) {
	var types []string
	switch t := s["type"].(type) {
	case nil:
		if _, ok := s["type"]; ok {
			return nil, &SchemaError{path, "type", "must be a string or an array of strings"}
		}
		for _, name := range []string{"array", "number", "object", "string"} {
			for _, k := range typeKeywords[name] {
				if _, ok := s[k]; ok && !slices.Contains(types, name) {
					types = append(types, name)
				}
			}
		}
		return types, nil
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			name, ok := x.(string)
			if !ok {
				return nil, &SchemaError{path, "type", "must be a string or an array of strings"}
			}
			if !slices.Contains(types, name) {
				types = append(types, name)
			}
		}
		if len(types) == 0 {
			return nil, &SchemaError{path, "type", "an empty list admits no value"}
		}
	default:
		return nil, &SchemaError{path, "type", "must be a string or an array of strings"}
	}
	for _, t := range types {
		if !slices.Contains(jsonTypes, t) {
			return nil, &SchemaError{path, "type", fmt.Sprintf("%q is not a JSON type", t)}
		}
	}
	if slices.Contains(types, "number") { // integers are numbers
		types = slices.DeleteFunc(types, func(t string) bool { return t == "integer" })
	}
	return types, nil
}

func (c *compiler) anyOf(list any, key, path string, depth int) (*node, error) {
	l, ok := list.([]any)
	if !ok || len(l) == 0 {
		return nil, &SchemaError{path, key, "must be a non-empty array of schemas"}
	}
	var opts []*node
	for i, x := range l {
		if b, ok := x.(bool); ok && !b {
			continue // admits nothing: not an option
		}
		n, err := c.compile(x, fmt.Sprintf("%s/%s/%d", path, key, i), depth+1)
		if err != nil {
			return nil, err
		}
		opts = append(opts, n)
	}
	if len(opts) == 0 {
		return nil, &SchemaError{path, key, "admits no value"}
	}
	if len(opts) == 1 {
		return opts[0], nil
	}
	// NOTE: oneOf is compiled as anyOf: an output matching two branches
	// would break oneOf, which a grammar cannot see; schemas use oneOf for
	// branches that exclude each other (a discriminator), where it holds.
	return alt(opts...), nil
}

// enum compiles const or enum: the values (of the schema's type, when it
// names one) as literals, one sorted set however many.
func (c *compiler) enum(s map[string]any, key, path string, besides func(string, ...string) error) (*node, error) {
	if err := besides(key, "type"); err != nil {
		return nil, err
	}
	vals := []any{s[key]}
	if key == "enum" {
		l, ok := s["enum"].([]any)
		if !ok || len(l) == 0 {
			return nil, &SchemaError{path, "enum", "must be a non-empty array"}
		}
		vals = l
	}
	types, err := c.types(map[string]any{"type": s["type"]}, path)
	if _, named := s["type"]; !named {
		types, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	var texts []string
	for _, v := range vals {
		if types != nil && !hasType(v, types) {
			continue
		}
		t := canonical(v)
		if err := c.b.literal(path, len(t)); err != nil {
			return nil, err
		}
		texts = append(texts, t)
	}
	if len(texts) == 0 {
		return nil, &SchemaError{path, key, fmt.Sprintf("no value is of type %s", strings.Join(types, " or "))}
	}
	return oneOf(texts), nil
}

func typeOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case json.Number:
		if r, err := parseBound(x.String()); err == nil && r.IsInt() {
			return "integer"
		}
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

func hasType(v any, types []string) bool {
	t := typeOf(v)
	return slices.Contains(types, t) || t == "integer" && slices.Contains(types, "number")
}
