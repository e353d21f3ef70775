package report

import (
	"fmt"
	"html"
	"strings"

	"jspark/agent/record"
)

// TaskTarget is one target's run as the per-task table shows it.
type TaskTarget struct {
	Name string // "" for a run on one target
	Work *record.Work
	// Page is where its sessions' trajectories are: "" for this page, or
	// a target's report.html relative to this one.
	Page string
}

// taskKey is a row of the per-task table.
type taskKey struct{ round, task string }

// serving is what the backend gave a task's sessions: the mean TTFT of
// their first requests (nil: none had a first output) and whole-request
// tok/s over all their requests (output tokens / the requests' durations,
// TTFT included, as the seed defines it).
type serving struct {
	ttft *float64
	tokS float64
}

// TaskTableHTML writes the per-task table: a row per task of each round,
// and per target its pass rate with the error bar of its standard error,
// pass@k, the TTFT and tok/s its sessions saw, and a link to each session's
// trajectory (✗ failed, ✓ passed, · not scored), failures first.
func TaskTableHTML(b *strings.Builder, ts []TaskTarget) {
	var rows []taskKey
	seen := map[taskKey]bool{}
	for _, t := range ts {
		for _, p := range t.Work.PassRates {
			if k := (taskKey{p.Round, p.Task}); p.Task != "" && !seen[k] {
				seen[k] = true
				rows = append(rows, k)
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	k := 1
	for _, t := range ts {
		k = max(k, t.Work.Trials)
	}
	cols := []string{"Passed", "pass@1 ± stderr", fmt.Sprintf("pass@%d", k), "Initial TTFT, s", "tok/s", "Sessions"}
	b.WriteString(`<h2 id=tasks>Tasks</h2><table class=tasks><tr><th rowspan=2>Round</th><th rowspan=2>Task</th>`)
	for _, t := range ts {
		fmt.Fprintf(b, `<th colspan=%d>%s</th>`, len(cols), html.EscapeString(cmpName(t.Name)))
	}
	b.WriteString("</tr><tr>")
	for range ts {
		for _, c := range cols {
			fmt.Fprintf(b, "<th>%s</th>", html.EscapeString(c))
		}
	}
	b.WriteString("</tr>")
	for _, row := range rows {
		fmt.Fprintf(b, "<tr><td>%s</td><td>%s</td>", html.EscapeString(row.round), html.EscapeString(row.task))
		for _, t := range ts {
			taskCells(b, t, row)
		}
		b.WriteString("</tr>")
	}
	fmt.Fprintf(b, `</table><p class=note>Per task over its sessions of every trial. pass@1 ± its standard error (the bar and its whisker); pass@%d = 1 − C(n−c, %d)/C(n, %d) of n scored sessions, c passed (Chen et al. 2021). `+
		`Initial TTFT: the mean over the sessions' first requests; tok/s: output tokens over the requests' whole durations. Click a session for what the agent did.</p>`, k, k, k)
}

func cmpName(n string) string {
	if n == "" {
		return "this run"
	}
	return n
}

// taskCells are one target's cells of a row.
func taskCells(b *strings.Builder, t TaskTarget, row taskKey) {
	var p *record.PassRate
	for i := range t.Work.PassRates {
		if q := &t.Work.PassRates[i]; q.Round == row.round && q.Task == row.task {
			p = q
		}
	}
	if p == nil {
		b.WriteString(strings.Repeat("<td>–</td>", 6))
		return
	}
	sv := taskServing(t.Work, row)
	fmt.Fprintf(b, "<td>%d/%d</td><td class=rate>%s</td><td>%s</td><td>%s</td><td>%.2f</td><td class=links>",
		p.Passed, p.Attempts, ErrorBar(p.Pass1, p.Pass1Stderr), Rate(p.PassK), Seconds(sv.ttft), sv.tokS)
	// Failures first: the reader came to see what went wrong.
	for _, want := range []string{"failed", "unscored", "passed"} {
		for _, r := range t.Work.Rounds {
			for _, s := range r.Sessions {
				if r.Name != row.round || s.Task != row.task || verdict(&s) != want {
					continue
				}
				mark := map[string]string{"failed": "✗", "passed": "✓", "unscored": "·"}[want]
				fmt.Fprintf(b, `<a class=%s href="%s#%s" title="%s">%s %s</a> `, want, html.EscapeString(t.Page), SessionAnchor(r, &s),
					html.EscapeString(t.Work.Label(r)+" "+s.Name+": "+want), mark, html.EscapeString(t.Work.Label(r)+" "+s.Name))
			}
		}
	}
	b.WriteString("</td>")
}

// verdict is a session's outcome as the report names it.
func verdict(s *record.Session) string {
	switch {
	case s.Passed == nil:
		return "unscored"
	case *s.Passed:
		return "passed"
	}
	return "failed"
}

// taskServing sums a task's sessions in a round over its trials.
func taskServing(w *record.Work, row taskKey) serving {
	var sv serving
	var ttfts []float64
	tokens, secs := 0.0, 0.0
	for _, r := range w.Rounds {
		for _, s := range r.Sessions {
			if r.Name != row.round || s.Task != row.task {
				continue
			}
			for j, q := range s.Requests {
				if j == 0 && q.TTFT >= 0 {
					ttfts = append(ttfts, q.TTFT)
				}
				if q.End > q.Sent {
					tokens += float64(q.OutputTokens())
					secs += q.End - q.Sent
				}
			}
		}
	}
	if len(ttfts) > 0 {
		m := 0.0
		for _, x := range ttfts {
			m += x
		}
		m /= float64(len(ttfts))
		sv.ttft = &m
	}
	if secs > 0 {
		sv.tokS = tokens / secs
	}
	return sv
}

// SessionAnchor is the id of a session's trajectory in its report.html.
func SessionAnchor(r *record.Round, s *record.Session) string {
	id := "s-" + strings.ReplaceAll(r.Dir, "/", "-") + "-" + s.Name
	if r.Dir == "" {
		id = fmt.Sprintf("s-%s-t%d-%s", r.Name, r.Trial, s.Name)
	}
	return html.EscapeString(strings.Map(func(c rune) rune {
		if c == ' ' || c == '#' || c == '"' {
			return '_'
		}
		return c
	}, id))
}
