package jinja

import (
	"fmt"
	"math"
	"strings"
)

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
