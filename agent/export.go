package agent

import "context"

// What the bench (agent/bench) shares with the round runner.

// Settle waits (up to a minute) until no backend with counters has requests
// running or waiting.
func Settle(ctx context.Context, bs []Backend) { settle(ctx, bs) }

// Series is one set of points of a Plot: a polyline, or dots.
type Series struct {
	Color  string
	Line   bool
	Points [][2]float64
}

// Plot draws series as an inline SVG on shared axes, x from 0 to at least
// xmax, y from 0 to the data's maximum.
func Plot(title, xlabel, ylabel string, xmax float64, ss []Series) string {
	in := make([]series, len(ss))
	for i, s := range ss {
		in[i] = series{color: s.Color, line: s.Line, pts: s.Points}
	}
	return plot(title, xlabel, ylabel, xmax, in)
}

// Color is the i-th colour of the reports' palette.
func Color(i int) string { return color(i) }
