package bench

import (
	"fmt"
	"html"
	"path/filepath"
	"strings"

	"jspark/agent"
)

// WorkTarget is one target of a `jspark work` run over several: its own
// run's results.json, whole, with the target's name beside it.
type WorkTarget struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // boot or endpoint
	Spec string `json:"spec"` // the boot's engine flags, or the endpoints' URLs
	Out  string `json:"out"`  // its folder: results.json, report.html, trajectories
	*agent.WorkResult
}

// WorkResults is results.json of a `jspark work` run over several targets;
// one target keeps agent.WorkResult's layout.
type WorkResults struct {
	Recipe  string       `json:"recipe"`
	Window  float64      `json:"window"`
	Targets []WorkTarget `json:"targets"`
}

// WorkTable is the seed's "Work: four recipes" table: one row per target and
// round, the Work table's columns.
// NOTE: the seed heads its first column "Recipe" for what are backends
// (L4, Tony, Mia, L5); here a recipe is the workload, so the column is
// "Backend".
func WorkTable(res *WorkResults) Table {
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
			"API errors", "Pending at cut", "Waiting max", "Running max", "Preemptions"}}
	counted := map[string]bool{}
	var by []string
	for _, tg := range res.Targets {
		for _, r := range tg.Rounds {
			s := r.Summary
			t.add(tg.Name, r.Name, fmt.Sprintf("%.2f", s.BackendTokS), seconds(s.InitialTTFT), seconds(s.LaterMedianTTFT),
				fmt.Sprint(s.ToolCalls), fmt.Sprint(s.NonzeroExits), fmt.Sprint(s.APIErrors), fmt.Sprint(s.PendingAtCut),
				fmt.Sprintf("%.0f", s.WaitingMax), fmt.Sprintf("%.0f", s.RunningMax), fmt.Sprintf("%.0f", s.Preemptions))
			if !counted[tg.Name] {
				counted[tg.Name] = true
				by = append(by, fmt.Sprintf("%s %s", tg.Name, s.CountedBy))
			}
		}
	}
	t.Note = fmt.Sprintf("Accepted backend output tokens / the fixed %.0f-second window, counted by the engine, the endpoint's vllm:generation_tokens_total "+
		"or its streamed tokens (%s). Every session is cut at the window: unfinished tasks, no output-quality score; "+
		"later tool trajectories differ between backends. Each backend ran its rounds in turn, alone on the machine.", res.Window, strings.Join(by, ", "))
	return t
}

// WorkReport is report.html of a run over several targets: the table and a
// link to each target's own report.
func WorkReport(res *WorkResults, out string) string {
	var b strings.Builder
	b.WriteString(`<!doctype html><html><head><meta charset="utf-8"><title>jspark work</title>` + style + `</head><body>`)
	fmt.Fprintf(&b, "<h1>jspark work: %s</h1>", html.EscapeString(res.Recipe))
	t := WorkTable(res)
	tableHTML(&b, &t)
	b.WriteString("<ul>")
	for _, tg := range res.Targets {
		rel, err := filepath.Rel(out, filepath.Join(tg.Out, "report.html"))
		if err != nil {
			rel = filepath.Join(tg.Out, "report.html")
		}
		fmt.Fprintf(&b, `<li><a href="%s">%s</a> (%s %s)</li>`, html.EscapeString(filepath.ToSlash(rel)), html.EscapeString(tg.Name), tg.Kind, html.EscapeString(tg.Spec))
	}
	b.WriteString("</ul></body></html>\n")
	return b.String()
}

// seconds is a cell of a TTFT: "–" when nothing was measured, as the Work
// table writes it.
func seconds(v *float64) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprintf("%.3f", *v)
}
