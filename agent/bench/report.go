package bench

import (
	"fmt"
	"html"
	"jspark/agent/report"
	"math"
	"strings"
)

// Page renders report.html: every table, then the plots: TTFT per trial
// (cache), incumbent token timelines around the arrival (mixed), aggregate
// tok/s against concurrency. Inline SVG; it opens with no network.
func Page(res *Result) string {
	var b strings.Builder
	report.Page(&b, "jspark bench")
	var names []string
	for _, t := range res.Targets {
		names = append(names, fmt.Sprintf("%s (%s %s)", t.Name, t.Kind, t.Spec))
	}
	fmt.Fprintf(&b, "<h1>jspark bench: %s</h1><p>Targets: %s.</p>", html.EscapeString(strings.Join(res.Screens, ", ")), html.EscapeString(strings.Join(names, "; ")))
	for i := range res.Tables {
		res.Tables[i].HTML(&b)
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
	report.End(&b)
	return b.String()
}

// cachePlots: each target's TTFT of every cache request, in order, one
// colour per kind of measurement.
func cachePlots(b *strings.Builder, res *Result) {
	kinds := []string{"first-use", "uncached", "exact repeat", "changed suffix"}
	b.WriteString("<h2>TTFT per trial</h2><p>")
	for i, k := range kinds {
		fmt.Fprintf(b, `<span style="color:%s">&#9632; %s</span> `, report.Color(i), k)
	}
	b.WriteString("</p>")
	for _, tg := range res.Targets {
		ss := make([]report.Series, len(kinds))
		for i := range ss {
			ss[i].Color = report.Color(i)
		}
		recs := res.records(tg.Name, "cache")
		for i, r := range recs {
			for k, kind := range kinds {
				if strings.HasSuffix(r.Case, " "+kind) && r.OK() {
					ss[k].Points = append(ss[k].Points, [2]float64{float64(i + 1), r.TTFT})
				}
			}
		}
		b.WriteString(report.Plot(tg.Name+": TTFT of each cache request (lengths ascending)", "requests", "TTFT, s", float64(len(recs)), ss))
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
		var ss []report.Series
		xmax := 0.0
		for _, r := range recs {
			if r.Trial != trial {
				continue
			}
			if r.Role == "arrival" {
				s := report.Series{Color: "#000", Points: [][2]float64{{r.Sent - t0, 0}}}
				if r.OK() {
					s.Points = append(s.Points, [2]float64{r.Sent + r.TTFT - t0, 0})
				}
				ss = append(ss, s)
				continue
			}
			s := report.Series{Color: report.Color(len(ss)), Line: true}
			for i, e := range r.Events() {
				s.Points = append(s.Points, [2]float64{e - t0, float64(i + 1)})
				xmax = max(xmax, e-t0)
			}
			ss = append(ss, s)
		}
		b.WriteString(report.Plot(tg.Name+": output events per incumbent", "s", "events", xmax, ss))
	}
}

func concurrencyPlot(b *strings.Builder, res *Result) {
	b.WriteString("<h2>Aggregate tok/s against concurrency</h2><p>")
	var ss []report.Series
	xmax := 0.0
	for i, tg := range res.Targets {
		fmt.Fprintf(b, `<span style="color:%s">&#9632; %s</span> `, report.Color(i), html.EscapeString(tg.Name))
		s := report.Series{Color: report.Color(i), Line: true}
		for _, n := range res.Config.Concurrency {
			if a, _ := aggregate(res.records(tg.Name, "concurrency", concurrencyCase(n))); !math.IsNaN(a) {
				s.Points = append(s.Points, [2]float64{float64(n), a})
				xmax = max(xmax, float64(n))
			}
		}
		ss = append(ss, s)
	}
	b.WriteString("</p>")
	b.WriteString(report.Plot("aggregate tok/s", "streams", "tok/s", xmax, ss))
}
