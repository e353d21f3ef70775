package jinja

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Now is the clock strftime_now reads; tests pin it.
var Now = time.Now

// globals are the functions every template sees (Hugging Face's
// apply_chat_template adds raise_exception and strftime_now to Jinja's).
var globals = map[string]Value{
	"range":           &Func{Name: "range", fn: rangeFn},
	"namespace":       &Func{Name: "namespace", fn: namespaceFn},
	"dict":            &Func{Name: "dict", fn: dictFn},
	"raise_exception": &Func{Name: "raise_exception", fn: raiseFn},
	"strftime_now":    &Func{Name: "strftime_now", fn: strftimeNowFn},
}

// rangeFn is Python's range, built as a list: its length is taken from
// the budget before any of it is (range(10**12) is one error, not 16 TB).
func rangeFn(r *renderer, args []Value, _ *Dict) (Value, error) {
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
	start, stop, step := n[0], n[1], n[2]
	if step == 0 {
		return nil, fmt.Errorf("range step must not be zero")
	}
	// The count in uint64, where stop-start cannot overflow.
	var count uint64
	switch {
	case step > 0 && start < stop:
		count = (uint64(stop-start) + uint64(step) - 1) / uint64(step)
	case step < 0 && start > stop:
		count = (uint64(start-stop) + uint64(-step) - 1) / uint64(-step)
	}
	if count > 1<<40 {
		return nil, r.spend(-1)
	}
	if err := r.spendN(int64(count), 24); err != nil {
		return nil, err
	}
	l := &List{Items: make([]Value, count)}
	for i := range l.Items {
		l.Items[i] = start + int64(i)*step
	}
	return l, nil
}

func namespaceFn(_ *renderer, args []Value, kw *Dict) (Value, error) {
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

func dictFn(r *renderer, args []Value, kw *Dict) (Value, error) {
	d, err := namespaceFn(r, args, kw)
	if err == nil {
		d.(*Dict).ns = false
	}
	return d, err
}

func raiseFn(_ *renderer, args []Value, _ *Dict) (Value, error) {
	msg := "raise_exception"
	if len(args) > 0 {
		msg = str(args[0])
	}
	return nil, &Exception{Msg: msg}
}

func strftimeNowFn(_ *renderer, args []Value, _ *Dict) (Value, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("strftime_now takes one format string")
	}
	f, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("strftime_now takes a format string")
	}
	return strftime(Now(), f), nil
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
