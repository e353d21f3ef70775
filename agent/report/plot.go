// Package report renders what a run recorded for people: the seed's tables
// (as text that reads on a terminal and as Markdown), report.html with its
// plots (inline SVG: it opens with no network), and the writing of a run's
// results.json beside it. The runner and the bench both render through it.
package report

import (
	"fmt"
	"html"
	"strings"
)

// Series is one set of points of a Plot: a polyline, or dots.
type Series struct {
	Color  string
	Line   bool
	Points [][2]float64
}

// Color is the i-th colour of the reports' palette.
func Color(i int) string {
	palette := []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}
	return palette[i%len(palette)]
}

// Plot draws series as an inline SVG on shared axes, x from 0 to at least
// xmax, y from 0 to the data's maximum.
func Plot(title, xlabel, ylabel string, xmax float64, ss []Series) string {
	const w, h, l, bt, t, r = 640.0, 260.0, 60.0, 30.0, 24.0, 10.0
	ymax := 0.0
	for _, s := range ss {
		for _, p := range s.Points {
			ymax = max(ymax, p[1])
			xmax = max(xmax, p[0])
		}
	}
	if ymax == 0 {
		ymax = 1
	}
	if xmax == 0 {
		xmax = 1
	}
	x := func(v float64) float64 { return l + v/xmax*(w-l-r) }
	y := func(v float64) float64 { return h - bt - v/ymax*(h-bt-t) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg width="%.0f" height="%.0f" xmlns="http://www.w3.org/2000/svg">`, w, h)
	fmt.Fprintf(&b, `<text x="%.0f" y="16" font-size="13">%s</text>`, l, html.EscapeString(title))
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#999"/><line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#999"/>`, l, h-bt, w-r, h-bt, l, t, l, h-bt)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11" text-anchor="end">%s</text>`, w-r, h-6, fmt.Sprintf("%.0f %s", xmax, xlabel))
	fmt.Fprintf(&b, `<text x="4" y="%.0f" font-size="11">%s</text><text x="4" y="%.0f" font-size="11">%s</text>`, t+4, fmtNum(ymax), h-bt, "0")
	fmt.Fprintf(&b, `<text x="4" y="%.0f" font-size="11">%s</text>`, (h-bt+t)/2, html.EscapeString(ylabel))
	for _, s := range ss {
		if s.Line {
			var pts []string
			for _, p := range s.Points {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p[0]), y(p[1])))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, s.Color, strings.Join(pts, " "))
			continue
		}
		for _, p := range s.Points {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`, x(p[0]), y(p[1]), s.Color)
		}
	}
	b.WriteString("</svg>")
	return b.String()
}

func fmtNum(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}
