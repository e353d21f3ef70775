package jinja

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Template is a compiled template; it is safe for concurrent Render calls.
type Template struct {
	body []node
}

// Compile parses source. A source over maxSource bytes is refused before
// it is read: what is kept of a template is bounded by what it may be.
func Compile(source string) (*Template, error) {
	if len(source) > maxSource {
		return nil, errorf(0, "the template is %d bytes, over the %d KiB a template may have", len(source), maxSource>>10)
	}
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

// Exception is raised by the template itself (raise_exception).
type Exception struct{ Msg string }

func (e *Exception) Error() string { return e.Msg }

// Render runs the template with vars as its top-level names; globals
// (range, namespace, raise_exception, …) are there unless vars shadows them.
// A template that runs past its budget (budget.go) fails with an error.
func (t *Template) Render(vars map[string]Value) (string, error) {
	var input int64
	for k, v := range vars {
		input += int64(len(k)) + inputSize(v, 0)
	}
	return t.render(vars, defaultLimits.scaled(input))
}

func (t *Template) render(vars map[string]Value, lim limits) (string, error) {
	r := &renderer{lim: lim}
	root := &scope{more: make(map[string]Value, len(globals)+len(vars))}
	for k, v := range globals {
		root.more[k] = v
	}
	for k, v := range vars {
		root.more[k] = v
	}
	r.root = root
	err := r.nodes(t.body, &scope{parent: root})
	switch {
	case r.err != nil:
		// The budget's error, not what a filter made of running out.
		return "", r.err
	case errors.Is(err, errBreak) || errors.Is(err, errContinue):
		return "", errorf(0, "break or continue outside a loop")
	case err != nil:
		return "", err
	}
	return r.out.String(), nil
}

// scope holds the names a block sets. Most set one to four (a loop's
// target and loop, a macro's parameters), so they live in the struct and
// a map is made only past that: a loop pass allocated a map before, which
// cost more than most loop bodies.
type scope struct {
	names  [4]string
	vals   [4]Value
	n      int
	more   map[string]Value
	parent *scope
}

func (s *scope) set(name string, v Value) {
	for i := range s.n {
		if s.names[i] == name {
			s.vals[i] = v
			return
		}
	}
	if _, ok := s.more[name]; !ok && s.n < len(s.names) {
		s.names[s.n], s.vals[s.n] = name, v
		s.n++
		return
	}
	if s.more == nil {
		s.more = map[string]Value{}
	}
	s.more[name] = v
}

func (s *scope) lookup(name string) (Value, bool) {
	for ; s != nil; s = s.parent {
		for i := range s.n {
			if s.names[i] == name {
				return s.vals[i], true
			}
		}
		if v, ok := s.more[name]; ok {
			return v, true
		}
	}
	return nil, false
}

// renderer is one Render's state: the text being written (the output, or
// a capture's while a macro, set block or filter block runs) and what it
// has spent of its limits.
type renderer struct {
	out    strings.Builder
	root   *scope
	lim    limits
	spent  int64 // bytes built
	worked int64 // units of work
	calls  int   // macro calls nested
	err    error // the first budget error; it sticks
}

var (
	errBreak    = errors.New("break")
	errContinue = errors.New("continue")
)

func (r *renderer) write(s string) error {
	if err := r.spend(int64(len(s))); err != nil {
		return err
	}
	if int64(r.out.Len()+len(s)) > r.lim.output {
		return errorf(0, "output is over %d MiB", r.lim.output>>20)
	}
	r.out.WriteString(s)
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
		t, err := r.str(v)
		if err != nil {
			return err
		}
		return r.write(t)
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
		// A macro keeps its scope alive: a template defining them in a
		// loop and keeping them pays for what it keeps.
		if err := r.spend(macroCost); err != nil {
			return err
		}
		sc.set(n.name, macro(n, sc))
		return nil
	case *callBlock:
		if err := r.spend(macroCost); err != nil {
			return err
		}
		v, err := r.callWith(n.call, sc, macro(n.caller, sc))
		if err != nil {
			return err
		}
		t, err := r.str(v)
		if err != nil {
			return err
		}
		return r.write(t)
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
		t, err := r.str(v)
		if err != nil {
			return err
		}
		return r.write(t)
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
		sc.set(n.targets[0], v)
	default:
		items, err := r.iterate(v)
		if err != nil || len(items) != len(n.targets) {
			return errorf(n.line, "cannot unpack %s into %d names", typeName(v), len(n.targets))
		}
		for i, t := range n.targets {
			sc.set(t, items[i])
		}
	}
	return nil
}

func (r *renderer) bind(targets []string, item Value, sc *scope, line int) error {
	if len(targets) == 1 {
		sc.set(targets[0], item)
		return nil
	}
	items, err := r.iterate(item)
	if _, isStr := item.(string); err != nil || isStr || len(items) != len(targets) {
		return errorf(line, "cannot unpack %s into %d names", typeName(item), len(targets))
	}
	for i, t := range targets {
		sc.set(t, items[i])
	}
	return nil
}

func (r *renderer) forLoop(n *forNode, sc *scope) error {
	it, err := r.eval(n.iter, sc)
	if err != nil {
		return err
	}
	items, err := r.iterate(it)
	if err != nil {
		return errorf(n.line, "for loop: %v", err)
	}
	if n.cond != nil {
		var kept []Value
		for _, item := range items {
			if err := r.step(); err != nil {
				return err
			}
			s := &scope{parent: sc}
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
		s := &scope{parent: sc}
		if err := r.bind(n.targets, item, s, n.line); err != nil {
			return err
		}
		s.set("loop", &loopState{items: items, i: i})
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
		if r.calls >= r.lim.calls {
			return nil, fmt.Errorf("macro %s: calls nested over %d deep", n.name, r.lim.calls)
		}
		s := &scope{parent: def}
		for i, p := range n.params {
			switch {
			case i < len(args):
				s.set(p, args[i])
			default:
				if v, ok := kwargs.Get(p); ok {
					s.set(p, v)
				} else if n.defaults[i] != nil {
					v, err := r.eval(n.defaults[i], s)
					if err != nil {
						return nil, err
					}
					s.set(p, v)
				} else {
					s.set(p, Undefined{p})
				}
			}
		}
		for _, k := range kwargs.Keys() {
			switch {
			case slices.Contains(n.params, k):
			case k == "caller":
				// What {% call %} passes: the body it wraps.
				s.set(k, kwargs.m[k])
			default:
				return nil, fmt.Errorf("macro %s has no argument %s", n.name, k)
			}
		}
		r.calls++
		out, err := r.capture(n.body, s)
		r.calls--
		return out, err
	}}
}
