package grammar

import (
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
)

func (c *compiler) compileType(t string, s map[string]any, path string, depth int) (*node, error) {
	switch t {
	case "string":
		return c.stringType(s, path)
	case "integer", "number":
		return c.numberType(t == "integer", s, path)
	case "boolean":
		return oneOf([]string{"false", "true"}), nil
	case "null":
		return lit("null"), nil
	case "array":
		return c.arrayType(s, path, depth)
	}
	return c.objectType(s, path, depth)
}

// count reads a non-negative integer keyword; ok is false when absent.
func count(s map[string]any, key, path string) (n int, ok bool, err error) {
	v, present := s[key]
	if !present {
		return 0, false, nil
	}
	num, isNum := v.(json.Number)
	if !isNum {
		return 0, false, &SchemaError{path, key, "must be a non-negative integer"}
	}
	r, err := parseBound(num.String())
	if err != nil || !r.IsInt() || r.Sign() < 0 {
		return 0, false, &SchemaError{path, key, fmt.Sprintf("must be a non-negative integer, not %s", num)}
	}
	if r.Cmp(big.NewRat(maxCount, 1)) > 0 {
		return maxCount + 1, true, nil
	}
	return int(r.Num().Int64()), true, nil
}

// lengthBounds reads a min/max pair: the max defaults to dflt (at least
// the min), and is capped at maxCount (fewer is still valid).
func lengthBounds(s map[string]any, minKey, maxKey, path string, dflt int) (lo, hi int, err error) {
	lo, _, err = count(s, minKey, path)
	if err != nil {
		return 0, 0, err
	}
	if lo > maxCount {
		return 0, 0, &SchemaError{path, minKey, fmt.Sprintf("more than the %d a constrained output may hold", maxCount)}
	}
	hi, set, err := count(s, maxKey, path)
	if err != nil {
		return 0, 0, err
	}
	if !set {
		hi = max(dflt, lo)
	}
	hi = min(hi, maxCount)
	if hi < lo {
		return 0, 0, &SchemaError{path, minKey, fmt.Sprintf("%d is more than %s %d", lo, maxKey, hi)}
	}
	return lo, hi, nil
}

func (c *compiler) stringType(s map[string]any, path string) (*node, error) {
	lo, hi, err := lengthBounds(s, "minLength", "maxLength", path, DefaultMaxString)
	if err != nil {
		return nil, err
	}
	pat, ok := s["pattern"]
	if !ok {
		return strNode(plainSpec(lo, hi)), nil
	}
	src, isStr := pat.(string)
	if !isStr {
		return nil, &SchemaError{path, "pattern", "must be a string"}
	}
	re, err := parseRegex(src)
	if err != nil {
		return nil, &SchemaError{path, "pattern", err.Error()}
	}
	d, err := buildDFA(re, false, writableBMP, c.b.patternLimit())
	if err != nil {
		return nil, c.b.wrap(path, err)
	}
	c.b.nDFAStates += len(d.accept)
	p := &strSpec{dfa: d, min: lo, max: hi}
	if err := p.lengths(c.b.lim.LengthCells); err != nil {
		return nil, c.b.wrap(path, err)
	}
	if d.start < 0 || !p.feasible(d.start, 0) {
		return nil, &SchemaError{path, "pattern", fmt.Sprintf("no string of %d to %d characters the grammar writes matches %q", lo, hi, src)}
	}
	return strNode(p), nil
}

// numberType compiles the bounds: minimum and exclusiveMinimum (a number,
// or draft 4's boolean that makes minimum exclusive), and the same above.
func (c *compiler) numberType(integer bool, s map[string]any, path string) (*node, error) {
	read := func(key string) (*big.Rat, error) {
		v, ok := s[key]
		if !ok {
			return nil, nil
		}
		num, isNum := v.(json.Number)
		if !isNum {
			return nil, &SchemaError{path, key, "must be a number"}
		}
		r, err := parseBound(num.String())
		if err != nil {
			return nil, &SchemaError{path, key, err.Error()}
		}
		return r, nil
	}
	side := func(incl, excl string, lower bool) (bound, error) {
		b := bound{}
		v, err := read(incl)
		if err != nil {
			return b, err
		}
		b.v = v
		switch x := s[excl].(type) {
		case bool: // draft 4
			b.excl = x && v != nil
		case nil:
		default:
			e, err := read(excl)
			if err != nil {
				return b, err
			}
			// The tighter of the two wins; at a tie the exclusive one.
			if b.v == nil || lower && e.Cmp(b.v) >= 0 || !lower && e.Cmp(b.v) <= 0 {
				b = bound{e, true}
			}
		}
		return b, nil
	}
	lo, err := side("minimum", "exclusiveMinimum", true)
	if err != nil {
		return nil, err
	}
	hi, err := side("maximum", "exclusiveMaximum", false)
	if err != nil {
		return nil, err
	}
	p := newNumSpec(integer, lo, hi)
	if p == nil {
		key := "minimum"
		if lo.v == nil || lo.excl {
			key = "exclusiveMinimum"
			if _, ok := s[key]; !ok {
				key = "maximum"
			}
		}
		what := "number"
		if integer {
			what = "integer"
		}
		return nil, &SchemaError{path, key, fmt.Sprintf("no %s the grammar writes (at most %d integer and %d fraction digits) lies within the bounds", what, maxIntDigits, fracDigits)}
	}
	return newNode(node{kind: kNum, num: p}), nil
}

func (c *compiler) arrayType(s map[string]any, path string, depth int) (*node, error) {
	lo, hi, err := lengthBounds(s, "minItems", "maxItems", path, DefaultMaxItems)
	if err != nil {
		return nil, err
	}
	if u, ok := s["uniqueItems"]; ok {
		b, isBool := u.(bool)
		if !isBool {
			return nil, &SchemaError{path, "uniqueItems", "must be a boolean"}
		}
		if b && hi > 1 {
			return nil, &SchemaError{path, "uniqueItems", "true is not supported for more than one item (the grammar cannot compare items)"}
		}
	}
	item := anyValue(depth + 1)
	switch it := s["items"].(type) {
	case nil:
	case bool:
		if !it {
			if lo > 0 {
				return nil, &SchemaError{path, "items", fmt.Sprintf("false admits no item, and minItems is %d", lo)}
			}
			return lit("[]"), nil
		}
	case map[string]any:
		if item, err = c.compile(it, path+"/items", depth+1); err != nil {
			return nil, err
		}
	default:
		return nil, &SchemaError{path, "items", "only a schema is supported (not a list of them)"}
	}
	return rep('[', ']', item, lo, hi), nil
}

func (c *compiler) objectType(s map[string]any, path string, depth int) (*node, error) {
	props := map[string]any{}
	if p, ok := s["properties"]; ok {
		m, isMap := p.(map[string]any)
		if !isMap {
			return nil, &SchemaError{path, "properties", "must be an object"}
		}
		props = m
	}
	var extra any = true // what additionalProperties admits
	if ap, ok := s["additionalProperties"]; ok {
		extra = ap
	}
	for _, key := range []string{"unevaluatedProperties"} {
		if v, ok := s[key]; ok {
			if _, isBool := v.(bool); !isBool {
				return nil, &SchemaError{path, key, "only true or false is supported"}
			}
			if v == false {
				extra = false
			}
		}
	}
	if pn, ok := s["propertyNames"]; ok {
		// Keys are strings: only a schema that admits every string holds.
		if m, isMap := pn.(map[string]any); !(pn == true || isMap && (len(m) == 0 || len(m) == 1 && m["type"] == "string")) {
			return nil, &SchemaError{path, "propertyNames", "only a schema admitting every string is supported"}
		}
	}
	required := map[string]bool{}
	if r, ok := s["required"]; ok {
		list, isList := r.([]any)
		if !isList {
			return nil, &SchemaError{path, "required", "must be an array of strings"}
		}
		for _, x := range list {
			k, isStr := x.(string)
			if !isStr {
				return nil, &SchemaError{path, "required", "must be an array of strings"}
			}
			required[k] = true
		}
	}
	minP, hasMin, err := count(s, "minProperties", path)
	if err != nil {
		return nil, err
	}
	maxP, hasMax, err := count(s, "maxProperties", path)
	if err != nil {
		return nil, err
	}
	if len(props) == 0 && len(required) == 0 {
		// A map: any keys, values following additionalProperties.
		if extra == false {
			if minP > 0 {
				return nil, &SchemaError{path, "minProperties", "no property is allowed"}
			}
			return lit("{}"), nil
		}
		value := anyValue(depth + 1)
		if m, isMap := extra.(map[string]any); isMap {
			if value, err = c.compile(m, path+"/additionalProperties", depth+1); err != nil {
				return nil, err
			}
		}
		if !hasMax {
			maxP = max(DefaultMaxItems, minP)
		}
		if maxP < minP || minP > maxCount {
			return nil, &SchemaError{path, "minProperties", fmt.Sprintf("%d is more than maxProperties %d", minP, maxP)}
		}
		// NOTE: map keys are not kept distinct; a repeated key is valid JSON.
		return rep('{', '}', seq(strNode(plainSpec(0, 64)), lit(":"), value), minP, min(maxP, maxCount)), nil
	}
	keys := make([]string, 0, len(props)+len(required))
	for k := range props {
		keys = append(keys, k)
	}
	for k := range required {
		if _, ok := props[k]; !ok {
			if extra == false {
				return nil, &SchemaError{path, "required", fmt.Sprintf("%q is not among the properties, and additionalProperties is false", k)}
			}
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if err := c.b.node(path, len(keys)); err != nil {
		return nil, err
	}
	obj := &node{kind: kObj}
	nreq := 0
	for _, k := range keys {
		sub, in := props[k]
		subPath := path + "/properties/" + pointerEscape(k)
		if !in {
			sub, subPath = extra, path+"/additionalProperties"
		}
		if sub == false {
			if required[k] {
				return nil, &SchemaError{subPath, "", fmt.Sprintf("false admits no value, and %q is required", k)}
			}
			continue // may not appear: leave it out
		}
		n, err := c.compile(sub, subPath, depth+1)
		if err != nil {
			return nil, err
		}
		key := jsonString(k) + ":"
		obj.props = append(obj.props, prop{first: seq(lit(key), n), later: seq(lit(","+key), n), required: required[k]})
		if required[k] {
			nreq++
		}
	}
	// The output holds every required member and any of the others: that
	// must be within the property counts.
	if hasMin && minP > nreq {
		return nil, &SchemaError{path, "minProperties", fmt.Sprintf("%d is more than the %d required properties (only those are certain)", minP, nreq)}
	}
	if hasMax && maxP < len(obj.props) {
		return nil, &SchemaError{path, "maxProperties", fmt.Sprintf("%d is fewer than the %d properties", maxP, len(obj.props))}
	}
	return seq(lit("{"), newNode(*obj)), nil
}

// pointerEscape escapes a key for a JSON pointer.
func pointerEscape(k string) string {
	out := make([]byte, 0, len(k))
	for i := 0; i < len(k); i++ {
		switch k[i] {
		case '~':
			out = append(out, '~', '0')
		case '/':
			out = append(out, '~', '1')
		default:
			out = append(out, k[i])
		}
	}
	return string(out)
}
