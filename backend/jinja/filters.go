package jinja

import (
	"fmt"
	"slices"
	"strings"
)

// filterFunc is one filter: v is the value piped in, args and kw the
// call's arguments. A filter whose output can outgrow its input takes the
// size from r's budget before it builds it.
type filterFunc func(r *renderer, v Value, args []Value, kw *Dict) (Value, error)

// filters is the registry of filters by name; it is filled in init because
// map and select call back into it and into tests.
var filters map[string]filterFunc

func init() {
	filters = map[string]filterFunc{
		"tojson":     tojsonFilter,
		"string":     func(r *renderer, v Value, _ []Value, _ *Dict) (Value, error) { return r.str(v) },
		"safe":       identity,
		"generation": identity,
		"length":     lengthFilter,
		"count":      lengthFilter,
		"list":       listFilter,
		"first":      endFilter(true),
		"last":       endFilter(false),
		"default":    defaultFilter,
		"d":          defaultFilter,
		"join":       joinFilter,
		"items":      itemsFilter,
		"dictsort":   dictsortFilter,
		"upper":      stringFilter(strings.ToUpper),
		"lower":      stringFilter(strings.ToLower),
		"capitalize": stringFilter(capitalize),
		"title":      stringFilter(title),
		"trim":       trimFilter,
		"replace":    replaceFilter,
		"indent":     indentFilter,
		"int":        intFilter,
		"float":      floatFilter,
		"abs":        absFilter,
		"round":      roundFilter,
		"reverse":    reverseFilter,
		"sort":       sortFilter,
		"unique":     uniqueFilter,
		"sum":        sumFilter,
		"min":        extremeFilter(-1),
		"max":        extremeFilter(1),
		"map":        mapFilter,
		"select":     selectFilter(false, true),
		"reject":     selectFilter(false, false),
		"selectattr": selectFilter(true, true),
		"rejectattr": selectFilter(true, false),
		"batch":      batchFilter,
		"wordcount":  wordcountFilter,
		"attr":       attrFilter,
		"pprint":     func(r *renderer, v Value, _ []Value, _ *Dict) (Value, error) { return r.repr(v) },
		"center":     centerFilter,
		"truncate":   truncateFilter,
	}
	for _, name := range []string{"e", "escape", "forceescape"} {
		filters[name] = escapeFilter
	}
}

func (r *renderer) filter(f *filterExpr, v Value, sc *scope) (Value, error) {
	args, kw, err := r.args(f.args, f.kwargs, sc)
	if err != nil {
		return nil, err
	}
	out, err := r.applyFilter(f.name, v, args, kw)
	if err != nil {
		return nil, errorf(f.line, "filter %s: %v", f.name, err)
	}
	return out, nil
}

// applyFilter runs filter name. Its work is counted from the sizes of what
// it is given, as if it read all of it: most filters do.
func (r *renderer) applyFilter(name string, v Value, args []Value, kw *Dict) (Value, error) {
	fn, ok := filters[name]
	if !ok {
		return nil, fmt.Errorf("unknown filter")
	}
	if err := r.work(workStep + sizeOf(v) + sizesOf(args) + sizesOf(kw.values())); err != nil {
		return nil, err
	}
	return fn(r, v, args, kw)
}

// arg returns positional i, else keyword name, else def.
func arg(args []Value, kw *Dict, i int, name string, def Value) Value {
	if i >= 0 && i < len(args) {
		return args[i]
	}
	if v, ok := kw.Get(name); ok {
		return v
	}
	return def
}

func identity(_ *renderer, v Value, _ []Value, _ *Dict) (Value, error) { return v, nil }

func tojsonFilter(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	o := newJSONOptions()
	switch ind := arg(args, kw, 0, "indent", nil).(type) {
	case nil:
	case int64:
		pad, err := r.spaces(ind)
		if err != nil {
			return nil, err
		}
		o.hasIndent, o.indent, o.itemSep = true, pad, ","
	case string:
		o.hasIndent, o.indent, o.itemSep = true, ind, ","
	default:
		return nil, fmt.Errorf("indent must be an integer or a string")
	}
	if sep, ok := arg(nil, kw, -1, "separators", nil).(*List); ok && len(sep.Items) == 2 {
		o.itemSep, o.keySep = str(sep.Items[0]), str(sep.Items[1])
	}
	o.sortKeys = truthy(arg(nil, kw, -1, "sort_keys", false))
	o.ensureASCI = truthy(arg(nil, kw, -1, "ensure_ascii", false))
	return r.toJSON(v, o)
}

func lengthFilter(r *renderer, v Value, _ []Value, _ *Dict) (Value, error) { return r.length(v) }

func listFilter(r *renderer, v Value, _ []Value, _ *Dict) (Value, error) {
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	return r.newList(slices.Clone(items))
}

// endFilter is first (first true) or last.
func endFilter(first bool) filterFunc {
	return func(r *renderer, v Value, _ []Value, _ *Dict) (Value, error) {
		items, err := r.iterate(v)
		if err != nil {
			return nil, err
		}
		switch {
		case len(items) == 0 && first:
			return Undefined{"first"}, nil
		case len(items) == 0:
			return Undefined{"last"}, nil
		case first:
			return items[0], nil
		}
		return items[len(items)-1], nil
	}
}

func defaultFilter(_ *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	def := arg(args, kw, 0, "default_value", "")
	_, undef := v.(Undefined)
	if undef || truthy(arg(args, kw, 1, "boolean", false)) && !truthy(v) {
		return def, nil
	}
	return v, nil
}

func joinFilter(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	if attr := arg(nil, kw, -1, "attribute", nil); attr != nil {
		if err := r.spendN(int64(len(items)), 16); err != nil {
			return nil, err
		}
		got := make([]Value, len(items))
		for i, x := range items {
			got[i] = r.getItem(x, attr)
		}
		items = got
	}
	sep, err := r.str(arg(args, kw, 0, "d", ""))
	if err != nil {
		return nil, err
	}
	return r.join(items, sep)
}

func itemsFilter(r *renderer, v Value, _ []Value, _ *Dict) (Value, error) {
	d, ok := v.(*Dict)
	if !ok {
		if _, undef := v.(Undefined); undef {
			return &List{}, nil
		}
		return nil, fmt.Errorf("needs a dict, got a %s", typeName(v))
	}
	return r.dictItems(d)
}

func dictsortFilter(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	d, ok := v.(*Dict)
	if !ok {
		return nil, fmt.Errorf("needs a dict, got a %s", typeName(v))
	}
	if err := r.sorting(len(d.keys)); err != nil {
		return nil, err
	}
	out, err := r.dictItems(d)
	if err != nil {
		return nil, err
	}
	keys := slices.Clone(d.keys)
	byValue := str(arg(args, kw, 1, "by", "key")) == "value"
	slices.SortStableFunc(keys, func(a, b string) int {
		if byValue {
			c, e := r.compare(d.m[a], d.m[b])
			if e != nil {
				err = e
			}
			return c
		}
		return strings.Compare(strings.ToLower(a), strings.ToLower(b))
	})
	if truthy(arg(args, kw, 2, "reverse", false)) {
		slices.Reverse(keys)
	}
	for i, k := range keys {
		out.Items[i] = &List{Items: []Value{k, d.m[k]}, tuple: true}
	}
	return out, err
}

func reverseFilter(r *renderer, v Value, _ []Value, _ *Dict) (Value, error) {
	if s, ok := v.(string); ok {
		if err := r.spendN(int64(len(s)), 5); err != nil {
			return nil, err
		}
		rs := []rune(s)
		slices.Reverse(rs)
		return string(rs), nil
	}
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	out, err := r.newList(slices.Clone(items))
	if err == nil {
		slices.Reverse(out.(*List).Items)
	}
	return out, err
}

func sortFilter(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	if err := r.sorting(len(items)); err != nil {
		return nil, err
	}
	if err := r.spendN(int64(len(items)), 16); err != nil {
		return nil, err
	}
	out := slices.Clone(items)
	attr := arg(args, kw, 2, "attribute", nil)
	var cerr error
	slices.SortStableFunc(out, func(a, b Value) int {
		if attr != nil {
			a, b = r.getItem(a, attr), r.getItem(b, attr)
		}
		c, e := r.compare(a, b)
		if e != nil {
			cerr = e
		}
		return c
	})
	if truthy(arg(args, kw, 0, "reverse", false)) {
		slices.Reverse(out)
	}
	return &List{Items: out}, cerr
}

func uniqueFilter(r *renderer, v Value, _ []Value, _ *Dict) (Value, error) {
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	if err := r.spendN(int64(len(items)), 16); err != nil {
		return nil, err
	}
	out := &List{}
	for _, x := range items {
		if !slices.ContainsFunc(out.Items, func(y Value) bool { return r.equal(x, y) }) {
			out.Items = append(out.Items, x)
		}
		if r.err != nil {
			return nil, r.err
		}
	}
	return out, nil
}

func sumFilter(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	var total Value = arg(args, kw, 1, "start", int64(0))
	for _, x := range items {
		if total, err = r.binaryOp("+", total, x); err != nil {
			return nil, err
		}
	}
	return total, nil
}

// extremeFilter is min (sign -1) or max (sign 1).
func extremeFilter(sign int) filterFunc {
	return func(r *renderer, v Value, _ []Value, _ *Dict) (Value, error) {
		items, err := r.iterate(v)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			if sign < 0 {
				return Undefined{"min"}, nil
			}
			return Undefined{"max"}, nil
		}
		best := items[0]
		for _, x := range items[1:] {
			c, err := r.compare(x, best)
			if err != nil {
				return nil, err
			}
			if c*sign > 0 {
				best = x
			}
		}
		return best, nil
	}
}

func mapFilter(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	if !truthy(v) {
		return &List{}, nil // Jinja2's "if seq:": none maps to nothing
	}
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	if err := r.spendN(int64(len(items)), 16); err != nil {
		return nil, err
	}
	out := &List{}
	if attr, ok := kw.Get("attribute"); ok {
		for _, x := range items {
			y := r.getItem(x, attr)
			if _, undef := y.(Undefined); undef {
				if d, ok := kw.Get("default"); ok {
					y = d
				}
			}
			out.Items = append(out.Items, y)
		}
		return out, nil
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("needs a filter name or attribute=")
	}
	fname, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("needs a filter name")
	}
	for _, x := range items {
		y, err := r.applyFilter(fname, x, args[1:], NewDict())
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, y)
	}
	return out, nil
}

// selectFilter is select/reject (byAttr false) and selectattr/rejectattr:
// items whose value (or attribute) passes the named test, or is truthy
// without one, are kept when keep is true and dropped when it is false.
func selectFilter(byAttr, keep bool) filterFunc {
	return func(r *renderer, v Value, args []Value, _ *Dict) (Value, error) {
		if !truthy(v) {
			return &List{}, nil // Jinja2's "if seq:": none selects nothing
		}
		items, err := r.iterate(v)
		if err != nil {
			return nil, err
		}
		if err := r.spendN(int64(len(items)), 16); err != nil {
			return nil, err
		}
		rest := args
		var attr Value
		if byAttr {
			if len(rest) == 0 {
				return nil, fmt.Errorf("needs an attribute name")
			}
			attr, rest = rest[0], rest[1:]
		}
		out := &List{}
		for _, x := range items {
			y := x
			if byAttr {
				y = r.getItem(x, attr)
			}
			ok := truthy(y)
			if len(rest) > 0 {
				tn, isStr := rest[0].(string)
				if !isStr {
					return nil, fmt.Errorf("needs a test name")
				}
				if ok, err = r.applyTest(tn, y, rest[1:]); err != nil {
					return nil, err
				}
			}
			if ok == keep {
				out.Items = append(out.Items, x)
			}
		}
		return out, nil
	}
}

func batchFilter(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	items, err := r.iterate(v)
	if err != nil {
		return nil, err
	}
	n, ok := toInt(arg(args, kw, 0, "linecount", nil))
	if !ok || n <= 0 {
		return nil, fmt.Errorf("needs a positive size")
	}
	if err := r.spendN(int64(len(items)), 64); err != nil {
		return nil, err
	}
	out := &List{}
	for i := int64(0); i < int64(len(items)); i += n {
		out.Items = append(out.Items, &List{Items: slices.Clone(items[i:min(int64(len(items)), i+n)])})
	}
	return out, nil
}

func attrFilter(_ *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	return getAttr(v, str(arg(args, kw, 0, "name", ""))), nil
}

// dictItems is d.items(): (key, value) tuples in d's order.
func (r *renderer) dictItems(d *Dict) (*List, error) {
	if err := r.spendN(int64(len(d.keys)), 96); err != nil {
		return nil, err
	}
	out := &List{Items: make([]Value, len(d.keys))}
	for i, k := range d.keys {
		out.Items[i] = &List{Items: []Value{k, d.m[k]}, tuple: true}
	}
	return out, nil
}
