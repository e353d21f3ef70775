package jinja

import (
	"fmt"
	"strings"
)

// testFunc is one test ("x is name(args)").
type testFunc func(r *renderer, v Value, args []Value) (bool, error)

// tests is the registry of tests by name, with Jinja's aliases.
var tests = map[string]testFunc{
	"defined":     func(_ *renderer, v Value, _ []Value) (bool, error) { _, u := v.(Undefined); return !u, nil },
	"undefined":   func(_ *renderer, v Value, _ []Value) (bool, error) { _, u := v.(Undefined); return u, nil },
	"none":        func(_ *renderer, v Value, _ []Value) (bool, error) { return v == nil, nil },
	"boolean":     isType[bool],
	"true":        func(_ *renderer, v Value, _ []Value) (bool, error) { b, ok := v.(bool); return ok && b, nil },
	"false":       func(_ *renderer, v Value, _ []Value) (bool, error) { b, ok := v.(bool); return ok && !b, nil },
	"string":      isType[string],
	"number":      func(_ *renderer, v Value, _ []Value) (bool, error) { return isNumber(v), nil },
	"integer":     isType[int64],
	"float":       isType[float64],
	"mapping":     func(_ *renderer, v Value, _ []Value) (bool, error) { d, ok := v.(*Dict); return ok && !d.ns, nil },
	"sequence":    func(_ *renderer, v Value, _ []Value) (bool, error) { return isSequence(v, false), nil },
	"iterable":    func(_ *renderer, v Value, _ []Value) (bool, error) { return isSequence(v, true), nil },
	"callable":    isType[*Func],
	"odd":         parity(1),
	"even":        parity(0),
	"divisibleby": divisibleBy,
	"eq":          binaryTest(func(r *renderer, a, b Value) (bool, error) { return r.equal(a, b), r.err }),
	"ne":          binaryTest(func(r *renderer, a, b Value) (bool, error) { return !r.equal(a, b), r.err }),
	"sameas":      binaryTest(sameAs),
	"lt":          order(func(c int) bool { return c < 0 }),
	"gt":          order(func(c int) bool { return c > 0 }),
	"le":          order(func(c int) bool { return c <= 0 }),
	"ge":          order(func(c int) bool { return c >= 0 }),
	"in":          binaryTest(func(r *renderer, a, b Value) (bool, error) { return r.contains(b, a) }),
	"lower":       caseTest(strings.ToLower),
	"upper":       caseTest(strings.ToUpper),
}

func init() {
	for alias, name := range map[string]string{
		"equalto": "eq", "==": "eq", "!=": "ne",
		"<": "lt", "lessthan": "lt", ">": "gt", "greaterthan": "gt", "<=": "le", ">=": "ge",
	} {
		tests[alias] = tests[name]
	}
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
	ok, err := r.applyTest(t.name, v, args)
	if err != nil {
		return nil, errorf(t.line, "test %s: %v", t.name, err)
	}
	return ok != t.negate, nil
}

func (r *renderer) applyTest(name string, v Value, args []Value) (bool, error) {
	fn, ok := tests[name]
	if !ok {
		return false, fmt.Errorf("unknown test")
	}
	return fn(r, v, args)
}

func isType[T any](_ *renderer, v Value, _ []Value) (bool, error) {
	_, ok := v.(T)
	return ok, nil
}

func isNumber(v Value) bool {
	switch v.(type) {
	case int64, float64:
		return true
	}
	return false
}

// isSequence is "sequence" (strings, lists, dicts) or, with undefined
// counted in, "iterable".
func isSequence(v Value, undefinedToo bool) bool {
	switch v.(type) {
	case string, *List, *Dict:
		return true
	case Undefined:
		return undefinedToo
	}
	return false
}

// parity is odd (rem 1) or even (rem 0).
func parity(rem int64) testFunc {
	return func(_ *renderer, v Value, _ []Value) (bool, error) {
		n, ok := toInt(v)
		if !ok {
			return false, fmt.Errorf("needs an integer")
		}
		return (n%2 != 0) == (rem == 1), nil
	}
}

func divisibleBy(r *renderer, v Value, args []Value) (bool, error) {
	return binaryTest(func(_ *renderer, v, a Value) (bool, error) {
		n, ok1 := toInt(v)
		d, ok2 := toInt(a)
		if !ok1 || !ok2 || d == 0 {
			return false, fmt.Errorf("needs nonzero integers")
		}
		return n%d == 0, nil
	})(r, v, args)
}

// binaryTest is a test of the value against its one argument.
func binaryTest(fn func(r *renderer, v, a Value) (bool, error)) testFunc {
	return func(r *renderer, v Value, args []Value) (bool, error) {
		if len(args) != 1 {
			return false, fmt.Errorf("takes one argument")
		}
		return fn(r, v, args[0])
	}
}

// sameAs is Python's "is": identity for lists and dicts, equality for the
// immutable values (which Python interns where templates compare them).
func sameAs(r *renderer, v, a Value) (bool, error) {
	switch v.(type) {
	case *List, *Dict:
		return v == a, nil
	}
	return r.equal(v, a), r.err
}

// order is a comparison test: ok says whether compare's result passes.
func order(ok func(int) bool) testFunc {
	return binaryTest(func(r *renderer, v, a Value) (bool, error) {
		c, err := r.compare(v, a)
		return ok(c), err
	})
}

// caseTest is lower or upper: a string that fold leaves unchanged.
func caseTest(fold func(string) string) testFunc {
	return func(_ *renderer, v Value, _ []Value) (bool, error) {
		s, ok := v.(string)
		return ok && s == fold(s), nil
	}
}
