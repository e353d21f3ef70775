package grammar

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// Numbers are written -?(0|[1-9][0-9]*)(\.[0-9]+)?, never with an exponent.
// Bounds are enforced digit by digit: a byte is allowed when the number so
// far can still be completed to one inside the bounds. The bounds are
// exact decimals (no float64 rounding), scaled to every fraction length
// the number may take, so each test compares digit strings.
const (
	defaultIntDigits = 15 // most integer digits, unless a bound needs more
	maxIntDigits     = 40 // bounds needing more are refused
	fracDigits       = 12 // most fraction digits
	sigDigits        = 15 // integer and fraction digits together (float64 keeps 15)
)

// numSpec is a compiled number: which sign sides hold values, and the
// magnitudes allowed on each.
type numSpec struct {
	integer   bool
	intDigits int
	pos, neg  side // magnitudes of non-negative and negative numbers
}

// side holds a range of magnitudes scaled to each fraction length F: lo[F]
// is the smallest magnitude×10^F allowed, hi[F] the largest ("" when
// unbounded), both as decimal digits without leading zeros; empty[F] says
// no magnitude of F fraction digits fits.
type side struct {
	lo, hi []string
	empty  []bool
	any    bool // some number on this side can be written
}

// frac is how many fraction digits a number with n integer digits may take.
func (p *numSpec) frac(n int) int {
	if p.integer {
		return 0
	}
	return min(fracDigits, max(0, sigDigits-n))
}

// parts splits a number's text into its sign side, integer digits, whether
// it has a point, and its fraction digits.
func (p *numSpec) parts(text string) (sd *side, ip string, dot bool, fp string) {
	sd = &p.pos
	if strings.HasPrefix(text, "-") {
		sd, text = &p.neg, text[1:]
	}
	ip, fp, dot = strings.Cut(text, ".")
	return sd, ip, dot, fp
}

// step extends text by c, if the result can still become an allowed number.
func (p *numSpec) step(text string, c byte) (string, bool) {
	sd, ip, dot, fp := p.parts(text)
	switch {
	case c == '-':
		return "-", text == "" && p.neg.any
	case c == '.':
		return text + ".", !p.integer && !dot && ip != "" && p.viable(sd, ip, true, "")
	case c < '0' || c > '9':
		return "", false
	case !dot:
		if ip == "0" || len(ip) == p.intDigits {
			return "", false
		}
		return text + string(c), p.viable(sd, ip+string(c), false, "")
	default:
		if len(fp) >= p.frac(len(ip)) {
			return "", false
		}
		return text + string(c), p.viable(sd, ip, true, fp+string(c))
	}
}

// complete reports whether text is an allowed number as it stands.
func (p *numSpec) complete(text string) bool {
	sd, ip, dot, fp := p.parts(text)
	if ip == "" || dot && fp == "" {
		return false
	}
	f := len(fp)
	m := trimZeros(ip + fp)
	return !sd.empty[f] && cmpShift(m, 0, sd.lo[f]) >= 0 && (sd.hi[f] == "" || cmpShift(m, 0, sd.hi[f]) <= 0)
}

// viable reports whether a number on side sd whose integer digits begin
// with ip (all of them once dot) and whose fraction digits begin with fp
// can be completed within the bounds.
func (p *numSpec) viable(sd *side, ip string, dot bool, fp string) bool {
	if ip == "" {
		return sd.any
	}
	if dot {
		F := p.frac(len(ip))
		if F < max(len(fp), 1) {
			return false
		}
		return sd.meets(F, trimZeros(ip+fp), F-len(fp))
	}
	if ip == "0" {
		F := p.frac(1)
		return sd.meets(F, "0", F)
	}
	// More integer digits may follow: k of them put the number in
	// [ip·10^k, (ip+1)·10^k), written with up to frac(len+k) decimals.
	for k := 0; len(ip)+k <= p.intDigits; k++ {
		F := p.frac(len(ip) + k)
		if sd.meets(F, ip, k+F) {
			return true
		}
	}
	return false
}

// meets reports whether the scaled magnitudes [m·10^e, (m+1)·10^e) meet
// the side's range at fraction length F.
func (sd *side) meets(F int, m string, e int) bool {
	if sd.empty[F] {
		return false
	}
	if sd.hi[F] != "" && cmpShift(m, e, sd.hi[F]) > 0 {
		return false
	}
	return cmpShift(incDigits(m), e, sd.lo[F]) > 0
}

// cmpShift compares m·10^e with x; both are digit strings without leading
// zeros ("0" for zero).
func cmpShift(m string, e int, x string) int {
	if m == "0" {
		if x == "0" {
			return 0
		}
		return -1
	}
	if x == "0" {
		return 1
	}
	if lm, lx := len(m)+e, len(x); lm != lx {
		if lm < lx {
			return -1
		}
		return 1
	}
	if c := strings.Compare(m, x[:len(m)]); c != 0 {
		return c
	}
	if strings.Trim(x[len(m):], "0") != "" {
		return -1
	}
	return 0
}

func trimZeros(d string) string {
	d = strings.TrimLeft(d, "0")
	if d == "" {
		return "0"
	}
	return d
}

// incDigits is d+1.
func incDigits(d string) string {
	b := []byte(d)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < '9' {
			b[i]++
			return string(b)
		}
		b[i] = '0'
	}
	return "1" + string(b)
}

// bound is one end of a range: an exact value, exclusive or not.
type bound struct {
	v    *big.Rat // nil: unbounded
	excl bool
}

// parseBound reads a JSON number exactly. Values so large or so small that
// no written number could tell them from infinity or zero are clamped,
// keeping big.Rat's work bounded whatever the exponent.
func parseBound(s string) (*big.Rat, error) {
	mant, exp, _ := strings.Cut(strings.ToLower(s), "e")
	e := 0
	if exp != "" {
		n, err := strconv.Atoi(exp)
		if err != nil || n > 1e6 || n < -1e6 {
			return nil, fmt.Errorf("%s is out of range", s)
		}
		e = n
	}
	neg := strings.HasPrefix(mant, "-")
	mant = strings.TrimPrefix(mant, "-")
	ip, fp, _ := strings.Cut(mant, ".")
	e -= len(fp)
	digits := strings.TrimLeft(ip+fp, "0")
	if digits == "" {
		return new(big.Rat), nil
	}
	trimmed := strings.TrimRight(digits, "0")
	e += len(digits) - len(trimmed)
	digits = trimmed
	// The value is digits·10^e: keep at most 60 significant digits (past
	// what any scale here compares) and clamp its magnitude to [1e-30, 1e60].
	if len(digits) > 60 {
		e += len(digits) - 60
		digits = digits[:60] + "1" // still strictly above the truncated value
		e--
	}
	switch mag := len(digits) + e; {
	case mag > 60:
		digits, e = "1", 60
	case mag < -30:
		digits, e = "1", -31
	}
	r, ok := new(big.Rat).SetString(digits + "e" + strconv.Itoa(e))
	if !ok {
		return nil, fmt.Errorf("%s is not a number", s)
	}
	if neg {
		r.Neg(r)
	}
	return r, nil
}

// newNumSpec compiles bounds lo and hi (either may be unbounded). It
// returns nil when no number the grammar writes lies between them.
func newNumSpec(integer bool, lo, hi bound) *numSpec {
	p := &numSpec{integer: integer, intDigits: defaultIntDigits}
	zero := new(big.Rat)
	// Non-negative side: magnitudes in [max(lo,0), hi]; negative side:
	// magnitudes in [max(-hi,0), -lo].
	posLo, posHi := bound{zero, false}, hi
	if lo.v != nil && lo.v.Sign() >= 0 {
		posLo = lo
	}
	negLo, negHi := bound{zero, false}, bound{}
	if hi.v != nil && hi.v.Sign() <= 0 {
		negLo = bound{new(big.Rat).Neg(hi.v), hi.excl}
	}
	if lo.v != nil {
		negHi = bound{new(big.Rat).Neg(lo.v), lo.excl}
	}
	posOK := hi.v == nil || hi.v.Sign() >= 0
	negOK := lo.v == nil || lo.v.Sign() <= 0
	// A lower bound needing more integer digits than the default widens them.
	for _, b := range []struct {
		ok bool
		lo bound
	}{{posOK, posLo}, {negOK, negLo}} {
		if b.ok {
			n := len(scaled(b.lo, big.NewInt(1), true).String())
			if n > maxIntDigits {
				return nil
			}
			p.intDigits = max(p.intDigits, n)
		}
	}
	p.pos = p.newSide(posOK, posLo, posHi)
	p.neg = p.newSide(negOK, negLo, negHi)
	if !p.pos.any && !p.neg.any {
		return nil
	}
	return p
}

func (p *numSpec) newSide(ok bool, lo, hi bound) side {
	n := p.frac(0) + 1
	sd := side{lo: make([]string, n), hi: make([]string, n), empty: make([]bool, n)}
	for F := range n {
		sd.empty[F] = !ok
		if !ok {
			continue
		}
		scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(F)), nil)
		l := scaled(lo, scale, true)
		sd.lo[F] = l.String()
		if hi.v != nil {
			h := scaled(hi, scale, false)
			limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(p.intDigits+F)), nil)
			switch {
			case h.Sign() < 0 || h.Cmp(l) < 0:
				sd.empty[F] = true
			case h.Cmp(limit) < 0: // at or past the limit no written number reaches it
				sd.hi[F] = h.String()
			}
		}
	}
	for d := byte('0'); ok && d <= '9' && !sd.any; d++ {
		sd.any = p.viable(&sd, string(d), false, "")
	}
	return sd
}

// scaled is the smallest (up) or largest integer k with k/scale inside the
// bound b, whose value is not negative.
func scaled(b bound, scale *big.Int, up bool) *big.Int {
	x := new(big.Rat).Mul(b.v, new(big.Rat).SetInt(scale))
	q, r := new(big.Int).QuoRem(x.Num(), x.Denom(), new(big.Int))
	exact := r.Sign() == 0
	switch {
	case up && (!exact || b.excl):
		q.Add(q, big.NewInt(1))
	case !up && exact && b.excl:
		q.Sub(q, big.NewInt(1))
	}
	return q
}
