package bench

import (
	"fmt"
	"html"
	"strings"

	"jspark/agent/record"
	"jspark/agent/report"
)

// replayColumns are the Work table's serving columns, after what the rows
// sent and got back.
var replayColumns = []string{"Round", "Run", "Requests", "Prompt tokens", "Output tokens", "Same output", "Backend tok/s",
	"Initial TTFT, s", "Later median TTFT, s", "API errors", "Pending at cut", "Waiting max", "Running max", "Preemptions"}

// tables is the replay's table: per round, the recording's row, then each
// target's.
func (res *ReplayResult) tables() []report.Table {
	t := report.Table{Screen: "replay", Title: fmt.Sprintf("Replay of %s (%s): serving, as recorded and replayed", res.Source, res.Recipe),
		Columns: replayColumns}
	var spans []string
	for _, rec := range res.recorded {
		t.Add(replayRow(res.label(rec), rec, "recorded", totals(rec), "–")...)
		for _, rr := range res.Rounds {
			if !sameRound(rr.Round, rec) {
				continue
			}
			c := rr.Compare
			t.Add(replayRow(res.label(rr.Round), rr.Round, rr.Target, c.Replayed, fmt.Sprintf("%d/%d", c.SameOutput, c.Finished))...)
			spans = append(spans, fmt.Sprintf("%s %s %.1f s by %s", rr.Target, res.label(rr.Round), rr.Window, rr.Summary.CountedBy))
		}
	}
	gaps := "the recorded gaps between a response and the next request (the tools' time)"
	if res.GapScale != 1 {
		gaps = fmt.Sprintf("the recorded gaps between a response and the next request × %g", res.GapScale)
	}
	t.Note = fmt.Sprintf("Every recorded request re-sent as it was, sessions at once, with %s; a request the window cut is held as long, then cancelled. "+
		"Backend tok/s = output tokens counted / the recorded %.0f s window, or the replay's span (its start to its last response's end: %s). "+
		"Same output = requests that finished both times with as many output tokens as recorded: where all do, the model behaved the same "+
		"and a difference in the other columns is the serving's.", gaps, res.Window, strings.Join(spans, "; "))
	return []report.Table{t}
}

func replayRow(label string, r *record.Round, run string, t Totals, same string) []string {
	s := r.Summary
	return []string{label, run, fmt.Sprint(t.Requests), fmt.Sprint(t.PromptTokens), fmt.Sprint(t.OutputTokens), same,
		fmt.Sprintf("%.2f", s.BackendTokS), report.Seconds(s.InitialTTFT), report.Seconds(s.LaterMedianTTFT),
		fmt.Sprint(s.APIErrors), fmt.Sprint(s.PendingAtCut), fmt.Sprintf("%.0f", s.WaitingMax), fmt.Sprintf("%.0f", s.RunningMax),
		fmt.Sprintf("%.0f", s.Preemptions)}
}

// page is the replay's report.html: the table, then per round the TTFT of
// every request at its send time, recorded (grey) and replayed (a colour
// per target).
func (res *ReplayResult) page() string {
	var b strings.Builder
	report.Page(&b, "jspark bench replay")
	fmt.Fprintf(&b, "<h1>jspark bench replay: %s</h1>", html.EscapeString(res.Source))
	for i := range res.Tables {
		res.Tables[i].HTML(&b)
	}
	for _, rec := range res.recorded {
		ss := []report.Series{ttftSeries(rec, "#999")}
		legend := []string{`<span style="color:#999">&#9632; recorded</span>`}
		xmax := rec.Window
		for i, rr := range res.Rounds {
			if sameRound(rr.Round, rec) {
				ss = append(ss, ttftSeries(rr.Round, report.Color(i)))
				legend = append(legend, fmt.Sprintf(`<span style="color:%s">&#9632; %s</span>`, report.Color(i), html.EscapeString(rr.Target)))
				xmax = max(xmax, rr.Window)
			}
		}
		fmt.Fprintf(&b, "<h2>%s</h2><div class=legend>%s</div>", html.EscapeString(res.label(rec)), strings.Join(legend, ""))
		b.WriteString(report.Plot("TTFT per request (at its send time)", "s", "TTFT, s", xmax, ss))
	}
	report.End(&b)
	return b.String()
}

// label names a round in the tables: ROUND, or ROUND#K for trial K of a
// run with several.
func (res *ReplayResult) label(r *record.Round) string {
	if res.work == nil {
		return r.Name
	}
	return res.work.Label(r)
}

func ttftSeries(r *record.Round, color string) report.Series {
	s := report.Series{Color: color}
	for _, sr := range r.Sessions {
		for _, q := range sr.Requests {
			if q.TTFT >= 0 {
				s.Points = append(s.Points, [2]float64{q.Sent, q.TTFT})
			}
		}
	}
	return s
}
