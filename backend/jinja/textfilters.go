package jinja

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The filters of strings and numbers.

// stringFilter applies fn to the value as a string; fn's output is about
// its input's size (case mappings).
func stringFilter(fn func(string) string) filterFunc {
	return func(r *renderer, v Value, _ []Value, _ *Dict) (Value, error) {
		s, err := r.str(v)
		if err != nil {
			return nil, err
		}
		return r.built(fn(s))
	}
}

func trimFilter(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	s, err := r.str(v)
	if err != nil {
		return nil, err
	}
	if chars, ok := arg(args, kw, 0, "chars", nil).(string); ok {
		return strings.Trim(s, chars), nil
	}
	return strings.TrimSpace(s), nil
}

func replaceFilter(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	s, err := r.str(v)
	if err != nil {
		return nil, err
	}
	old, ok1 := arg(args, kw, 0, "old", nil).(string)
	nw, ok2 := arg(args, kw, 1, "new", nil).(string)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("needs old and new strings")
	}
	n := int64(-1)
	if c, ok := toInt(arg(args, kw, 2, "count", nil)); ok {
		n = c
	}
	return r.replace(s, old, nw, n)
}

func indentFilter(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	s, err := r.str(v)
	if err != nil {
		return nil, err
	}
	pad := "    "
	switch w := arg(args, kw, 0, "width", int64(4)).(type) {
	case int64:
		if pad, err = r.spaces(w); err != nil {
			return nil, err
		}
	case string:
		pad = w
	}
	first := truthy(arg(args, kw, 1, "first", false))
	blank := truthy(arg(args, kw, 2, "blank", false))
	// Each line may get the pad and lives twice (its own and the join).
	n := int64(strings.Count(s, "\n")) + 1
	if err := r.spendN(n, 2*int64(len(pad))+16); err != nil {
		return nil, err
	}
	if err := r.spend(2 * int64(len(s))); err != nil {
		return nil, err
	}
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

func intFilter(_ *renderer, v Value, args []Value, kw *Dict) (Value, error) {
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
}

func floatFilter(_ *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	if f, ok := toNumber(v); ok {
		return f, nil
	}
	if s, ok := v.(string); ok {
		if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
			return f, nil
		}
	}
	return arg(args, kw, 0, "default", 0.0), nil
}

func absFilter(_ *renderer, v Value, _ []Value, _ *Dict) (Value, error) {
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
}

func roundFilter(_ *renderer, v Value, args []Value, kw *Dict) (Value, error) {
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
}

func centerFilter(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	w, _ := toInt(arg(args, kw, 0, "width", int64(80)))
	s, err := r.str(v)
	if err != nil {
		return nil, err
	}
	pad := w - int64(utf8.RuneCountInString(s))
	if pad <= 0 {
		return s, nil
	}
	// The pad twice and the string three times: the two pads, the
	// concatenation's intermediate and the result.
	if err := r.spendN(pad, 2); err != nil {
		return nil, err
	}
	if err := r.spendN(int64(len(s)), 3); err != nil {
		return nil, err
	}
	left := pad / 2
	return strings.Repeat(" ", int(left)) + s + strings.Repeat(" ", int(pad-left)), nil
}

func truncateFilter(r *renderer, v Value, args []Value, kw *Dict) (Value, error) {
	t, err := r.str(v)
	if err != nil {
		return nil, err
	}
	if err := r.spendN(int64(len(t)), 5); err != nil {
		return nil, err
	}
	s := []rune(t)
	n, _ := toInt(arg(args, kw, 0, "length", int64(255)))
	end := str(arg(args, kw, 2, "end", "..."))
	leeway, _ := toInt(arg(args, kw, 3, "leeway", int64(5)))
	if int64(len(s)) <= n+max(leeway, 0) {
		return t, nil
	}
	cut := string(s[:min(int64(len(s)), max(0, n-int64(utf8.RuneCountInString(end))))])
	if !truthy(arg(args, kw, 1, "killwords", false)) {
		if i := strings.LastIndexByte(cut, ' '); i >= 0 {
			cut = cut[:i]
		}
	}
	return cut + end, nil
}

func wordcountFilter(r *renderer, v Value, _ []Value, _ *Dict) (Value, error) {
	s, err := r.str(v)
	if err != nil {
		return nil, err
	}
	n, in := int64(0), false
	for _, c := range s {
		if unicode.IsSpace(c) {
			in = false
		} else if !in {
			in, n = true, n+1
		}
	}
	return n, nil
}

func escapeFilter(r *renderer, v Value, _ []Value, _ *Dict) (Value, error) {
	s, err := r.str(v)
	if err != nil {
		return nil, err
	}
	// Each of <>&'" becomes at most 5 bytes.
	special := strings.Count(s, "<") + strings.Count(s, ">") + strings.Count(s, "&") + strings.Count(s, "'") + strings.Count(s, `"`)
	if err := r.spend(int64(len(s)) + 4*int64(special)); err != nil {
		return nil, err
	}
	return html.EscapeString(s), nil
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
