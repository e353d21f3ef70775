package jinja

import (
	"fmt"
	"math/bits"
	"strings"
	"unicode/utf8"
)

// NOTE: a template is untrusted code: a GGUF from anywhere carries its own,
// and it renders on every request. So everything it can do that allocates,
// recurses or loops draws from one budget per render, and a render that
// runs out fails with an error for that request; none of it can end the
// process (a stack overflow or an allocation the runtime refuses is fatal,
// beyond any recover).

// limits bound one Render.
type limits struct {
	output int64 // bytes of rendered text
	bytes  int64 // bytes of the strings, lists and dicts built, output and captured text included
	work   int64 // units of work: a statement, loop pass or call is workStep, a byte scanned or copied is one
	calls  int   // macro calls nested
}

// workStep is the work of one statement, loop pass or call (about what
// scanning a KiB costs); elemWork that of comparing or visiting one value.
const (
	workStep = 1024
	elemWork = 64
	// runeWork is the work of a byte decoded rune by rune (counting or
	// walking characters), several times a byte compared or copied.
	runeWork = 4
)

// macroCost is what a macro definition keeps (its closure and scope).
const macroCost = 256

// defaultLimits are what a render may spend on top of what it is given:
// the byte and work budgets grow with the size of the variables (scaled),
// so a long conversation renders (a 12.6 MB one through gemma-4's
// template built 82 MB and ran 205k steps) while a hostile template over
// a small request gets little (about a second of work, 64 MiB).
var defaultLimits = limits{output: 64 << 20, bytes: 64 << 20, work: 1_000_000 * workStep, calls: 64}

// Per byte of input, what a render may build and work on top.
const (
	bytesPerInput = 8
	workPerInput  = 64
)

// scaled is l grown for variables of input bytes.
func (l limits) scaled(input int64) limits {
	l.bytes += bytesPerInput * input
	l.work += workPerInput * input
	return l
}

// inputSize is the size of what a template is given: bytes of strings and
// keys, 16 a value, walked no deeper than maxValueDepth.
func inputSize(v Value, depth int) int64 {
	if depth > maxValueDepth {
		return 0
	}
	n := int64(16)
	switch v := v.(type) {
	case string:
		n += int64(len(v))
	case *List:
		for _, x := range v.Items {
			n += inputSize(x, depth+1)
		}
	case *Dict:
		for _, k := range v.keys {
			n += int64(len(k)) + inputSize(v.m[k], depth+1)
		}
	}
	return n
}

// Compile-time bounds: the source a template may have, how deep its
// statements and expressions may nest, and how deep a value may nest
// (JSON decoded for it, and what repr, tojson and == walk). Real chat
// templates are tens of KiB and nest a few tens deep.
const (
	maxSource     = 1 << 20
	maxNest       = 200
	maxValueDepth = 512
)

// budgetError is what a render that ran out of its budget fails with.
func budgetError(format string, args ...any) *Error {
	return &Error{Msg: "template ran out of its budget: " + fmt.Sprintf(format, args...)}
}

// spend takes n bytes from the budget before they are allocated. The first
// failure sticks: later spending and work fail at once, so loops inside a
// filter end early and the render returns that error.
func (r *renderer) spend(n int64) error {
	if r.err != nil {
		return r.err
	}
	if n < 0 || n > r.lim.bytes-r.spent {
		r.err = budgetError("it built over %d MiB of text and values", r.lim.bytes>>20)
		return r.err
	}
	r.spent += n
	return nil
}

// spendN is spend(n*each) with the product checked for overflow.
func (r *renderer) spendN(n, each int64) error {
	hi, lo := bits.Mul64(uint64(max(n, 0)), uint64(max(each, 0)))
	if hi != 0 || lo > 1<<62 {
		return r.spend(-1)
	}
	return r.spend(int64(lo))
}

// room is how many more bytes may be built.
func (r *renderer) room() int64 { return r.lim.bytes - r.spent }

// work counts units of work (see limits.work).
func (r *renderer) work(units int64) error {
	if r.err != nil {
		return r.err
	}
	r.worked += units
	if r.worked > r.lim.work {
		r.err = budgetError("it ran over %d steps", r.lim.work/workStep)
	}
	return r.err
}

// step counts one statement, loop pass or call.
func (r *renderer) step() error { return r.work(workStep) }

// sizeOf is the shallow size of v for work: bytes of a string, items of a
// list or dict.
func sizeOf(v Value) int64 {
	switch v := v.(type) {
	case string:
		return int64(len(v))
	case *List:
		return int64(len(v.Items)) * elemWork
	case *Dict:
		return int64(len(v.keys)) * elemWork
	}
	return 0
}

// sink is a string builder that stops growing at max and remembers why:
// repr and tojson write into one, so a value that holds one big string
// many times over cannot expand past the budget, and one nested past
// maxValueDepth (or holding itself) ends instead of recursing on.
type sink struct {
	b        strings.Builder
	n        int64 // bytes written (or counted)
	max      int64
	counting bool // count only, hold nothing
	err      error
	full     bool // err is that it reached max
}

func newSink(max int64) *sink { return &sink{max: max} }

// fits takes n bytes and reports whether to write them.
func (s *sink) fits(n int) bool {
	if s.err != nil {
		return false
	}
	if s.n+int64(n) > s.max {
		s.err, s.full = fmt.Errorf("the text is over %d bytes", s.max), true
		return false
	}
	s.n += int64(n)
	return !s.counting
}

func (s *sink) WriteString(x string) {
	if s.fits(len(x)) {
		s.b.WriteString(x)
	}
}

func (s *sink) WriteByte(c byte) error {
	if s.fits(1) {
		s.b.WriteByte(c)
	}
	return nil
}

func (s *sink) WriteRune(c rune) {
	if s.fits(utf8.RuneLen(c)) {
		s.b.WriteRune(c)
	}
}

// Write lets fmt.Fprintf write into a sink.
func (s *sink) Write(p []byte) (int, error) {
	if s.fits(len(p)) {
		s.b.Write(p)
	}
	return len(p), nil
}

// deep notes a value nested past maxValueDepth; it reports whether so.
func (s *sink) deep(depth int) bool {
	if depth > maxValueDepth && s.err == nil {
		s.err = fmt.Errorf("the value is nested over %d deep", maxValueDepth)
	}
	return s.err != nil
}

func (s *sink) String() string { return s.b.String() }

// smallText is what build writes in one pass.
const smallText = 1 << 20

// build is the text write makes, within the budget. Text up to smallText
// is written once; longer text is counted first and then written into one
// allocation of its size, so text that cannot fit fails before any of it
// is held and text that fits leaves no trail of outgrown builders (growing
// one to 64 MiB left over three times that in garbage).
func (r *renderer) build(write func(*sink) error) (string, error) {
	s := newSink(min(r.room(), smallText))
	if err := write(s); err != nil {
		return "", err
	}
	if s.full && r.room() > smallText {
		s = &sink{max: r.room(), counting: true}
		if err := write(s); err != nil {
			return "", err
		}
		if s.err == nil {
			n := s.n
			s = &sink{max: n}
			s.b.Grow(int(n))
			if err := write(s); err != nil {
				return "", err
			}
		}
	}
	switch {
	case s.full:
		return "", r.spend(-1)
	case s.err != nil:
		return "", s.err
	}
	if err := r.spend(s.n); err != nil {
		return "", err
	}
	return s.String(), nil
}

// fail records err as the render's error unless one is there.
func (r *renderer) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func sizesOf(vs []Value) int64 {
	var n int64
	for _, v := range vs {
		n += sizeOf(v)
	}
	return n
}

// sorting counts the comparisons of sorting n values up front, so a sort
// that cannot finish within the budget does not start.
func (r *renderer) sorting(n int) error {
	return r.work(int64(n) * int64(bits.Len(uint(n))) * elemWork)
}

// built takes a string a function made from the budget.
func (r *renderer) built(s string) (Value, error) {
	if err := r.spend(int64(len(s))); err != nil {
		return nil, err
	}
	return s, nil
}

// newList takes a list's items from the budget.
func (r *renderer) newList(items []Value) (Value, error) {
	if err := r.spendN(int64(len(items)), 16); err != nil {
		return nil, err
	}
	return &List{Items: items}, nil
}

// spaces is n spaces (none for n <= 0) within the budget.
func (r *renderer) spaces(n int64) (string, error) {
	n = max(n, 0)
	if err := r.spend(n); err != nil {
		return "", err
	}
	return strings.Repeat(" ", int(n)), nil
}

// repr is Python's repr() within the budget.
func (r *renderer) repr(v Value) (Value, error) {
	return r.build(func(s *sink) error { writeRepr(s, v, 0); return nil })
}

// join is sep.join(str(x) for x in items), its size taken from the budget
// before it is built: one separator repeated a million times is no longer
// cheap.
func (r *renderer) join(items []Value, sep string) (Value, error) {
	if err := r.spendN(int64(len(items)), 16); err != nil {
		return nil, err
	}
	parts := make([]string, len(items))
	var total int64
	for i, x := range items {
		p, err := r.str(x)
		if err != nil {
			return nil, err
		}
		parts[i], total = p, total+int64(len(p))
	}
	if err := r.spendN(int64(max(len(items)-1, 0)), int64(len(sep))); err != nil {
		return nil, err
	}
	if err := r.spend(total); err != nil {
		return nil, err
	}
	return strings.Join(parts, sep), nil
}

// replace is s.replace(old, new, n) (n < 0: all), its size taken from the
// budget before it is built.
func (r *renderer) replace(s, old, new string, n int64) (Value, error) {
	count := int64(strings.Count(s, old))
	if n >= 0 && n < count {
		count = n
	}
	if grow := int64(len(new)) - int64(len(old)); grow > 0 {
		if err := r.spendN(count, grow); err != nil {
			return nil, err
		}
	}
	if err := r.spend(int64(len(s))); err != nil {
		return nil, err
	}
	return strings.Replace(s, old, new, int(max(n, -1))), nil
}
