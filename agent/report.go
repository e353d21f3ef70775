package agent

import (
	"fmt"
	"html"
	"strings"
)

// Report renders report.html: the table and, per round, cumulative output
// tokens over time per session and the TTFT of every request, as inline SVG
// (it opens with no network).
func Report(res *WorkResult) string {
	var b strings.Builder
	b.WriteString(`<!doctype html><html><head><meta charset="utf-8"><title>jspark work</title><style>
body{font:14px system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}
th{background:#f4f4f4}td:first-child{text-align:left}svg{background:#fafafa;border:1px solid #ddd;margin:0.5em 1em 1em 0}.legend span{margin-right:1em}
</style></head><body>`)
	fmt.Fprintf(&b, "<h1>jspark work: %s</h1><p>Backends: %s. Window %.0f s.</p>", html.EscapeString(res.Recipe), html.EscapeString(strings.Join(res.Backends, ", ")), res.Window)
	b.WriteString("<table><tr><th>Round</th><th>Backend tok/s</th><th>Initial TTFT, s</th><th>Later median TTFT, s</th><th>Tools</th><th>Nonzero exits</th><th>API errors</th><th>Pending at cut</th><th>Waiting max</th><th>Running max</th><th>Preemptions</th><th>Checks passed</th></tr>")
	for _, r := range res.Rounds {
		s := r.Summary
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%.2f</td><td>%s</td><td>%s</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%.0f</td><td>%.0f</td><td>%.0f</td><td>%d/%d</td></tr>",
			html.EscapeString(r.Name), s.BackendTokS, seconds(s.InitialTTFT), seconds(s.LaterMedianTTFT), s.ToolCalls, s.NonzeroExits, s.APIErrors, s.PendingAtCut, s.WaitingMax, s.RunningMax, s.Preemptions, s.ChecksPassed, s.Checks)
	}
	b.WriteString("</table>")
	if res.RepeatPairs.Total > 0 {
		fmt.Fprintf(&b, "<p>Initial payloads: %d/%d repeat pairs byte-identical.</p>", res.RepeatPairs.Identical, res.RepeatPairs.Total)
	}
	for _, r := range res.Rounds {
		fmt.Fprintf(&b, "<h2>%s</h2><div class=legend>", html.EscapeString(r.Name))
		var tokens, ttft []series
		for i, s := range r.Sessions {
			c := color(i)
			fmt.Fprintf(&b, `<span style="color:%s">&#9632; %s (%s)</span>`, c, html.EscapeString(s.Name), s.End)
			tok := series{color: c, line: true, pts: [][2]float64{{0, 0}}}
			var sum float64
			ts := series{color: c}
			for _, q := range s.Requests {
				sum += float64(max(q.CompletionTokens, q.StreamedTokens))
				tok.pts = append(tok.pts, [2]float64{q.End, sum})
				if q.TTFT >= 0 {
					ts.pts = append(ts.pts, [2]float64{q.Sent, q.TTFT})
				}
			}
			tokens, ttft = append(tokens, tok), append(ttft, ts)
		}
		b.WriteString("</div>")
		b.WriteString(plot("output tokens per session", "s", "tokens", r.Window, tokens))
		b.WriteString(plot("TTFT per request (at its send time)", "s", "TTFT, s", r.Window, ttft))
		backend := series{color: "#333", line: true}
		for _, x := range r.Samples {
			backend.pts = append(backend.pts, [2]float64{x.T, x.Generation - r.Samples[0].Generation})
		}
		b.WriteString(plot("backend output tokens ("+r.Summary.CountedBy+")", "s", "tokens", r.Window, []series{backend}))
	}
	b.WriteString("</body></html>\n")
	return b.String()
}

type series struct {
	color string
	line  bool
	pts   [][2]float64
}

func color(i int) string {
	palette := []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}
	return palette[i%len(palette)]
}

// plot draws series on shared axes: x from 0 to xmax, y from 0 to the data's max.
func plot(title, xlabel, ylabel string, xmax float64, ss []series) string {
	const w, h, l, bt, t, r = 640.0, 260.0, 60.0, 30.0, 24.0, 10.0
	ymax := 0.0
	for _, s := range ss {
		for _, p := range s.pts {
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
		if s.line {
			var pts []string
			for _, p := range s.pts {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p[0]), y(p[1])))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, s.color, strings.Join(pts, " "))
			continue
		}
		for _, p := range s.pts {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`, x(p[0]), y(p[1]), s.color)
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
