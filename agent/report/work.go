package report

import (
	"fmt"
	"html"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"jspark/agent/record"
)

// Work writes the seed's Work table for a run on one target (a row per
// round, per trial with --trials; its Passed column is the seed's "code
// validation 2/4": sessions passed of those scored), then each round's
// window line and session times, how its tokens were counted, the repeat
// pairs, each external agent's line, the sessions not scored, and the pass
// rates table.
func Work(w io.Writer, res *record.Work) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "Round\tBackend tok/s\tInitial TTFT, s\tLater median TTFT, s\tTools\tNonzero exits\tAPI errors\tPending at cut\tWaiting max\tRunning max\tPreemptions\tPassed\t")
	for _, r := range res.Rounds {
		s := r.Summary
		fmt.Fprintf(tw, "%s\t%.2f\t%s\t%s\t%d\t%d\t%d\t%d\t%.0f\t%.0f\t%.0f\t%s\t\n", res.Label(r), s.BackendTokS, Seconds(s.InitialTTFT), Seconds(s.LaterMedianTTFT),
			s.ToolCalls, s.NonzeroExits, s.APIErrors, s.PendingAtCut, s.WaitingMax, s.RunningMax, s.Preemptions, Passed(s))
	}
	tw.Flush()
	for _, r := range res.Rounds {
		fmt.Fprintf(w, "%s: %s\n", res.Label(r), WindowLine(r))
		fmt.Fprintf(w, "%s: %s\n", res.Label(r), TimeLine(r))
	}
	if len(res.Rounds) > 0 {
		fmt.Fprintf(w, "Backend tok/s = output tokens counted by %s / the %.0f s window.\n", res.Rounds[0].Summary.CountedBy.Note(), res.Window)
	}
	if res.RepeatPairs.Total > 0 {
		fmt.Fprintf(w, "initial payloads: %d/%d repeat pairs byte-identical\n", res.RepeatPairs.Identical, res.RepeatPairs.Total)
	}
	for _, r := range res.Rounds {
		for _, s := range r.Sessions {
			if s.Agent != "" {
				fmt.Fprintf(w, "%s %s: %s\n", res.Label(r), s.Name, AgentLine(r, &s))
			}
		}
	}
	for _, r := range res.Rounds {
		if r.Retried != "" {
			fmt.Fprintf(w, "%s: ran twice: the first attempt failed for the infrastructure (%s)\n", res.Label(r), r.Retried)
		}
		for _, s := range r.Sessions {
			if s.Infra != "" {
				fmt.Fprintf(w, "%s %s: not scored: infrastructure failure: %s\n", res.Label(r), s.Name, s.Infra)
			}
		}
	}
	if len(res.PassRates) > 0 {
		fmt.Fprintln(w)
		t := PassTable(res)
		t.Write(w)
	}
}

// Passed is the Work table's pass cell: passed/scored, "–" when no
// session was scored.
func Passed(s record.Summary) string {
	if s.Checks == 0 {
		return "–"
	}
	return fmt.Sprintf("%d/%d", s.ChecksPassed, s.Checks)
}

// TimeLine gives a round's mean session time, wall and working (wall less
// the engine's queueing), or says that working time is not knowable.
func TimeLine(r *record.Round) string {
	s := r.Summary
	if s.WorkingSec == nil {
		return fmt.Sprintf("session time (mean): wall %.1f s; working time not knowable from this backend (no usage.jspark timing: its TTFT mixes queueing and prefill)", s.WallSec)
	}
	line := fmt.Sprintf("session time (mean): wall %.1f s, working %.1f s (wall less the engine's queueing, from usage.jspark)", s.WallSec, *s.WorkingSec)
	unreported := 0
	for _, sr := range r.Sessions {
		unreported += sr.Time.Unreported
	}
	if unreported > 0 {
		line += fmt.Sprintf("; %d request%s cut before %s usage came count as working: an upper bound", unreported, plural(unreported), map[bool]string{true: "its", false: "their"}[unreported == 1])
	}
	return line
}

// WindowLine says where a round's window went: the sums over its requests
// of the engine's queued, prefill, decode and preempted time, and of the
// tools' time.
func WindowLine(r *record.Round) string {
	u := r.Summary.WindowUse
	if u == nil {
		return "where the window went: not reported by this backend"
	}
	tools := fmt.Sprintf("tools %.1f s", u.ToolsSec)
	for _, s := range r.Sessions {
		if s.Agent != "" {
			tools = "tools not measured (an external agent runs its own)"
		}
	}
	return fmt.Sprintf("where the window went (sums over sessions): queue %.1f s, prefill %.1f s, decode %.1f s, preempted %.1f s, %s",
		u.QueuedSec, u.PrefillSec, u.DecodeSec, u.PreemptedSec, tools)
}

// AgentLine is the seed's Pi-validation line for an external agent's session:
// how it ended and when, its requests and reads, the engine's prefix hits.
func AgentLine(r *record.Round, s *record.Session) string {
	reads, cached := 0, 0
	for _, q := range s.Requests {
		cached += q.CachedTokens
		for _, c := range q.Calls {
			if c.Name == "read" {
				reads++
			}
		}
	}
	var b strings.Builder
	switch {
	case s.AgentExit != nil:
		fmt.Fprintf(&b, "%s exited %d after %.3f s", s.Agent, *s.AgentExit, *s.AgentSeconds)
	case s.AgentError != "":
		fmt.Fprintf(&b, "%s could not run: %s", s.Agent, s.AgentError)
	case s.End == record.EndTurns || s.End == record.EndOutputTokens:
		fmt.Fprintf(&b, "%s stopped at the recipe's limit (%s)", s.Agent, s.End)
	default:
		fmt.Fprintf(&b, "%s cut at %.0f s", s.Agent, r.Window)
	}
	fmt.Fprintf(&b, ": %d requests, %d reads, %d tool calls, %d cached prompt tokens; engine prefix hits %.0f tokens in the round", len(s.Requests), reads, s.ToolCalls, cached, r.Summary.PrefixHits)
	if s.ExpectMet != nil {
		fmt.Fprintf(&b, "; expected answer %s", map[bool]string{true: "found", false: "NOT found"}[*s.ExpectMet])
	}
	return b.String()
}

// Seconds is a table cell of a TTFT: "–" when nothing was measured.
func Seconds(v *float64) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprintf("%.3f", *v)
}

// WorkHTML renders report.html of a run on one target (its folder out):
// the Work table, the per-task table (pass rates with their error bars,
// TTFT and tok/s, links to each session), per round trial its plots
// (cumulative output tokens per session, the TTFT of every request, the
// backend's counted output tokens), and every session's trajectory.
func WorkHTML(res *record.Work, out string) string {
	var b strings.Builder
	Page(&b, "jspark work")
	fmt.Fprintf(&b, "<h1>jspark work: %s</h1><p>Backends: %s. Window %.0f s, %d trial%s.</p>", html.EscapeString(res.Recipe), html.EscapeString(strings.Join(res.Backends, ", ")),
		res.Window, max(res.Trials, 1), plural(max(res.Trials, 1)))
	b.WriteString("<table><tr><th>Round</th><th>Backend tok/s</th><th>Initial TTFT, s</th><th>Later median TTFT, s</th><th>Tools</th><th>Nonzero exits</th><th>API errors</th><th>Pending at cut</th><th>Waiting max</th><th>Running max</th><th>Preemptions</th><th>Passed</th></tr>")
	for _, r := range res.Rounds {
		s := r.Summary
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%.2f</td><td>%s</td><td>%s</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%.0f</td><td>%.0f</td><td>%.0f</td><td>%s</td></tr>",
			html.EscapeString(res.Label(r)), s.BackendTokS, Seconds(s.InitialTTFT), Seconds(s.LaterMedianTTFT), s.ToolCalls, s.NonzeroExits, s.APIErrors, s.PendingAtCut, s.WaitingMax, s.RunningMax, s.Preemptions, Passed(s))
	}
	b.WriteString("</table>")
	for _, r := range res.Rounds {
		fmt.Fprintf(&b, "<p class=note>%s: %s. %s.</p>", html.EscapeString(res.Label(r)), html.EscapeString(WindowLine(r)), html.EscapeString(TimeLine(r)))
	}
	if res.RepeatPairs.Total > 0 {
		fmt.Fprintf(&b, "<p>Initial payloads: %d/%d repeat pairs byte-identical.</p>", res.RepeatPairs.Identical, res.RepeatPairs.Total)
	}
	TaskTableHTML(&b, []TaskTarget{{Work: res}})
	for _, r := range res.Rounds {
		roundPlots(&b, res.Label(r), r)
	}
	TrajectoriesHTML(&b, res, out)
	End(&b)
	return b.String()
}

// roundPlots: the legend of a round's sessions and its three plots.
func roundPlots(b *strings.Builder, label string, r *record.Round) {
	fmt.Fprintf(b, "<h2>%s</h2><div class=legend>", html.EscapeString(label))
	var tokens, ttft []Series
	for i, s := range r.Sessions {
		c := Color(i)
		fmt.Fprintf(b, `<span style="color:%s">&#9632; %s (%s)</span>`, c, html.EscapeString(s.Name), s.End)
		tok := Series{Color: c, Line: true, Points: [][2]float64{{0, 0}}}
		var sum float64
		ts := Series{Color: c}
		for _, q := range s.Requests {
			sum += float64(q.OutputTokens())
			tok.Points = append(tok.Points, [2]float64{q.End, sum})
			if q.TTFT >= 0 {
				ts.Points = append(ts.Points, [2]float64{q.Sent, q.TTFT})
			}
		}
		tokens, ttft = append(tokens, tok), append(ttft, ts)
	}
	b.WriteString("</div>")
	b.WriteString(Plot("output tokens per session", "s", "tokens", r.Window, tokens))
	b.WriteString(Plot("TTFT per request (at its send time)", "s", "TTFT, s", r.Window, ttft))
	backend := Series{Color: "#333", Line: true}
	for _, x := range r.Samples {
		backend.Points = append(backend.Points, [2]float64{x.T, x.Generation - r.Samples[0].Generation})
	}
	b.WriteString(Plot("backend output tokens ("+string(r.Summary.CountedBy)+")", "s", "tokens", r.Window, []Series{backend}))
}

// Targets is the seed's "Work: four recipes" table of a run over several
// targets: one row per target and round, the Work table's columns.
// NOTE: the seed heads its first column "Recipe" for what are backends
// (L4, Tony, Mia, L5); here a recipe is the workload, so the column is
// "Backend".
func Targets(res *record.WorkTargets) Table {
	var rounds []string
	seen := map[string]bool{}
	for _, tg := range res.Targets {
		for _, r := range tg.Rounds {
			if !seen[r.Name] {
				seen[r.Name] = true
				rounds = append(rounds, r.Name)
			}
		}
	}
	t := Table{Screen: "work", Title: fmt.Sprintf("Work: %d backends, %s", len(res.Targets), strings.Join(rounds, ", ")),
		Columns: []string{"Backend", "Round", "Backend tok/s", "Initial TTFT, s", "Later median TTFT, s", "Tools", "Nonzero exits",
			"API errors", "Pending at cut", "Waiting max", "Running max", "Preemptions", "Passed"}}
	var by []string
	for _, tg := range res.Targets {
		for _, r := range tg.Rounds {
			s := r.Summary
			t.Add(tg.Name, tg.Label(r), fmt.Sprintf("%.2f", s.BackendTokS), Seconds(s.InitialTTFT), Seconds(s.LaterMedianTTFT),
				fmt.Sprint(s.ToolCalls), fmt.Sprint(s.NonzeroExits), fmt.Sprint(s.APIErrors), fmt.Sprint(s.PendingAtCut),
				fmt.Sprintf("%.0f", s.WaitingMax), fmt.Sprintf("%.0f", s.RunningMax), fmt.Sprintf("%.0f", s.Preemptions), Passed(s))
		}
		if len(tg.Rounds) > 0 {
			by = append(by, fmt.Sprintf("%s %s", tg.Name, tg.Rounds[0].Summary.CountedBy))
		}
	}
	t.Note = fmt.Sprintf("Accepted backend output tokens / the fixed %.0f-second window, counted by the engine, the endpoint's vllm:generation_tokens_total "+
		"or its streamed tokens (%s). Every session is cut at the window (or stops at a limit or on its own); Passed: sessions whose task check passed "+
		"with the hidden tests, of those scored. Later tool trajectories differ between backends. Each backend ran its rounds in turn, alone on the machine.", res.Window, strings.Join(by, ", "))
	return t
}

// TargetsHTML is report.html of a run over several targets: the table and a
// link to each target's own report (out is the run's folder).
func TargetsHTML(res *record.WorkTargets, out string) string {
	var b strings.Builder
	Page(&b, "jspark work")
	fmt.Fprintf(&b, "<h1>jspark work: %s</h1>", html.EscapeString(res.Recipe))
	t := Targets(res)
	t.HTML(&b)
	b.WriteString("<ul>")
	var tasks []TaskTarget
	for _, tg := range res.Targets {
		rel, err := filepath.Rel(out, filepath.Join(tg.Out, "report.html"))
		if err != nil {
			rel = filepath.Join(tg.Out, "report.html")
		}
		rel = filepath.ToSlash(rel)
		fmt.Fprintf(&b, `<li><a href="%s">%s</a> (%s %s)</li>`, html.EscapeString(rel), html.EscapeString(tg.Name), tg.Kind, html.EscapeString(tg.Spec))
		tasks = append(tasks, TaskTarget{Name: tg.Name, Work: tg.Work, Page: rel})
	}
	b.WriteString("</ul>")
	TaskTableHTML(&b, tasks)
	End(&b)
	return b.String()
}
