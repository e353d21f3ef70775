package jinja

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Now is the clock strftime_now reads; tests pin it.
var Now = time.Now

var globals = map[string]Value{
	"range":           &Func{Name: "range", Fn: rangeFn},
	"namespace":       &Func{Name: "namespace", Fn: namespaceFn},
	"dict":            &Func{Name: "dict", Fn: dictFn},
	"raise_exception": &Func{Name: "raise_exception", Fn: raiseFn},
	"strftime_now": &Func{Name: "strftime_now", Fn: func(args []Value, _ *Dict) (Value, error) {
		if len(args) != 1 {
			return nil, fmt.Errorf("strftime_now takes one format string")
		}
		f, ok := args[0].(string)
		if !ok {
			return nil, fmt.Errorf("strftime_now takes a format string")
		}
		return strftime(Now(), f), nil
	}},
}

func rangeFn(args []Value, _ *Dict) (Value, error) {
	var n [3]int64
	n[2] = 1
	for i, a := range args {
		v, ok := toInt(a)
		if !ok || i > 2 {
			return nil, fmt.Errorf("range takes one to three integers")
		}
		n[i] = v
	}
	switch len(args) {
	case 0:
		return nil, fmt.Errorf("range takes one to three integers")
	case 1:
		n[0], n[1] = 0, n[0]
	}
	if n[2] == 0 {
		return nil, fmt.Errorf("range step must not be zero")
	}
	l := &List{}
	for i := n[0]; (n[2] > 0 && i < n[1]) || (n[2] < 0 && i > n[1]); i += n[2] {
		if len(l.Items) >= 1_000_000 {
			return nil, fmt.Errorf("range is over a million items")
		}
		l.Items = append(l.Items, i)
	}
	return l, nil
}

func namespaceFn(args []Value, kw *Dict) (Value, error) {
	d := NewDict()
	d.ns = true
	for _, a := range args {
		src, ok := a.(*Dict)
		if !ok {
			return nil, fmt.Errorf("namespace takes a dict or keyword arguments")
		}
		for _, k := range src.keys {
			d.Set(k, src.m[k])
		}
	}
	for _, k := range kw.keys {
		d.Set(k, kw.m[k])
	}
	return d, nil
}

func dictFn(args []Value, kw *Dict) (Value, error) {
	d, err := namespaceFn(args, kw)
	if err == nil {
		d.(*Dict).ns = false
	}
	return d, err
}

func raiseFn(args []Value, _ *Dict) (Value, error) {
	msg := "raise_exception"
	if len(args) > 0 {
		msg = str(args[0])
	}
	return nil, &Exception{Msg: msg}
}

// strftime formats t with the C/Python directives templates use.
func strftime(t time.Time, f string) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 >= len(f) {
			b.WriteByte(f[i])
			continue
		}
		i++
		c := f[i]
		pad := true
		if c == '-' && i+1 < len(f) {
			pad, i = false, i+1
			c = f[i]
		}
		num := func(v, w int) {
			if pad {
				fmt.Fprintf(&b, "%0*d", w, v)
			} else {
				b.WriteString(strconv.Itoa(v))
			}
		}
		switch c {
		case 'Y':
			b.WriteString(strconv.Itoa(t.Year()))
		case 'y':
			num(t.Year()%100, 2)
		case 'm':
			num(int(t.Month()), 2)
		case 'd':
			num(t.Day(), 2)
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'H':
			num(t.Hour(), 2)
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			num(h, 2)
		case 'M':
			num(t.Minute(), 2)
		case 'S':
			num(t.Second(), 2)
		case 'j':
			num(t.YearDay(), 3)
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'b', 'h':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'Z':
			z, _ := t.Zone()
			b.WriteString(z)
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(c)
		}
	}
	return b.String()
}

func (r *renderer) filter(f *filterExpr, v Value, sc *scope) (Value, error) {
	args, kw, err := r.args(f.args, f.kwargs, sc)
	if err != nil {
		return nil, err
	}
	out, err := applyFilter(f.name, v, args, kw, r, sc)
	if err != nil {
		return nil, errorf(f.line, "filter %s: %v", f.name, err)
	}
	return out, nil
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

func applyFilter(name string, v Value, args []Value, kw *Dict, r *renderer, sc *scope) (Value, error) {
	switch name {
	case "tojson":
		o := newJSONOptions()
		switch ind := arg(args, kw, 0, "indent", nil).(type) {
		case nil:
		case int64:
			o.hasIndent, o.indent, o.itemSep = true, strings.Repeat(" ", int(max(ind, 0))), ","
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
		return toJSON(v, o)
	case "string":
		return str(v), nil
	case "safe", "generation":
		return v, nil
	case "e", "escape", "forceescape":
		return html.EscapeString(str(v)), nil
	case "length", "count":
		return length(v)
	case "list":
		items, err := iterate(v)
		return &List{Items: slices.Clone(items)}, err
	case "first", "last":
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return Undefined{name}, nil
		}
		if name == "first" {
			return items[0], nil
		}
		return items[len(items)-1], nil
	case "default", "d":
		def := arg(args, kw, 0, "default_value", "")
		_, undef := v.(Undefined)
		if undef || truthy(arg(args, kw, 1, "boolean", false)) && !truthy(v) {
			return def, nil
		}
		return v, nil
	case "join":
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		attr := arg(nil, kw, -1, "attribute", nil)
		parts := make([]string, len(items))
		for i, x := range items {
			if attr != nil {
				x = getItem(x, attr)
			}
			parts[i] = str(x)
		}
		return strings.Join(parts, str(arg(args, kw, 0, "d", ""))), nil
	case "items":
		d, ok := v.(*Dict)
		if !ok {
			if _, undef := v.(Undefined); undef {
				return &List{}, nil
			}
			return nil, fmt.Errorf("needs a dict, got a %s", typeName(v))
		}
		return dictItems(d), nil
	case "dictsort":
		d, ok := v.(*Dict)
		if !ok {
			return nil, fmt.Errorf("needs a dict, got a %s", typeName(v))
		}
		keys := slices.Clone(d.keys)
		byValue := str(arg(args, kw, 1, "by", "key")) == "value"
		var err error
		slices.SortStableFunc(keys, func(a, b string) int {
			if byValue {
				c, e := compare(d.m[a], d.m[b])
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
		out := &List{}
		for _, k := range keys {
			out.Items = append(out.Items, &List{Items: []Value{k, d.m[k]}, tuple: true})
		}
		return out, err
	case "upper", "lower", "capitalize", "title", "trim":
		s, ok := v.(string)
		if !ok {
			s = str(v)
		}
		switch name {
		case "upper":
			return strings.ToUpper(s), nil
		case "lower":
			return strings.ToLower(s), nil
		case "capitalize":
			return capitalize(s), nil
		case "title":
			return title(s), nil
		}
		if chars, ok := arg(args, kw, 0, "chars", nil).(string); ok {
			return strings.Trim(s, chars), nil
		}
		return strings.TrimSpace(s), nil
	case "replace":
		s := str(v)
		old, ok1 := arg(args, kw, 0, "old", nil).(string)
		nw, ok2 := arg(args, kw, 1, "new", nil).(string)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("needs old and new strings")
		}
		n := -1
		if c, ok := toInt(arg(args, kw, 2, "count", nil)); ok {
			n = int(c)
		}
		return strings.Replace(s, old, nw, n), nil
	case "indent":
		return indent(str(v), args, kw)
	case "int":
		switch x := v.(type) {
		case int64:
			return x, nil
		case float64:
			return int64(x), nil
		case bool:
			n, _ := toInt(x)
			return n, nil
		case string:
			if n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64); err == nil {
				return n, nil
			}
			if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
				return int64(f), nil
			}
		}
		return arg(args, kw, 0, "default", int64(0)), nil
	case "float":
		if f, ok := toNumber(v); ok {
			return f, nil
		}
		if s, ok := v.(string); ok {
			if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
				return f, nil
			}
		}
		return arg(args, kw, 0, "default", 0.0), nil
	case "abs":
		switch x := v.(type) {
		case int64:
			if x < 0 {
				return -x, nil
			}
			return x, nil
		case float64:
			return math.Abs(x), nil
		}
		return nil, fmt.Errorf("needs a number, got a %s", typeName(v))
	case "round":
		f, ok := toNumber(v)
		if !ok {
			return nil, fmt.Errorf("needs a number, got a %s", typeName(v))
		}
		p, _ := toInt(arg(args, kw, 0, "precision", int64(0)))
		m := math.Pow(10, float64(p))
		switch str(arg(args, kw, 1, "method", "common")) {
		case "floor":
			return math.Floor(f*m) / m, nil
		case "ceil":
			return math.Ceil(f*m) / m, nil
		}
		return math.RoundToEven(f*m) / m, nil
	case "reverse":
		switch x := v.(type) {
		case string:
			rs := []rune(x)
			slices.Reverse(rs)
			return string(rs), nil
		}
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		out := slices.Clone(items)
		slices.Reverse(out)
		return &List{Items: out}, nil
	case "sort":
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		out := slices.Clone(items)
		attr := arg(args, kw, 2, "attribute", nil)
		var cerr error
		slices.SortStableFunc(out, func(a, b Value) int {
			if attr != nil {
				a, b = getItem(a, attr), getItem(b, attr)
			}
			c, e := compare(a, b)
			if e != nil {
				cerr = e
			}
			return c
		})
		if truthy(arg(args, kw, 0, "reverse", false)) {
			slices.Reverse(out)
		}
		return &List{Items: out}, cerr
	case "unique":
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		out := &List{}
		for _, x := range items {
			if !slices.ContainsFunc(out.Items, func(y Value) bool { return equal(x, y) }) {
				out.Items = append(out.Items, x)
			}
		}
		return out, nil
	case "sum", "min", "max":
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		if name == "sum" {
			var total Value = arg(args, kw, 1, "start", int64(0))
			for _, x := range items {
				if total, err = binaryOp("+", total, x); err != nil {
					return nil, err
				}
			}
			return total, nil
		}
		if len(items) == 0 {
			return Undefined{name}, nil
		}
		best := items[0]
		for _, x := range items[1:] {
			c, err := compare(x, best)
			if err != nil {
				return nil, err
			}
			if (name == "min" && c < 0) || (name == "max" && c > 0) {
				best = x
			}
		}
		return best, nil
	case "map":
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		out := &List{}
		if attr, ok := kw.Get("attribute"); ok {
			for _, x := range items {
				y := getItem(x, attr)
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
			y, err := applyFilter(fname, x, args[1:], NewDict(), r, sc)
			if err != nil {
				return nil, err
			}
			out.Items = append(out.Items, y)
		}
		return out, nil
	case "select", "reject", "selectattr", "rejectattr":
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		byAttr := strings.HasSuffix(name, "attr")
		keep := strings.HasPrefix(name, "select")
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
				y = getItem(x, attr)
			}
			ok := truthy(y)
			if len(rest) > 0 {
				tn, isStr := rest[0].(string)
				if !isStr {
					return nil, fmt.Errorf("needs a test name")
				}
				if ok, err = applyTest(tn, y, rest[1:]); err != nil {
					return nil, err
				}
			}
			if ok == keep {
				out.Items = append(out.Items, x)
			}
		}
		return out, nil
	case "batch":
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		n, ok := toInt(arg(args, kw, 0, "linecount", nil))
		if !ok || n <= 0 {
			return nil, fmt.Errorf("needs a positive size")
		}
		out := &List{}
		for i := 0; i < len(items); i += int(n) {
			out.Items = append(out.Items, &List{Items: slices.Clone(items[i:min(len(items), i+int(n))])})
		}
		return out, nil
	case "wordcount":
		return int64(len(strings.Fields(str(v)))), nil
	case "attr":
		return getAttr(v, str(arg(args, kw, 0, "name", ""))), nil
	case "pprint":
		return repr(v), nil
	case "center":
		w, _ := toInt(arg(args, kw, 0, "width", int64(80)))
		s := str(v)
		pad := int(w) - len([]rune(s))
		if pad <= 0 {
			return s, nil
		}
		left := pad / 2
		return strings.Repeat(" ", left) + s + strings.Repeat(" ", pad-left), nil
	case "truncate":
		s := []rune(str(v))
		n, _ := toInt(arg(args, kw, 0, "length", int64(255)))
		end := str(arg(args, kw, 2, "end", "..."))
		leeway, _ := toInt(arg(args, kw, 3, "leeway", int64(5)))
		if len(s) <= int(n+leeway) {
			return string(s), nil
		}
		cut := string(s[:max(0, int(n)-len([]rune(end)))])
		if !truthy(arg(args, kw, 1, "killwords", false)) {
			if i := strings.LastIndexByte(cut, ' '); i >= 0 {
				cut = cut[:i]
			}
		}
		return cut + end, nil
	}
	return nil, fmt.Errorf("unknown filter")
}

func dictItems(d *Dict) *List {
	out := &List{}
	for _, k := range d.keys {
		out.Items = append(out.Items, &List{Items: []Value{k, d.m[k]}, tuple: true})
	}
	return out
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	rs := []rune(strings.ToLower(s))
	rs[0] = unicode.ToUpper(rs[0])
	return string(rs)
}

func title(s string) string {
	rs := []rune(s)
	prev := false
	for i, r := range rs {
		if unicode.IsLetter(r) {
			if prev {
				rs[i] = unicode.ToLower(r)
			} else {
				rs[i] = unicode.ToUpper(r)
			}
			prev = true
		} else {
			prev = unicode.IsDigit(r) || r == '\''
		}
	}
	return string(rs)
}

func indent(s string, args []Value, kw *Dict) (Value, error) {
	pad := "    "
	switch w := arg(args, kw, 0, "width", int64(4)).(type) {
	case int64:
		pad = strings.Repeat(" ", int(max(w, 0)))
	case string:
		pad = w
	}
	first := truthy(arg(args, kw, 1, "first", false))
	blank := truthy(arg(args, kw, 2, "blank", false))
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if i == 0 && !first {
			continue
		}
		if l == "" && !blank {
			continue
		}
		lines[i] = pad + l
	}
	return strings.Join(lines, "\n"), nil
}

func (r *renderer) test(t *testExpr, sc *scope) (Value, error) {
	v, err := r.eval(t.x, sc)
	if err != nil {
		return nil, err
	}
	args, _, err := r.args(t.args, nil, sc)
	if err != nil {
		return nil, err
	}
	ok, err := applyTest(t.name, v, args)
	if err != nil {
		return nil, errorf(t.line, "test %s: %v", t.name, err)
	}
	return ok != t.negate, nil
}

func applyTest(name string, v Value, args []Value) (bool, error) {
	one := func() (Value, error) {
		if len(args) != 1 {
			return nil, fmt.Errorf("takes one argument")
		}
		return args[0], nil
	}
	switch name {
	case "defined":
		_, u := v.(Undefined)
		return !u, nil
	case "undefined":
		_, u := v.(Undefined)
		return u, nil
	case "none":
		return v == nil, nil
	case "boolean":
		_, ok := v.(bool)
		return ok, nil
	case "true":
		b, ok := v.(bool)
		return ok && b, nil
	case "false":
		b, ok := v.(bool)
		return ok && !b, nil
	case "string":
		_, ok := v.(string)
		return ok, nil
	case "number":
		switch v.(type) {
		case int64, float64:
			return true, nil
		}
		return false, nil
	case "integer":
		_, ok := v.(int64)
		return ok, nil
	case "float":
		_, ok := v.(float64)
		return ok, nil
	case "mapping":
		d, ok := v.(*Dict)
		return ok && !d.ns, nil
	case "sequence":
		switch v.(type) {
		case string, *List, *Dict:
			return true, nil
		}
		return false, nil
	case "iterable":
		switch v.(type) {
		case string, *List, *Dict, Undefined:
			return true, nil
		}
		return false, nil
	case "callable":
		_, ok := v.(*Func)
		return ok, nil
	case "odd", "even":
		n, ok := toInt(v)
		if !ok {
			return false, fmt.Errorf("needs an integer")
		}
		return (n%2 != 0) == (name == "odd"), nil
	case "divisibleby":
		a, err := one()
		if err != nil {
			return false, err
		}
		n, ok1 := toInt(v)
		d, ok2 := toInt(a)
		if !ok1 || !ok2 || d == 0 {
			return false, fmt.Errorf("needs nonzero integers")
		}
		return n%d == 0, nil
	case "eq", "equalto", "==", "sameas":
		a, err := one()
		if err != nil {
			return false, err
		}
		if name == "sameas" {
			switch v.(type) {
			case *List, *Dict:
				return v == a, nil
			}
		}
		return equal(v, a), nil
	case "ne", "!=":
		a, err := one()
		return err == nil && !equal(v, a), err
	case "lt", "gt", "le", "ge", "<", ">", "<=", ">=", "lessthan", "greaterthan":
		a, err := one()
		if err != nil {
			return false, err
		}
		c, err := compare(v, a)
		switch name {
		case "lt", "<", "lessthan":
			return c < 0, err
		case "gt", ">", "greaterthan":
			return c > 0, err
		case "le", "<=":
			return c <= 0, err
		}
		return c >= 0, err
	case "in":
		a, err := one()
		if err != nil {
			return false, err
		}
		return contains(a, v)
	case "lower", "upper":
		s, ok := v.(string)
		if !ok {
			return false, nil
		}
		if name == "lower" {
			return s == strings.ToLower(s), nil
		}
		return s == strings.ToUpper(s), nil
	}
	return false, fmt.Errorf("unknown test")
}

// method is the bound method obj.name of a str, dict or list, or nil.
func method(obj Value, name string) *Func {
	bind := func(fn func(args []Value, kw *Dict) (Value, error)) *Func {
		return &Func{Name: typeName(obj) + "." + name, Fn: fn}
	}
	switch o := obj.(type) {
	case string:
		return strMethod(o, name, bind)
	case *Dict:
		if o.ns {
			return nil
		}
		switch name {
		case "items":
			return bind(func([]Value, *Dict) (Value, error) { return dictItems(o), nil })
		case "keys", "values":
			return bind(func([]Value, *Dict) (Value, error) {
				out := &List{}
				for _, k := range o.keys {
					if name == "keys" {
						out.Items = append(out.Items, k)
					} else {
						out.Items = append(out.Items, o.m[k])
					}
				}
				return out, nil
			})
		case "get":
			return bind(func(args []Value, kw *Dict) (Value, error) {
				if len(args) == 0 {
					return nil, fmt.Errorf("needs a key")
				}
				if v, ok := o.m[str(args[0])]; ok {
					return v, nil
				}
				return arg(args, kw, 1, "default", nil), nil
			})
		case "pop":
			return bind(func(args []Value, _ *Dict) (Value, error) {
				if len(args) == 0 {
					return nil, fmt.Errorf("needs a key")
				}
				k := str(args[0])
				v, ok := o.m[k]
				if !ok {
					if len(args) > 1 {
						return args[1], nil
					}
					return nil, fmt.Errorf("key %s is not there", pyQuote(k))
				}
				o.del(k)
				return v, nil
			})
		case "update":
			return bind(func(args []Value, kw *Dict) (Value, error) {
				for _, a := range args {
					if d, ok := a.(*Dict); ok {
						for _, k := range d.keys {
							o.Set(k, d.m[k])
						}
					}
				}
				for _, k := range kw.keys {
					o.Set(k, kw.m[k])
				}
				return nil, nil
			})
		case "copy":
			return bind(func([]Value, *Dict) (Value, error) {
				d := NewDict()
				for _, k := range o.keys {
					d.Set(k, o.m[k])
				}
				return d, nil
			})
		}
	case *List:
		switch name {
		case "append":
			return bind(func(args []Value, _ *Dict) (Value, error) {
				if len(args) != 1 {
					return nil, fmt.Errorf("takes one value")
				}
				o.Items = append(o.Items, args[0])
				return nil, nil
			})
		case "extend":
			return bind(func(args []Value, _ *Dict) (Value, error) {
				if len(args) != 1 {
					return nil, fmt.Errorf("takes one list")
				}
				items, err := iterate(args[0])
				o.Items = append(o.Items, items...)
				return nil, err
			})
		case "pop":
			return bind(func(args []Value, _ *Dict) (Value, error) {
				if len(o.Items) == 0 {
					return nil, fmt.Errorf("pop from an empty list")
				}
				i := int64(len(o.Items) - 1)
				if len(args) > 0 {
					i, _ = toInt(args[0])
					if i < 0 {
						i += int64(len(o.Items))
					}
				}
				if i < 0 || i >= int64(len(o.Items)) {
					return nil, fmt.Errorf("pop index out of range")
				}
				v := o.Items[i]
				o.Items = slices.Delete(o.Items, int(i), int(i)+1)
				return v, nil
			})
		case "index":
			return bind(func(args []Value, _ *Dict) (Value, error) {
				if len(args) == 0 {
					return nil, fmt.Errorf("needs a value")
				}
				for i, x := range o.Items {
					if equal(x, args[0]) {
						return int64(i), nil
					}
				}
				return nil, fmt.Errorf("%s is not in list", repr(args[0]))
			})
		case "count":
			return bind(func(args []Value, _ *Dict) (Value, error) {
				n := int64(0)
				for _, x := range o.Items {
					if len(args) > 0 && equal(x, args[0]) {
						n++
					}
				}
				return n, nil
			})
		}
	}
	return nil
}

func strMethod(s, name string, bind func(func([]Value, *Dict) (Value, error)) *Func) *Func {
	strArg := func(args []Value, i int) (string, bool) {
		if i >= len(args) || args[i] == nil {
			return "", false
		}
		v, ok := args[i].(string)
		return v, ok
	}
	switch name {
	case "startswith", "endswith":
		return bind(func(args []Value, _ *Dict) (Value, error) {
			if len(args) == 0 {
				return nil, fmt.Errorf("needs a prefix")
			}
			var cands []Value
			if l, ok := args[0].(*List); ok {
				cands = l.Items
			} else {
				cands = []Value{args[0]}
			}
			for _, c := range cands {
				p, ok := c.(string)
				if !ok {
					return nil, fmt.Errorf("needs a string or a tuple of strings")
				}
				if name == "startswith" && strings.HasPrefix(s, p) || name == "endswith" && strings.HasSuffix(s, p) {
					return true, nil
				}
			}
			return false, nil
		})
	case "strip", "lstrip", "rstrip":
		return bind(func(args []Value, _ *Dict) (Value, error) {
			chars, ok := strArg(args, 0)
			if !ok {
				switch name {
				case "strip":
					return strings.TrimSpace(s), nil
				case "lstrip":
					return strings.TrimLeftFunc(s, unicode.IsSpace), nil
				}
				return strings.TrimRightFunc(s, unicode.IsSpace), nil
			}
			switch name {
			case "strip":
				return strings.Trim(s, chars), nil
			case "lstrip":
				return strings.TrimLeft(s, chars), nil
			}
			return strings.TrimRight(s, chars), nil
		})
	case "split", "rsplit":
		return bind(func(args []Value, kw *Dict) (Value, error) {
			sep, hasSep := strArg(args, 0)
			if v, ok := kw.Get("sep"); ok {
				sep, hasSep = str(v), v != nil
			}
			n := int64(-1)
			if v, ok := toInt(arg(args, kw, 1, "maxsplit", int64(-1))); ok {
				n = v
			}
			var parts []string
			switch {
			case !hasSep:
				parts = strings.Fields(s)
				if n >= 0 && int(n) < len(parts) {
					// Re-split keeping the remainder whole, as Python does.
					parts = splitFields(s, int(n), name == "rsplit")
				}
			case sep == "":
				return nil, fmt.Errorf("empty separator")
			case n < 0:
				parts = strings.Split(s, sep)
			case name == "split":
				parts = strings.SplitN(s, sep, int(n)+1)
			default:
				parts = rsplitN(s, sep, int(n))
			}
			out := &List{}
			for _, p := range parts {
				out.Items = append(out.Items, p)
			}
			return out, nil
		})
	case "splitlines":
		return bind(func([]Value, *Dict) (Value, error) {
			out := &List{}
			for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
				out.Items = append(out.Items, strings.TrimSuffix(l, "\r"))
			}
			if s == "" {
				out.Items = nil
			}
			return out, nil
		})
	case "upper", "lower", "title", "capitalize":
		return bind(func([]Value, *Dict) (Value, error) {
			switch name {
			case "upper":
				return strings.ToUpper(s), nil
			case "lower":
				return strings.ToLower(s), nil
			case "title":
				return title(s), nil
			}
			return capitalize(s), nil
		})
	case "replace":
		return bind(func(args []Value, _ *Dict) (Value, error) {
			old, ok1 := strArg(args, 0)
			nw, ok2 := strArg(args, 1)
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("needs old and new strings")
			}
			n := -1
			if len(args) > 2 {
				if c, ok := toInt(args[2]); ok {
					n = int(c)
				}
			}
			return strings.Replace(s, old, nw, n), nil
		})
	case "find", "rfind", "count":
		return bind(func(args []Value, _ *Dict) (Value, error) {
			sub, ok := strArg(args, 0)
			if !ok {
				return nil, fmt.Errorf("needs a string")
			}
			var i int
			switch name {
			case "find":
				i = strings.Index(s, sub)
			case "rfind":
				i = strings.LastIndex(s, sub)
			default:
				return int64(strings.Count(s, sub)), nil
			}
			if i >= 0 {
				i = len([]rune(s[:i]))
			}
			return int64(i), nil
		})
	case "join":
		return bind(func(args []Value, _ *Dict) (Value, error) {
			if len(args) != 1 {
				return nil, fmt.Errorf("takes one iterable")
			}
			items, err := iterate(args[0])
			if err != nil {
				return nil, err
			}
			parts := make([]string, len(items))
			for i, x := range items {
				parts[i] = str(x)
			}
			return strings.Join(parts, s), nil
		})
	case "isdigit", "isalpha", "isspace", "isalnum":
		return bind(func([]Value, *Dict) (Value, error) {
			if s == "" {
				return false, nil
			}
			for _, r := range s {
				ok := false
				switch name {
				case "isdigit":
					ok = unicode.IsDigit(r)
				case "isalpha":
					ok = unicode.IsLetter(r)
				case "isspace":
					ok = unicode.IsSpace(r)
				default:
					ok = unicode.IsLetter(r) || unicode.IsDigit(r)
				}
				if !ok {
					return false, nil
				}
			}
			return true, nil
		})
	}
	return nil
}

// splitFields is str.split()/rsplit() with maxsplit n on runs of space.
func splitFields(s string, n int, fromRight bool) []string {
	if !fromRight {
		var out []string
		rest := strings.TrimLeftFunc(s, unicode.IsSpace)
		for len(out) < n && rest != "" {
			i := strings.IndexFunc(rest, unicode.IsSpace)
			if i < 0 {
				break
			}
			out = append(out, rest[:i])
			rest = strings.TrimLeftFunc(rest[i:], unicode.IsSpace)
		}
		if rest != "" {
			out = append(out, rest)
		}
		return out
	}
	var out []string
	rest := strings.TrimRightFunc(s, unicode.IsSpace)
	for len(out) < n && rest != "" {
		i := strings.LastIndexFunc(rest, unicode.IsSpace)
		if i < 0 {
			break
		}
		out = append([]string{rest[i+1:]}, out...)
		rest = strings.TrimRightFunc(rest[:i], unicode.IsSpace)
	}
	if rest != "" {
		out = append([]string{rest}, out...)
	}
	return out
}

func rsplitN(s, sep string, n int) []string {
	var out []string
	for len(out) < n {
		i := strings.LastIndex(s, sep)
		if i < 0 {
			break
		}
		out = append([]string{s[i+len(sep):]}, out...)
		s = s[:i]
	}
	return append([]string{s}, out...)
}
