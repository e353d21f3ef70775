package jinja

import (
	"errors"
	"fmt"
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
