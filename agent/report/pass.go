package report

import (
	"fmt"
	"html"
	"strings"

	"jspark/agent/record"
)

// PassTable is the pass rates of a run on one target: a row per task of
// each round, over its trials, then one for the round's tasks together.
// pass@k and pass^k appear with several trials (with one they are pass@1).
func PassTable(res *record.Work) Table {
	k := max(res.Trials, 1)
	t := Table{Screen: "pass", Title: fmt.Sprintf("Pass rates: %s, %d trial%s", res.Recipe, k, plural(k)),
		Columns: []string{"Round", "Task", "Passed", "pass@1 ± stderr"}}
	if k > 1 {
		t.Columns = append(t.Columns, fmt.Sprintf("pass@%d", k), fmt.Sprintf("pass^%d", k))
	}
	t.Columns = append(t.Columns, "Not scored")
	for _, p := range res.PassRates {
		row := []string{p.Round, taskCell(p), fmt.Sprintf("%d/%d", p.Passed, p.Attempts), Pass1(p)}
		if k > 1 {
			row = append(row, Rate(p.PassK), Rate(p.PassHatK))
		}
		t.Add(append(row, fmt.Sprint(p.Unscored))...)
	}
	t.Note = "Passed: sessions whose task check passed with the hidden tests copied in after they stopped, of those scored. " +
		"pass@1 ± its standard error over the task's sessions (a round's: over its tasks)"
	if k > 1 {
		t.Note += fmt.Sprintf("; pass@%d = 1 − C(n−c, %d)/C(n, %d) (Chen et al. 2021), pass^%d = C(c, %d)/C(n, %d) (τ-bench): "+
			"of n scored sessions c passed; a round's are its tasks' means", k, k, k, k, k, k)
	}
	t.Note += ". Not scored: infrastructure failures, and tasks with nothing to check."
	return t
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// taskCell names a pass rate's task, or the round's tasks together.
func taskCell(p record.PassRate) string {
	if p.Task != "" {
		return p.Task
	}
	return fmt.Sprintf("all %d task%s", p.Tasks, plural(p.Tasks))
}

// Rate is an estimate's cell: "–" where there was nothing to estimate from.
func Rate(v *float64) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprintf("%.2f", *v)
}

// Pass1 is pass@1 with its standard error where it has one.
func Pass1(p record.PassRate) string {
	if p.Pass1 == nil || p.Pass1Stderr == nil {
		return Rate(p.Pass1)
	}
	return fmt.Sprintf("%.2f ± %.2f", *p.Pass1, *p.Pass1Stderr)
}

// ErrorBar is an inline SVG of a rate in [0, 1] as a bar, with a whisker
// of ± its standard error; a dash where there is no rate.
func ErrorBar(p, se *float64) string {
	if p == nil {
		return "–"
	}
	const w, h = 100.0, 12.0
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class=bar width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f"><rect width="%.0f" height="%.0f" fill="#eee"/><rect width="%.1f" height="%.0f" fill="#4c9a2a"/>`,
		w, h, w, h, w, h, *p*w, h)
	if se != nil {
		lo, hi := max(*p-*se, 0)*w, min(*p+*se, 1)*w
		fmt.Fprintf(&b, `<path d="M%.1f %.1fH%.1fM%.1f 2V%.0fM%.1f 2V%.0f" stroke="#222" fill="none"/>`, lo, h/2, hi, lo, h-2, hi, h-2)
	}
	b.WriteString("</svg> ")
	b.WriteString(html.EscapeString(fmt.Sprintf("%.2f", *p)))
	if se != nil {
		b.WriteString(html.EscapeString(fmt.Sprintf(" ± %.2f", *se)))
	}
	return b.String()
}
