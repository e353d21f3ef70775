package bench

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// median of xs (the mean of the middle two for an even count); NaN for none.
func median(xs []float64) float64 { return percentile(xs, 50) }

// percentile p (0..100) of xs with linear interpolation between ranks, as
// numpy's default (and so vLLM's bench serve) computes it; NaN for none.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	pos := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

func maxOf(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	m := xs[0]
	for _, x := range xs[1:] {
		m = max(m, x)
	}
	return m
}

// Cell formats: every table cell is one of these, so a reader of
// results.json can recompute a cell and compare strings.

// secs is a duration cell: "2.253 s", "–" when there is no value.
func secs(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.3f s", v)
}

// rate is a tok/s cell.
func rate(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
}

// count is an integer with thousands separators, as the seed writes them.
func count(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + count(-n)
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// ms formats a spread of seconds as milliseconds: p50 / p90 / p99 / max.
func spread(xs []float64) string {
	if len(xs) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f / %.1f / %.1f / %.1f ms", 1000*percentile(xs, 50), 1000*percentile(xs, 90), 1000*percentile(xs, 99), 1000*maxOf(xs))
}

// span is a range "lo–hi" of rates.
func span(xs []float64) string {
	if len(xs) == 0 {
		return "–"
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return rate(s[0]) + "–" + rate(s[len(s)-1])
}
