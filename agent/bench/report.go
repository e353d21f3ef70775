package bench

import (
	"fmt"
	"html"
	"math"
	"strings"

	"jspark/agent"
)

// Report renders report.html: every table, then the plots: TTFT per trial
// (cache), incumbent token timelines around the arrival (mixed), aggregate
// tok/s against concurrency. Inline SVG; it opens with no network.
func Report(res *Result) string {
	var b strings.Builder
	b.WriteString(`<!doctype html><html><head><meta charset="utf-8"><title>jspark bench</title>` + style + `</head><body>`)
	var names []string
	for _, t := range res.Targets {
		names = append(names, fmt.Sprintf("%s (%s %s)", t.Name, t.Kind, t.Spec))
	}
	fmt.Fprintf(&b, "<h1>jspark bench: %s</h1><p>Targets: %s.</p>", html.EscapeString(strings.Join(res.Screens, ", ")), html.EscapeString(strings.Join(names, "; ")))
	for i := range res.Tables {
		tableHTML(&b, &res.Tables[i])
	}
	for _, s := range res.Screens {
		switch s {
		case "cache":
			cachePlots(&b, res)
		case "mixed":
			mixedPlots(&b, res)
		case "concurrency":
			concurrencyPlot(&b, res)
		}
	}
	b.WriteString("</body></html>\n")
	return b.String()
}

const style = `<style>
body{font:14px system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin-bottom:.5em}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}
th{background:#f4f4f4}td:first-child{text-align:left}svg{background:#fafafa;border:1px solid #ddd;margin:0.5em 1em 1em 0}p.note{max-width:60em;color:#555}
</style>`

// tableHTML writes a table as report.html shows it: title, cells, note.
func tableHTML(b *strings.Builder, t *Table) {
	fmt.Fprintf(b, "<h2>%s</h2><table><tr>", html.EscapeString(t.Title))
	for _, c := range t.Columns {
		fmt.Fprintf(b, "<th>%s</th>", html.EscapeString(c))
	}
	b.WriteString("</tr>")
	for _, r := range t.Rows {
		b.WriteString("<tr>")
		for _, c := range r {
			fmt.Fprintf(b, "<td>%s</td>", html.EscapeString(c))
		}
		b.WriteString("</tr>")
	}
	fmt.Fprintf(b, "</table><p class=note>%s</p>", html.EscapeString(t.Note))
}

// cachePlots: each target's TTFT of every cache request, in order, one
// colour per kind of measurement.
func cachePlots(b *strings.Builder, res *Result) {
	kinds := []string{"first-use", "uncached", "exact repeat", "changed suffix"}
	b.WriteString("<h2>TTFT per trial</h2><p>")
	for i, k := range kinds {
		fmt.Fprintf(b, `<span style="color:%s">&#9632; %s</span> `, agent.Color(i), k)
	}
	b.WriteString("</p>")
	for _, tg := range res.Targets {
		ss := make([]agent.Series, len(kinds))
		for i := range ss {
			ss[i].Color = agent.Color(i)
		}
		recs := res.records(tg.Name, "cache")
		for i, r := range recs {
			for k, kind := range kinds {
				if strings.HasSuffix(r.Case, " "+kind) && r.OK() {
					ss[k].Points = append(ss[k].Points, [2]float64{float64(i + 1), r.TTFT})
				}
			}
		}
		b.WriteString(agent.Plot(tg.Name+": TTFT of each cache request (lengths ascending)", "requests", "TTFT, s", float64(len(recs)), ss))
	}
}

// mixedPlots: for each target, the last repeat of the largest cell: each
// incumbent's output events over time, and the arrival's send and first
// output (dots at zero).
func mixedPlots(b *strings.Builder, res *Result) {
	if len(res.Config.ArriveLengths) == 0 || len(res.Config.ArriveAt) == 0 {
		return
	}
	c := mixedCase(last(res.Config.ArriveLengths), last(res.Config.ArriveAt))
	b.WriteString("<h2>Incumbent token timelines around the arrival (" + html.EscapeString(c) + ", last repeat)</h2><p>Lines: each incumbent's output events; black dots: the arrival's send and first output.</p>")
	for _, tg := range res.Targets {
		recs := res.records(tg.Name, "mixed", c)
		trial := 0
		for _, r := range recs {
			trial = max(trial, r.Trial)
		}
		t0 := math.Inf(1)
		for _, r := range recs {
			if r.Trial == trial {
				t0 = math.Min(t0, r.Sent)
			}
		}
		var ss []agent.Series
		xmax := 0.0
		for _, r := range recs {
			if r.Trial != trial {
				continue
			}
			if r.Role == "arrival" {
				s := agent.Series{Color: "#000", Points: [][2]float64{{r.Sent - t0, 0}}}
				if r.OK() {
					s.Points = append(s.Points, [2]float64{r.Sent + r.TTFT - t0, 0})
				}
				ss = append(ss, s)
				continue
			}
			s := agent.Series{Color: agent.Color(len(ss)), Line: true}
			for i, e := range r.Events() {
				s.Points = append(s.Points, [2]float64{e - t0, float64(i + 1)})
				xmax = max(xmax, e-t0)
			}
			ss = append(ss, s)
		}
		b.WriteString(agent.Plot(tg.Name+": output events per incumbent", "s", "events", xmax, ss))
	}
}

func concurrencyPlot(b *strings.Builder, res *Result) {
	b.WriteString("<h2>Aggregate tok/s against concurrency</h2><p>")
	var ss []agent.Series
	xmax := 0.0
	for i, tg := range res.Targets {
		fmt.Fprintf(b, `<span style="color:%s">&#9632; %s</span> `, agent.Color(i), html.EscapeString(tg.Name))
		s := agent.Series{Color: agent.Color(i), Line: true}
		for _, n := range res.Config.Concurrency {
			if a, _ := aggregate(res.records(tg.Name, "concurrency", concurrencyCase(n))); !math.IsNaN(a) {
				s.Points = append(s.Points, [2]float64{float64(n), a})
				xmax = max(xmax, float64(n))
			}
		}
		ss = append(ss, s)
	}
	b.WriteString("</p>")
	b.WriteString(agent.Plot("aggregate tok/s", "streams", "tok/s", xmax, ss))
}
