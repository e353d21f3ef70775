package jinja

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A method is obj.name(args) on a receiver of type T; method binds it to
// its receiver as a callable.
type methodFunc[T any] func(r *renderer, recv T, args []Value, kw *Dict) (Value, error)

// strMethods, dictMethods and listMethods are the Python methods templates
// call, by receiver type and name.
var (
	strMethods = map[string]methodFunc[string]{
		"startswith": affixMethod(strings.HasPrefix),
		"endswith":   affixMethod(strings.HasSuffix),
		"strip":      stripMethod(strings.TrimSpace, strings.Trim),
		"lstrip":     stripMethod(func(s string) string { return strings.TrimLeftFunc(s, unicode.IsSpace) }, strings.TrimLeft),
		"rstrip":     stripMethod(func(s string) string { return strings.TrimRightFunc(s, unicode.IsSpace) }, strings.TrimRight),
		"split":      splitMethod(false),
		"rsplit":     splitMethod(true),
		"splitlines": splitlinesMethod,
		"upper":      caseMethod(strings.ToUpper),
		"lower":      caseMethod(strings.ToLower),
		"title":      caseMethod(title),
		"capitalize": caseMethod(capitalize),
		"replace":    strReplaceMethod,
		"find":       findMethod(strings.Index),
		"rfind":      findMethod(strings.LastIndex),
		"count":      strCountMethod,
		"join":       strJoinMethod,
		"isdigit":    classMethod(unicode.IsDigit),
		"isalpha":    classMethod(unicode.IsLetter),
		"isspace":    classMethod(unicode.IsSpace),
		"isalnum":    classMethod(func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }),
	}
	dictMethods = map[string]methodFunc[*Dict]{
		"items":  func(r *renderer, d *Dict, _ []Value, _ *Dict) (Value, error) { return r.dictItems(d) },
		"keys":   dictKeysMethod,
		"values": dictValuesMethod,
		"get":    dictGetMethod,
		"pop":    dictPopMethod,
		"update": dictUpdateMethod,
		"copy":   dictCopyMethod,
	}
	listMethods = map[string]methodFunc[*List]{
		"append": listAppendMethod,
		"extend": listExtendMethod,
		"pop":    listPopMethod,
		"index":  listIndexMethod,
		"count":  listCountMethod,
	}
)

// method is the bound method obj.name of a str, dict or list, or nil.
func method(obj Value, name string) *Func {
	switch o := obj.(type) {
	case string:
		return bindMethod(strMethods, o, name)
	case *Dict:
		if o.ns {
			return nil
		}
		return bindMethod(dictMethods, o, name)
	case *List:
		return bindMethod(listMethods, o, name)
	}
	return nil
}

func bindMethod[T any](table map[string]methodFunc[T], recv T, name string) *Func {
	fn, ok := table[name]
	if !ok {
		return nil
	}
	return &Func{Name: typeName(recv) + "." + name, recv: recv, fn: func(r *renderer, args []Value, kw *Dict) (Value, error) {
		return fn(r, recv, args, kw)
	}}
}

// strArg is positional i as a string; absent or none is not ok.
func strArg(args []Value, i int) (string, bool) {
	if i >= len(args) || args[i] == nil {
		return "", false
	}
	v, ok := args[i].(string)
	return v, ok
}

// affixMethod is startswith or endswith: has reports a match of one
// candidate, given alone or as a tuple.
func affixMethod(has func(s, affix string) bool) methodFunc[string] {
	return func(_ *renderer, s string, args []Value, _ *Dict) (Value, error) {
		if len(args) == 0 {
			return nil, fmt.Errorf("needs a prefix")
		}
		cands := []Value{args[0]}
		if l, ok := args[0].(*List); ok {
			cands = l.Items
		}
		for _, c := range cands {
			p, ok := c.(string)
			if !ok {
				return nil, fmt.Errorf("needs a string or a tuple of strings")
			}
			if has(s, p) {
				return true, nil
			}
		}
		return false, nil
	}
}

// stripMethod is strip, lstrip or rstrip: space without an argument,
// else the argument's characters.
func stripMethod(space func(string) string, chars func(s, cutset string) string) methodFunc[string] {
	return func(_ *renderer, s string, args []Value, _ *Dict) (Value, error) {
		if cs, ok := strArg(args, 0); ok {
			return chars(s, cs), nil
		}
		return space(s), nil
	}
}

func splitMethod(fromRight bool) methodFunc[string] {
	return func(r *renderer, s string, args []Value, kw *Dict) (Value, error) {
		sep, hasSep := strArg(args, 0)
		if v, ok := kw.Get("sep"); ok {
			sep, hasSep = str(v), v != nil
		}
		n := int64(-1)
		if v, ok := toInt(arg(args, kw, 1, "maxsplit", int64(-1))); ok {
			n = v
		}
		// At most one part per separator (or per byte, split on space),
		// each a string header and a value: counted before splitting.
		most := int64(len(s)) + 1
		if hasSep && sep != "" {
			most = int64(strings.Count(s, sep)) + 1
		}
		if n >= 0 {
			most = min(most, n+1)
		}
		if err := r.spendN(most, 48); err != nil {
			return nil, err
		}
		var parts []string
		switch {
		case !hasSep:
			parts = strings.Fields(s)
			if n >= 0 && int(n) < len(parts) {
				// Re-split keeping the remainder whole, as Python does.
				parts = splitFields(s, int(n), fromRight)
			}
		case sep == "":
			return nil, fmt.Errorf("empty separator")
		case n < 0:
			parts = strings.Split(s, sep)
		case !fromRight:
			parts = strings.SplitN(s, sep, int(n)+1)
		default:
			parts = rsplitN(s, sep, int(n))
		}
		out := &List{Items: make([]Value, 0, len(parts))}
		for _, p := range parts {
			out.Items = append(out.Items, p)
		}
		return out, nil
	}
}

func splitlinesMethod(r *renderer, s string, _ []Value, _ *Dict) (Value, error) {
	out := &List{}
	if s == "" {
		return out, nil
	}
	if err := r.spendN(int64(strings.Count(s, "\n"))+1, 48); err != nil {
		return nil, err
	}
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		out.Items = append(out.Items, strings.TrimSuffix(l, "\r"))
	}
	return out, nil
}

func caseMethod(fn func(string) string) methodFunc[string] {
	return func(r *renderer, s string, _ []Value, _ *Dict) (Value, error) { return r.built(fn(s)) }
}

func strReplaceMethod(r *renderer, s string, args []Value, _ *Dict) (Value, error) {
	old, ok1 := strArg(args, 0)
	nw, ok2 := strArg(args, 1)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("needs old and new strings")
	}
	n := int64(-1)
	if len(args) > 2 {
		if c, ok := toInt(args[2]); ok {
			n = c
		}
	}
	return r.replace(s, old, nw, n)
}

// findMethod is find or rfind: the index in characters, or -1.
func findMethod(index func(s, sub string) int) methodFunc[string] {
	return func(_ *renderer, s string, args []Value, _ *Dict) (Value, error) {
		sub, ok := strArg(args, 0)
		if !ok {
			return nil, fmt.Errorf("needs a string")
		}
		i := index(s, sub)
		if i >= 0 {
			i = utf8.RuneCountInString(s[:i])
		}
		return int64(i), nil
	}
}

func strCountMethod(_ *renderer, s string, args []Value, _ *Dict) (Value, error) {
	sub, ok := strArg(args, 0)
	if !ok {
		return nil, fmt.Errorf("needs a string")
	}
	return int64(strings.Count(s, sub)), nil
}

func strJoinMethod(r *renderer, s string, args []Value, _ *Dict) (Value, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("takes one iterable")
	}
	items, err := r.iterate(args[0])
	if err != nil {
		return nil, err
	}
	for _, x := range items {
		if _, ok := x.(string); !ok {
			return nil, fmt.Errorf("sequence item: expected str instance, %s found", typeName(x))
		}
	}
	return r.join(items, s)
}

// classMethod is isdigit, isalpha, …: a non-empty string whose every
// character is in the class.
func classMethod(in func(rune) bool) methodFunc[string] {
	return func(_ *renderer, s string, _ []Value, _ *Dict) (Value, error) {
		if s == "" {
			return false, nil
		}
		for _, c := range s {
			if !in(c) {
				return false, nil
			}
		}
		return true, nil
	}
}

func dictKeysMethod(r *renderer, d *Dict, _ []Value, _ *Dict) (Value, error) {
	if err := r.spendN(int64(len(d.keys)), 32); err != nil {
		return nil, err
	}
	out := &List{Items: make([]Value, 0, len(d.keys))}
	for _, k := range d.keys {
		out.Items = append(out.Items, k)
	}
	return out, nil
}

func dictValuesMethod(r *renderer, d *Dict, _ []Value, _ *Dict) (Value, error) {
	if err := r.spendN(int64(len(d.keys)), 16); err != nil {
		return nil, err
	}
	out := &List{Items: make([]Value, 0, len(d.keys))}
	for _, k := range d.keys {
		out.Items = append(out.Items, d.m[k])
	}
	return out, nil
}

func dictGetMethod(_ *renderer, d *Dict, args []Value, kw *Dict) (Value, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("needs a key")
	}
	if v, ok := d.m[str(args[0])]; ok {
		return v, nil
	}
	return arg(args, kw, 1, "default", nil), nil
}

func dictPopMethod(_ *renderer, d *Dict, args []Value, _ *Dict) (Value, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("needs a key")
	}
	k := str(args[0])
	v, ok := d.m[k]
	if !ok {
		if len(args) > 1 {
			return args[1], nil
		}
		return nil, fmt.Errorf("key %s is not there", pyQuote(k))
	}
	d.del(k)
	return v, nil
}

func dictUpdateMethod(r *renderer, d *Dict, args []Value, kw *Dict) (Value, error) {
	for _, a := range args {
		if src, ok := a.(*Dict); ok {
			if err := r.spendN(int64(len(src.keys)), 64); err != nil {
				return nil, err
			}
			for _, k := range src.keys {
				d.Set(k, src.m[k])
			}
		}
	}
	if err := r.spendN(int64(len(kw.keys)), 64); err != nil {
		return nil, err
	}
	for _, k := range kw.keys {
		d.Set(k, kw.m[k])
	}
	return nil, nil
}

func dictCopyMethod(r *renderer, d *Dict, _ []Value, _ *Dict) (Value, error) {
	if err := r.spendN(int64(len(d.keys)), 64); err != nil {
		return nil, err
	}
	out := NewDict()
	for _, k := range d.keys {
		out.Set(k, d.m[k])
	}
	return out, nil
}

func listAppendMethod(r *renderer, l *List, args []Value, _ *Dict) (Value, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("takes one value")
	}
	if err := r.spend(16); err != nil {
		return nil, err
	}
	l.Items = append(l.Items, args[0])
	return nil, nil
}

func listExtendMethod(r *renderer, l *List, args []Value, _ *Dict) (Value, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("takes one list")
	}
	items, err := r.iterate(args[0])
	if err != nil {
		return nil, err
	}
	if err := r.spendN(int64(len(items)), 16); err != nil {
		return nil, err
	}
	l.Items = append(l.Items, items...)
	return nil, nil
}

func listPopMethod(_ *renderer, l *List, args []Value, _ *Dict) (Value, error) {
	if len(l.Items) == 0 {
		return nil, fmt.Errorf("pop from an empty list")
	}
	i := int64(len(l.Items) - 1)
	if len(args) > 0 {
		i, _ = toInt(args[0])
		if i < 0 {
			i += int64(len(l.Items))
		}
	}
	if i < 0 || i >= int64(len(l.Items)) {
		return nil, fmt.Errorf("pop index out of range")
	}
	v := l.Items[i]
	l.Items = slices.Delete(l.Items, int(i), int(i)+1)
	return v, nil
}

func listIndexMethod(r *renderer, l *List, args []Value, _ *Dict) (Value, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("needs a value")
	}
	for i, x := range l.Items {
		if r.equal(x, args[0]) {
			return int64(i), nil
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return nil, fmt.Errorf("%s is not in list", repr(args[0]))
}

func listCountMethod(r *renderer, l *List, args []Value, _ *Dict) (Value, error) {
	n := int64(0)
	for _, x := range l.Items {
		if len(args) > 0 && r.equal(x, args[0]) {
			n++
		}
	}
	return n, r.err
}

// splitFields is str.split()/rsplit() with maxsplit n on runs of space.
func splitFields(s string, n int, fromRight bool) []string {
	var out []string
	if !fromRight {
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
	rest := strings.TrimRightFunc(s, unicode.IsSpace)
	for len(out) < n && rest != "" {
		i := strings.LastIndexFunc(rest, unicode.IsSpace)
		if i < 0 {
			break
		}
		_, w := utf8.DecodeRuneInString(rest[i:])
		out = append(out, rest[i+w:])
		rest = strings.TrimRightFunc(rest[:i], unicode.IsSpace)
	}
	if rest != "" {
		out = append(out, rest)
	}
	slices.Reverse(out)
	return out
}

func rsplitN(s, sep string, n int) []string {
	var out []string
	for len(out) < n {
		i := strings.LastIndex(s, sep)
		if i < 0 {
			break
		}
		out = append(out, s[i+len(sep):])
		s = s[:i]
	}
	out = append(out, s)
	slices.Reverse(out)
	return out
}
