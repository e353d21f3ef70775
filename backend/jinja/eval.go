package jinja

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Template is a compiled template; it is safe for concurrent Render calls.
type Template struct {
	body []node
}

// Compile parses source.
func Compile(source string) (*Template, error) {
	toks, err := lex(source)
	if err != nil {
		return nil, err
	}
	body, err := parse(toks)
	if err != nil {
		return nil, err
	}
	return &Template{body: body}, nil
}

// Limits keep a template from running away on its input.
const (
	maxOutput = 64 << 20
	maxDepth  = 64
	maxSteps  = 5_000_000
)

// Exception is raised by the template itself (raise_exception).
type Exception struct{ Msg string }

func (e *Exception) Error() string { return e.Msg }

// Render runs the template with vars as its top-level names; globals
// (range, namespace, raise_exception, …) are there unless vars shadows them.
func (t *Template) Render(vars map[string]Value) (string, error) {
	r := &renderer{}
	root := &scope{vars: map[string]Value{}}
	for k, v := range globals {
		root.vars[k] = v
	}
	for k, v := range vars {
		root.vars[k] = v
	}
	r.root = root
	if err := r.nodes(t.body, &scope{vars: map[string]Value{}, parent: root}); err != nil {
		if errors.Is(err, errBreak) || errors.Is(err, errContinue) {
			return "", errorf(0, "break or continue outside a loop")
		}
		return "", err
	}
	return r.out.String(), nil
}

type scope struct {
	vars   map[string]Value
	parent *scope
}

func (s *scope) lookup(name string) (Value, bool) {
	for ; s != nil; s = s.parent {
		if v, ok := s.vars[name]; ok {
			return v, true
		}
	}
	return nil, false
}

type renderer struct {
	out   strings.Builder
	root  *scope
	depth int
	steps int
}

var (
	errBreak    = errors.New("break")
	errContinue = errors.New("continue")
)

func (r *renderer) write(s string) error {
	r.out.WriteString(s)
	if r.out.Len() > maxOutput {
		return errorf(0, "output is over %d MiB", maxOutput>>20)
	}
	return nil
}

func (r *renderer) nodes(ns []node, sc *scope) error {
	for _, n := range ns {
		if err := r.node(n, sc); err != nil {
			return err
		}
	}
	return nil
}

// step counts work so a template that loops without writing still ends.
func (r *renderer) step() error {
	r.steps++
	if r.steps > maxSteps {
		return errorf(0, "template ran over %d steps", maxSteps)
	}
	return nil
}

func (r *renderer) node(n node, sc *scope) error {
	if err := r.step(); err != nil {
		return err
	}
	switch n := n.(type) {
	case *textNode:
		return r.write(n.s)
	case *outputNode:
		v, err := r.eval(n.x, sc)
		if err != nil {
			return err
		}
		return r.write(str(v))
	case *ifNode:
		for i, c := range n.conds {
			v, err := r.eval(c, sc)
			if err != nil {
				return err
			}
			if truthy(v) {
				return r.nodes(n.bodies[i], sc)
			}
		}
		return r.nodes(n.els, sc)
	case *forNode:
		return r.forLoop(n, sc)
	case *setNode:
		return r.set(n, sc)
	case *macroNode:
		sc.vars[n.name] = macro(n, sc)
		return nil
	case *filterBlock:
		if n.filters == nil {
			return r.nodes(n.body, sc)
		}
		s, err := r.capture(n.body, sc)
		if err != nil {
			return err
		}
		v, err := r.applyFilters(s, n.filters, sc)
		if err != nil {
			return err
		}
		return r.write(str(v))
	case *breakNode:
		return errBreak
	case *continueNode:
		return errContinue
	}
	return fmt.Errorf("jinja: unknown node %T", n)
}

// capture renders body into a string instead of the output.
func (r *renderer) capture(body []node, sc *scope) (string, error) {
	saved := r.out
	r.out = strings.Builder{}
	err := r.nodes(body, sc)
	s := r.out.String()
	r.out = saved
	return s, err
}

func (r *renderer) applyFilters(v Value, fs []*filterExpr, sc *scope) (Value, error) {
	for _, f := range fs {
		var err error
		if v, err = r.filter(f, v, sc); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (r *renderer) set(n *setNode, sc *scope) error {
	var v Value
	var err error
	if n.body != nil {
		s, err := r.capture(n.body, sc)
		if err != nil {
			return err
		}
		if v, err = r.applyFilters(s, n.filters, sc); err != nil {
			return err
		}
	} else if v, err = r.eval(n.x, sc); err != nil {
		return err
	}
	switch {
	case n.attr != "":
		obj, _ := sc.lookup(n.targets[0])
		d, ok := obj.(*Dict)
		if !ok || !d.ns {
			return errorf(n.line, "cannot set attribute %s of %s: only namespace() objects take attributes", n.attr, n.targets[0])
		}
		d.Set(n.attr, v)
	case len(n.targets) == 1:
		sc.vars[n.targets[0]] = v
	default:
		items, err := iterate(v)
		if err != nil || len(items) != len(n.targets) {
			return errorf(n.line, "cannot unpack %s into %d names", typeName(v), len(n.targets))
		}
		for i, t := range n.targets {
			sc.vars[t] = items[i]
		}
	}
	return nil
}

func (r *renderer) bind(targets []string, item Value, sc *scope, line int) error {
	if len(targets) == 1 {
		sc.vars[targets[0]] = item
		return nil
	}
	items, err := iterate(item)
	if _, isStr := item.(string); err != nil || isStr || len(items) != len(targets) {
		return errorf(line, "cannot unpack %s into %d names", typeName(item), len(targets))
	}
	for i, t := range targets {
		sc.vars[t] = items[i]
	}
	return nil
}

func (r *renderer) forLoop(n *forNode, sc *scope) error {
	it, err := r.eval(n.iter, sc)
	if err != nil {
		return err
	}
	items, err := iterate(it)
	if err != nil {
		return errorf(n.line, "for loop: %v", err)
	}
	if n.cond != nil {
		var kept []Value
		for _, item := range items {
			if err := r.step(); err != nil {
				return err
			}
			s := &scope{vars: map[string]Value{}, parent: sc}
			if err := r.bind(n.targets, item, s, n.line); err != nil {
				return err
			}
			c, err := r.eval(n.cond, s)
			if err != nil {
				return err
			}
			if truthy(c) {
				kept = append(kept, item)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		return r.nodes(n.els, sc)
	}
	for i, item := range items {
		// Each pass gets a fresh scope: names set in the body do not carry
		// to the next pass or out of the loop (Jinja's rule).
		if err := r.step(); err != nil {
			return err
		}
		s := &scope{vars: map[string]Value{}, parent: sc}
		if err := r.bind(n.targets, item, s, n.line); err != nil {
			return err
		}
		s.vars["loop"] = &loopState{items: items, i: i}
		err := r.nodes(n.body, s)
		if errors.Is(err, errBreak) {
			break
		}
		if err != nil && !errors.Is(err, errContinue) {
			return err
		}
	}
	return nil
}

// loopState is the loop variable, answered field by field: building a
// dict for every pass cost more than most loop bodies.
type loopState struct {
	items []Value
	i     int
}

func (l *loopState) attr(name string) (Value, bool) {
	i, n := int64(l.i), int64(len(l.items))
	switch name {
	case "index":
		return i + 1, true
	case "index0":
		return i, true
	case "revindex":
		return n - i, true
	case "revindex0":
		return n - i - 1, true
	case "first":
		return i == 0, true
	case "last":
		return i == n-1, true
	case "length":
		return n, true
	case "depth":
		return int64(1), true
	case "depth0":
		return int64(0), true
	case "previtem":
		if i > 0 {
			return l.items[i-1], true
		}
		return Undefined{"previtem"}, true
	case "nextitem":
		if i < n-1 {
			return l.items[i+1], true
		}
		return Undefined{"nextitem"}, true
	case "cycle":
		return &Func{Name: "cycle", fn: func(_ *renderer, args []Value, _ *Dict) (Value, error) {
			if len(args) == 0 {
				return nil, fmt.Errorf("loop.cycle needs at least one value")
			}
			return args[l.i%len(args)], nil
		}}, true
	}
	return nil, false
}

func macro(n *macroNode, def *scope) *Func {
	return &Func{Name: n.name, fn: func(r *renderer, args []Value, kwargs *Dict) (Value, error) {
		if len(args) > len(n.params) {
			return nil, fmt.Errorf("macro %s takes at most %d arguments, got %d", n.name, len(n.params), len(args))
		}
		if r.depth >= maxDepth {
			return nil, fmt.Errorf("macro %s: calls nested over %d deep", n.name, maxDepth)
		}
		s := &scope{vars: map[string]Value{}, parent: def}
		for i, p := range n.params {
			switch {
			case i < len(args):
				s.vars[p] = args[i]
			default:
				if v, ok := kwargs.Get(p); ok {
					s.vars[p] = v
				} else if n.defaults[i] != nil {
					v, err := r.eval(n.defaults[i], s)
					if err != nil {
						return nil, err
					}
					s.vars[p] = v
				} else {
					s.vars[p] = Undefined{p}
				}
			}
		}
		for _, k := range kwargs.Keys() {
			known := false
			for _, p := range n.params {
				known = known || p == k
			}
			if !known {
				return nil, fmt.Errorf("macro %s has no argument %s", n.name, k)
			}
		}
		r.depth++
		out, err := r.capture(n.body, s)
		r.depth--
		return out, err
	}}
}

func (r *renderer) eval(x expr, sc *scope) (Value, error) {
	switch x := x.(type) {
	case *literal:
		return x.v, nil
	case *nameExpr:
		if v, ok := sc.lookup(x.name); ok {
			return v, nil
		}
		return Undefined{x.name}, nil
	case *attrExpr:
		obj, err := r.eval(x.x, sc)
		if err != nil {
			return nil, err
		}
		return getAttr(obj, x.name), nil
	case *indexExpr:
		obj, err := r.eval(x.x, sc)
		if err != nil {
			return nil, err
		}
		i, err := r.eval(x.i, sc)
		if err != nil {
			return nil, err
		}
		return getItem(obj, i), nil
	case *sliceExpr:
		return r.slice(x, sc)
	case *callExpr:
		return r.call(x, sc)
	case *filterExpr:
		v, err := r.eval(x.x, sc)
		if err != nil {
			return nil, err
		}
		return r.filter(x, v, sc)
	case *testExpr:
		return r.test(x, sc)
	case *unaryExpr:
		v, err := r.eval(x.x, sc)
		if err != nil {
			return nil, err
		}
		switch x.op {
		case "not":
			return !truthy(v), nil
		case "-":
			switch v := v.(type) {
			case int64:
				return -v, nil
			case float64:
				return -v, nil
			case bool:
				if v {
					return int64(-1), nil
				}
				return int64(0), nil
			}
			return nil, errorf(x.line, "bad operand for unary -: %s", typeName(v))
		default:
			if _, ok := toNumber(v); !ok {
				return nil, errorf(x.line, "bad operand for unary +: %s", typeName(v))
			}
			return v, nil
		}
	case *binaryExpr:
		return r.binary(x, sc)
	case *condExpr:
		c, err := r.eval(x.cond, sc)
		if err != nil {
			return nil, err
		}
		if truthy(c) {
			return r.eval(x.a, sc)
		}
		if x.b == nil {
			return Undefined{}, nil
		}
		return r.eval(x.b, sc)
	case *listExpr:
		l := &List{}
		for _, e := range x.items {
			v, err := r.eval(e, sc)
			if err != nil {
				return nil, err
			}
			l.Items = append(l.Items, v)
		}
		return l, nil
	case *tupleExpr:
		l := &List{tuple: true}
		for _, e := range x.items {
			v, err := r.eval(e, sc)
			if err != nil {
				return nil, err
			}
			l.Items = append(l.Items, v)
		}
		return l, nil
	case *dictExpr:
		d := NewDict()
		for i := range x.keys {
			k, err := r.eval(x.keys[i], sc)
			if err != nil {
				return nil, err
			}
			v, err := r.eval(x.vals[i], sc)
			if err != nil {
				return nil, err
			}
			d.Set(str(k), v)
		}
		return d, nil
	}
	return nil, fmt.Errorf("jinja: unknown expression %T", x)
}

func (r *renderer) binary(x *binaryExpr, sc *scope) (Value, error) {
	l, err := r.eval(x.l, sc)
	if err != nil {
		return nil, err
	}
	switch x.op {
	case "and":
		if !truthy(l) {
			return l, nil
		}
		return r.eval(x.r, sc)
	case "or":
		if truthy(l) {
			return l, nil
		}
		return r.eval(x.r, sc)
	}
	rv, err := r.eval(x.r, sc)
	if err != nil {
		return nil, err
	}
	v, err := binaryOp(x.op, l, rv)
	if err != nil {
		return nil, errorf(x.line, "%v", err)
	}
	return v, nil
}

func binaryOp(op string, l, r Value) (Value, error) {
	switch op {
	case "==":
		return equal(l, r), nil
	case "!=":
		return !equal(l, r), nil
	case "<", ">", "<=", ">=":
		c, err := compare(l, r)
		if err != nil {
			return nil, err
		}
		switch op {
		case "<":
			return c < 0, nil
		case ">":
			return c > 0, nil
		case "<=":
			return c <= 0, nil
		}
		return c >= 0, nil
	case "in", "not in":
		in, err := contains(r, l)
		if err != nil {
			return nil, err
		}
		return in == (op == "in"), nil
	case "~":
		return str(l) + str(r), nil
	}
	for _, v := range []Value{l, r} {
		if u, ok := v.(Undefined); ok {
			return nil, fmt.Errorf("%s is undefined", undefinedName(u))
		}
	}
	switch op {
	case "+":
		switch a := l.(type) {
		case string:
			if b, ok := r.(string); ok {
				return a + b, nil
			}
		case *List:
			if b, ok := r.(*List); ok {
				out := &List{tuple: a.tuple}
				out.Items = append(append(out.Items, a.Items...), b.Items...)
				return out, nil
			}
		}
	case "*":
		if n, ok := toInt(r); ok {
			switch a := l.(type) {
			case string:
				if int64(len(a))*n > maxOutput {
					return nil, fmt.Errorf("string repetition over %d MiB", maxOutput>>20)
				}
				return strings.Repeat(a, int(max(n, 0))), nil
			case *List:
				if int64(len(a.Items))*n > 1_000_000 {
					return nil, fmt.Errorf("list repetition over a million items")
				}
				out := &List{}
				for range max(n, 0) {
					out.Items = append(out.Items, a.Items...)
				}
				return out, nil
			}
		}
	}
	ai, aInt := toInt(l)
	bi, bInt := toInt(r)
	af, aNum := toNumber(l)
	bf, bNum := toNumber(r)
	if !aNum || !bNum {
		return nil, fmt.Errorf("unsupported operand types for %s: %s and %s", op, typeName(l), typeName(r))
	}
	ints := aInt && bInt
	switch op {
	case "+":
		if ints {
			return ai + bi, nil
		}
		return af + bf, nil
	case "-":
		if ints {
			return ai - bi, nil
		}
		return af - bf, nil
	case "*":
		if ints {
			return ai * bi, nil
		}
		return af * bf, nil
	case "/":
		if bf == 0 {
			return nil, fmt.Errorf("division by zero")
		}
		return af / bf, nil
	case "//":
		if bf == 0 {
			return nil, fmt.Errorf("integer division by zero")
		}
		if ints {
			q := ai / bi
			if (ai%bi != 0) && ((ai < 0) != (bi < 0)) {
				q--
			}
			return q, nil
		}
		return math.Floor(af / bf), nil
	case "%":
		if bf == 0 {
			return nil, fmt.Errorf("modulo by zero")
		}
		if ints {
			m := ai % bi
			if m != 0 && (m < 0) != (bi < 0) {
				m += bi
			}
			return m, nil
		}
		m := math.Mod(af, bf)
		if m != 0 && (m < 0) != (bf < 0) {
			m += bf
		}
		return m, nil
	case "**":
		if ints && bi >= 0 {
			p := int64(1)
			for range bi {
				p *= ai
			}
			return p, nil
		}
		return math.Pow(af, bf), nil
	}
	return nil, fmt.Errorf("unknown operator %s", op)
}

func contains(container, item Value) (bool, error) {
	switch c := container.(type) {
	case string:
		s, ok := item.(string)
		if !ok {
			return false, fmt.Errorf("'in <string>' needs a string on the left, not %s", typeName(item))
		}
		return strings.Contains(c, s), nil
	case *List:
		for _, x := range c.Items {
			if equal(x, item) {
				return true, nil
			}
		}
		return false, nil
	case *Dict:
		s, ok := item.(string)
		if !ok {
			return false, nil
		}
		_, in := c.m[s]
		return in, nil
	case Undefined:
		return false, nil
	}
	return false, fmt.Errorf("argument of type %s is not iterable", typeName(container))
}

// getAttr is obj.name: a dict's methods first (as Jinja's getattr finds
// them), then its keys; methods of strings and lists.
func getAttr(obj Value, name string) Value {
	if m := method(obj, name); m != nil {
		return m
	}
	switch o := obj.(type) {
	case *Dict:
		if v, ok := o.m[name]; ok {
			return v
		}
	case *loopState:
		if v, ok := o.attr(name); ok {
			return v
		}
	}
	return Undefined{name}
}

// getItem is obj[i]: keys first, then methods (Jinja's getitem order).
func getItem(obj Value, i Value) Value {
	switch o := obj.(type) {
	case *Dict:
		if k, ok := i.(string); ok {
			if v, ok := o.m[k]; ok {
				return v
			}
			if m := method(obj, k); m != nil {
				return m
			}
			return Undefined{k}
		}
	case *loopState:
		if k, ok := i.(string); ok {
			if v, ok := o.attr(k); ok {
				return v
			}
		}
	case *List:
		if n, ok := toInt(i); ok {
			if n < 0 {
				n += int64(len(o.Items))
			}
			if n >= 0 && n < int64(len(o.Items)) {
				return o.Items[n]
			}
		}
	case string:
		if n, ok := toInt(i); ok {
			rs := []rune(o)
			if n < 0 {
				n += int64(len(rs))
			}
			if n >= 0 && n < int64(len(rs)) {
				return string(rs[n])
			}
		}
	}
	return Undefined{str(i)}
}

func (r *renderer) slice(x *sliceExpr, sc *scope) (Value, error) {
	obj, err := r.eval(x.x, sc)
	if err != nil {
		return nil, err
	}
	var bounds [3]Value
	for i, e := range []expr{x.lo, x.hi, x.step} {
		if e == nil {
			continue
		}
		if bounds[i], err = r.eval(e, sc); err != nil {
			return nil, err
		}
	}
	var n int
	var runes []rune
	switch o := obj.(type) {
	case *List:
		n = len(o.Items)
	case string:
		runes = []rune(o)
		n = len(runes)
	default:
		return nil, errorf(x.line, "cannot slice a %s", typeName(obj))
	}
	idx, err := sliceIndices(n, bounds)
	if err != nil {
		return nil, errorf(x.line, "%v", err)
	}
	if l, ok := obj.(*List); ok {
		out := &List{tuple: l.tuple}
		for _, i := range idx {
			out.Items = append(out.Items, l.Items[i])
		}
		return out, nil
	}
	var b strings.Builder
	for _, i := range idx {
		b.WriteRune(runes[i])
	}
	return b.String(), nil
}

// sliceIndices applies Python's slice rules to a sequence of length n.
func sliceIndices(n int, b [3]Value) ([]int, error) {
	get := func(v Value, def int) (int, error) {
		if v == nil {
			return def, nil
		}
		if _, ok := v.(Undefined); ok {
			return def, nil
		}
		i, ok := toInt(v)
		if !ok {
			return 0, fmt.Errorf("slice indices must be integers or none, not %s", typeName(v))
		}
		return int(i), nil
	}
	step, err := get(b[2], 1)
	if err != nil {
		return nil, err
	}
	if step == 0 {
		return nil, fmt.Errorf("slice step cannot be zero")
	}
	clamp := func(i, lo, hi int) int { return max(lo, min(i, hi)) }
	norm := func(i int, neg bool) int {
		if i < 0 {
			i += n
		}
		if neg {
			return clamp(i, -1, n-1)
		}
		return clamp(i, 0, n)
	}
	var lo, hi int
	if step > 0 {
		if lo, err = get(b[0], 0); err != nil {
			return nil, err
		}
		if hi, err = get(b[1], n); err != nil {
			return nil, err
		}
		lo, hi = norm(lo, false), norm(hi, false)
	} else {
		if lo, err = get(b[0], n-1); err != nil {
			return nil, err
		}
		if hi, err = get(b[1], -n-1); err != nil {
			return nil, err
		}
		lo, hi = norm(lo, true), norm(hi, true)
	}
	var out []int
	for i := lo; (step > 0 && i < hi) || (step < 0 && i > hi); i += step {
		out = append(out, i)
	}
	return out, nil
}

func (r *renderer) args(args []expr, kwargs []kwarg, sc *scope) ([]Value, *Dict, error) {
	var av []Value
	for _, a := range args {
		v, err := r.eval(a, sc)
		if err != nil {
			return nil, nil, err
		}
		av = append(av, v)
	}
	kw := NewDict()
	for _, k := range kwargs {
		v, err := r.eval(k.x, sc)
		if err != nil {
			return nil, nil, err
		}
		kw.Set(k.name, v)
	}
	return av, kw, nil
}

func (r *renderer) call(x *callExpr, sc *scope) (Value, error) {
	fn, err := r.eval(x.fn, sc)
	if err != nil {
		return nil, err
	}
	f, ok := fn.(*Func)
	if !ok {
		if u, ok := fn.(Undefined); ok {
			return nil, errorf(x.line, "%s is undefined and cannot be called", undefinedName(u))
		}
		return nil, errorf(x.line, "a %s is not callable", typeName(fn))
	}
	args, kw, err := r.args(x.args, x.kwargs, sc)
	if err != nil {
		return nil, err
	}
	v, err := f.fn(r, args, kw)
	if err != nil {
		var ex *Exception
		var je *Error
		if errors.As(err, &ex) || errors.As(err, &je) {
			return nil, err
		}
		return nil, errorf(x.line, "%s: %v", f.Name, err)
	}
	return v, nil
}
