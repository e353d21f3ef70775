package jinja

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// binaryOp applies op to a and b, building its result within r's budget.
func (r *renderer) binaryOp(op string, a, b Value) (Value, error) {
	switch op {
	case "==":
		return r.equal(a, b), r.err
	case "!=":
		return !r.equal(a, b), r.err
	case "<", ">", "<=", ">=":
		c, err := r.compare(a, b)
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
		in, err := r.contains(b, a)
		if err != nil {
			return nil, err
		}
		return in == (op == "in"), nil
	case "~":
		x, err := r.str(a)
		if err != nil {
			return nil, err
		}
		y, err := r.str(b)
		if err != nil {
			return nil, err
		}
		return r.concat(x, y)
	}
	for _, v := range []Value{a, b} {
		if u, ok := v.(Undefined); ok {
			return nil, fmt.Errorf("%s is undefined", undefinedName(u))
		}
	}
	switch op {
	case "+":
		switch x := a.(type) {
		case string:
			if y, ok := b.(string); ok {
				return r.concat(x, y)
			}
		case *List:
			if y, ok := b.(*List); ok {
				if err := r.spendN(int64(len(x.Items)+len(y.Items)), 16); err != nil {
					return nil, err
				}
				out := &List{tuple: x.tuple, Items: make([]Value, 0, len(x.Items)+len(y.Items))}
				out.Items = append(append(out.Items, x.Items...), y.Items...)
				return out, nil
			}
		}
	case "*":
		if v, ok := r.repeat(a, b); ok {
			return v()
		}
		if v, ok := r.repeat(b, a); ok {
			return v()
		}
	}
	return arith(op, a, b)
}

// concat is x + y within the budget.
func (r *renderer) concat(x, y string) (Value, error) {
	if err := r.spend(int64(len(x)) + int64(len(y))); err != nil {
		return nil, err
	}
	return x + y, nil
}

// repeat is seq * n for a string or list seq and an integer n (Python's
// sequence repetition; n below one gives an empty one). The size is taken
// from the budget before anything is built, checked for overflow.
func (r *renderer) repeat(seq, times Value) (func() (Value, error), bool) {
	n, ok := toInt(times)
	if !ok {
		return nil, false
	}
	n = max(n, 0)
	switch s := seq.(type) {
	case string:
		return func() (Value, error) {
			if err := r.spendN(int64(len(s)), n); err != nil {
				return nil, err
			}
			return strings.Repeat(s, int(n)), nil
		}, true
	case *List:
		return func() (Value, error) {
			if err := r.spendN(int64(len(s.Items))*16, n); err != nil {
				return nil, err
			}
			out := &List{Items: make([]Value, 0, int64(len(s.Items))*n)}
			for range n {
				out.Items = append(out.Items, s.Items...)
			}
			return out, nil
		}, true
	}
	return nil, false
}

// arith is the arithmetic of numbers (bools count as 0 and 1). Integers
// that would overflow int64 are an error: Python's would grow instead.
func arith(op string, a, b Value) (Value, error) {
	ai, aInt := toInt(a)
	bi, bInt := toInt(b)
	af, aNum := toNumber(a)
	bf, bNum := toNumber(b)
	if !aNum || !bNum {
		return nil, fmt.Errorf("unsupported operand types for %s: %s and %s", op, typeName(a), typeName(b))
	}
	ints := aInt && bInt
	overflow := fmt.Errorf("integer overflow in %d %s %d", ai, op, bi)
	switch op {
	case "+":
		if ints {
			s := ai + bi
			if (s > ai) != (bi > 0) {
				return nil, overflow
			}
			return s, nil
		}
		return af + bf, nil
	case "-":
		if ints {
			d := ai - bi
			if (d < ai) != (bi > 0) {
				return nil, overflow
			}
			return d, nil
		}
		return af - bf, nil
	case "*":
		if ints {
			p, ok := mulInt(ai, bi)
			if !ok {
				return nil, overflow
			}
			return p, nil
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
			if ai == math.MinInt64 && bi == -1 {
				return nil, overflow
			}
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
			if bi == -1 {
				return int64(0), nil
			}
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
			p, ok := powInt(ai, bi)
			if !ok {
				return nil, overflow
			}
			return p, nil
		}
		return math.Pow(af, bf), nil
	}
	return nil, fmt.Errorf("unknown operator %s", op)
}

// mulInt is a*b and whether it fits in an int64.
func mulInt(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	p := a * b
	if p/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, false
	}
	return p, true
}

// powInt is a**e by squaring (at most 63 multiplications), and whether it
// fits in an int64.
func powInt(a, e int64) (int64, bool) {
	p := int64(1)
	for ; e > 0; e >>= 1 {
		var ok bool
		if e&1 == 1 {
			if p, ok = mulInt(p, a); !ok {
				return 0, false
			}
		}
		if e > 1 {
			if a, ok = mulInt(a, a); !ok {
				return 0, false
			}
		}
	}
	return p, true
}

func (r *renderer) contains(container, item Value) (bool, error) {
	switch c := container.(type) {
	case string:
		s, ok := item.(string)
		if !ok {
			return false, fmt.Errorf("'in <string>' needs a string on the left, not %s", typeName(item))
		}
		if err := r.work(int64(len(c))); err != nil {
			return false, err
		}
		return strings.Contains(c, s), nil
	case *List:
		for _, x := range c.Items {
			if r.equal(x, item) {
				return true, nil
			}
		}
		return false, r.err
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
func (r *renderer) getItem(obj Value, i Value) Value {
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
			if c, ok := r.runeAt(o, n); ok {
				return c
			}
		}
	}
	if k, ok := i.(string); ok {
		return Undefined{k}
	}
	return Undefined{repr(i)}
}

// runeAt is s[n] in characters, counting from the end for n < 0; it walks
// from the nearer end only as far as the index (s[-1] reads one rune),
// and that walk is its work.
func (r *renderer) runeAt(s string, n int64) (string, bool) {
	rest := s
	for {
		var c rune
		var w int
		if n < 0 {
			c, w = utf8.DecodeLastRuneInString(rest)
		} else {
			c, w = utf8.DecodeRuneInString(rest)
		}
		if w == 0 || r.work(int64(w)*runeWork) != nil {
			return "", false
		}
		switch {
		case n == 0 || n == -1:
			return string(c), true
		case n < 0:
			rest, n = rest[:len(rest)-w], n+1
		default:
			rest, n = rest[w:], n-1
		}
	}
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
