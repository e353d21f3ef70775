package jinja

import (
	"errors"
	"fmt"
	"strings"
)

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
		if u, ok := obj.(Undefined); ok {
			return nil, errorf(x.line, "%s is undefined (reading its .%s)", undefinedName(u), x.name)
		}
		return getAttr(obj, x.name), nil
	case *indexExpr:
		obj, err := r.eval(x.x, sc)
		if err != nil {
			return nil, err
		}
		if u, ok := obj.(Undefined); ok {
			return nil, errorf(x.line, "%s is undefined (reading an item of it)", undefinedName(u))
		}
		i, err := r.eval(x.i, sc)
		if err != nil {
			return nil, err
		}
		return r.getItem(obj, i), nil
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
		if err := r.spendN(int64(len(x.items)), 16); err != nil {
			return nil, err
		}
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
		if err := r.spendN(int64(len(x.items)), 16); err != nil {
			return nil, err
		}
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
		if err := r.spendN(int64(len(x.keys)), 64); err != nil {
			return nil, err
		}
		d := NewDict()
		for i := range x.keys {
			k, err := r.eval(x.keys[i], sc)
			if err != nil {
				return nil, err
			}
			key, err := r.str(k)
			if err != nil {
				return nil, err
			}
			v, err := r.eval(x.vals[i], sc)
			if err != nil {
				return nil, err
			}
			d.Set(key, v)
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
	v, err := r.binaryOp(x.op, l, rv)
	if err != nil {
		return nil, errorf(x.line, "%v", err)
	}
	return v, nil
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
		if err := r.spendN(int64(n), 16); err != nil {
			return nil, err
		}
	case string:
		// The runes, and a result of at most the string's size.
		if err := r.spendN(int64(len(o)), 5); err != nil {
			return nil, err
		}
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

func (r *renderer) call(x *callExpr, sc *scope) (Value, error) { return r.callWith(x, sc, nil) }

// callWith calls x, passing caller (when not nil) as {% call %} does.
func (r *renderer) callWith(x *callExpr, sc *scope, caller *Func) (Value, error) {
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
	if caller != nil {
		kw.Set("caller", caller)
	}
	// As a filter's, a call's work is counted from what it is given.
	if err := r.work(workStep + sizeOf(f.recv) + sizesOf(args) + sizesOf(kw.values())); err != nil {
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
