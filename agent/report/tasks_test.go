package report

import (
	"regexp"
	"strings"
	"testing"

	"jspark/agent/record"
)

// Over two targets the per-task table has a group of columns per target:
// each task's passed/attempted, its error bar and pass@1 ± stderr, pass@k,
// the TTFT and tok/s its sessions saw, and links into that target's own
// report.html, failures first; a task one target did not run is dashes.
func TestTaskTableOverTargets(t *testing.T) {
	yes, no := true, false
	rate := func(v float64) *float64 { return &v }
	a := &record.Work{Trials: 2, Rounds: []*record.Round{
		{Name: "c3-first", Trial: 1, Dir: "c3-first/t1", Sessions: []record.Session{
			{Name: "s0-x", Task: "x", Passed: &no, Requests: []record.Request{{TTFT: 0.5, Sent: 0, End: 2, CompletionTokens: 10}}},
			{Name: "s1-y", Task: "y", Passed: &yes, Requests: []record.Request{{TTFT: 1.5, Sent: 0, End: 1, CompletionTokens: 10}}},
		}},
		{Name: "c3-first", Trial: 2, Dir: "c3-first/t2", Sessions: []record.Session{
			{Name: "s0-x", Task: "x", Passed: &yes, Requests: []record.Request{{TTFT: 1.5, Sent: 0, End: 2, CompletionTokens: 30}}},
		}},
	}, PassRates: []record.PassRate{
		{Round: "c3-first", Task: "x", Attempts: 2, Passed: 1, Pass1: rate(0.5), Pass1Stderr: rate(0.5), K: 2, PassK: rate(1)},
		{Round: "c3-first", Task: "y", Attempts: 1, Passed: 1, Pass1: rate(1), K: 2},
		{Round: "c3-first", Tasks: 2, Attempts: 3, Passed: 2, Pass1: rate(0.75), K: 2},
	}}
	b := &record.Work{Trials: 1, Rounds: []*record.Round{
		{Name: "c3-first", Trial: 1, Dir: "c3-first", Sessions: []record.Session{{Name: "s0-x", Task: "x", Passed: nil, Infra: "down"}}},
	}, PassRates: []record.PassRate{{Round: "c3-first", Task: "x", Unscored: 1, K: 1}}}
	var sb strings.Builder
	TaskTableHTML(&sb, []TaskTarget{{Name: "A", Work: a, Page: "A/report.html"}, {Name: "B", Work: b, Page: "B/report.html"}})
	page := sb.String()
	rows := regexp.MustCompile(`<tr><td>c3-first</td>.*?</tr>`).FindAllString(page, -1)
	if len(rows) != 2 || !strings.Contains(page, `<th colspan=6>A</th><th colspan=6>B</th>`) || !strings.Contains(page, "<th>pass@2</th>") {
		t.Fatalf("table:\n%s", page)
	}
	for _, c := range []struct {
		row  int
		want string
	}{
		// x on A: 1/2, 0.50 ± 0.50, pass@2 1.00, mean first TTFT 1.0 s, 40 tokens over 4 s; the failure linked first.
		{0, `<td>x</td><td>1/2</td><td class=rate><svg class=bar [^>]*>.*?</svg> 0.50 ± 0.50</td><td>1.00</td><td>1.000</td><td>10.00</td><td class=links>` +
			`<a class=failed href="A/report.html#s-c3-first-t1-s0-x" [^>]*>✗ c3-first#1 s0-x</a> <a class=passed href="A/report.html#s-c3-first-t2-s0-x" [^>]*>✓ c3-first#2 s0-x</a> </td>`},
		// x on B: not scored, its session linked as such.
		{0, `<td>0/0</td><td class=rate>–</td><td>–</td><td>–</td><td>0.00</td><td class=links><a class=unscored href="B/report.html#s-c3-first-s0-x" [^>]*>· c3-first s0-x</a> </td></tr>$`},
		// y ran on A only.
		{1, `<td>y</td><td>1/1</td><td class=rate><svg class=bar [^>]*>.*?</svg> 1.00</td><td>–</td><td>1.500</td><td>10.00</td>.*</td><td>–</td><td>–</td><td>–</td><td>–</td><td>–</td><td>–</td></tr>$`},
	} {
		if !regexp.MustCompile(c.want).MatchString(rows[c.row]) {
			t.Errorf("row %d has no %s:\n%s", c.row, c.want, rows[c.row])
		}
	}
}
