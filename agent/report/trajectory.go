package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"jspark/agent/record"
)

// The trajectories in report.html: each session a collapsible block
// (<details>: no script needed to open one) with its verdict, its check's
// output and, turn by turn, the request's timings and tokens, the reply,
// the tool calls and what they returned, as its trajectory.jsonl recorded
// them. Texts are clipped harder than the records clip them (htmlClip),
// so a run of long sessions stays a page a browser opens.

// htmlClip is how many bytes of one text the page shows.
const htmlClip = 2 << 10

// step is one trajectory line, jspark's own loop's or an external agent's.
type step struct {
	Request *record.Request `json:"request"`
	Reply   *struct {
		Content   string            `json:"content"`
		Reasoning string            `json:"reasoning_content"`
		ToolCalls []record.WireCall `json:"tool_calls"`
	} `json:"reply"`
	Results []struct {
		Content string `json:"content"`
		CallID  string `json:"tool_call_id"`
	} `json:"tool_results"`
	History []struct {
		Role string `json:"role"`
		Text string `json:"text"`
	} `json:"history_added"`
}

// maxTrajectoryLine bounds one line read back (records clip each text to
// 16 KiB; a reply with many calls is longer).
const maxTrajectoryLine = 8 << 20

// readSteps reads a session's trajectory.jsonl; a line it cannot read ends
// the list with a note.
func readSteps(path string) ([]step, string) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err.Error()
	}
	defer f.Close()
	var out []step
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxTrajectoryLine)
	for sc.Scan() {
		var st step
		if err := json.Unmarshal(sc.Bytes(), &st); err != nil || st.Request == nil {
			return out, fmt.Sprintf("line %d unreadable", len(out)+1)
		}
		out = append(out, st)
	}
	if err := sc.Err(); err != nil {
		return out, err.Error()
	}
	return out, ""
}

// TrajectoriesHTML writes every session of res (its folder out) as a
// collapsible trajectory, grouped by round trial.
func TrajectoriesHTML(b *strings.Builder, res *record.Work, out string) {
	b.WriteString("<h2 id=sessions>Sessions</h2>")
	for _, r := range res.Rounds {
		fmt.Fprintf(b, "<h3>%s</h3>", html.EscapeString(res.Label(r)))
		for i := range r.Sessions {
			s := &r.Sessions[i]
			steps, note := readSteps(filepath.Join(out, filepath.FromSlash(r.Dir), s.Name, "trajectory.jsonl"))
			sessionHTML(b, res, r, s, steps, note)
		}
	}
}

// sessionHTML is one session's block.
func sessionHTML(b *strings.Builder, res *record.Work, r *record.Round, s *record.Session, steps []step, note string) {
	v := verdict(s)
	fmt.Fprintf(b, `<details class="session %s" id="%s"><summary><b>%s %s</b>: %s`, v, SessionAnchor(r, s),
		html.EscapeString(res.Label(r)), html.EscapeString(s.Name), strings.ToUpper(v))
	if c := s.Check; c != nil && c.ExitCode != nil {
		fmt.Fprintf(b, " (check exit %d)", *c.ExitCode)
	}
	fmt.Fprintf(b, ", task %s, ended %s, %d request%s, %d tool call%s, wall %.1f s", html.EscapeString(s.Task), html.EscapeString(string(s.End)),
		len(s.Requests), plural(len(s.Requests)), s.ToolCalls, plural(s.ToolCalls), s.Time.WallSec)
	if w := s.Time.WorkingSec; w != nil {
		fmt.Fprintf(b, ", working %.1f s", *w)
	}
	b.WriteString("</summary>")
	if s.Infra != "" {
		fmt.Fprintf(b, "<p class=infra>Not scored: infrastructure failure: %s</p>", html.EscapeString(s.Infra))
	}
	if c := s.Check; c != nil {
		fmt.Fprintf(b, "<details class=check><summary>check: %s after %.2f s, %d hidden test file%s copied in</summary><pre>%s</pre></details>",
			map[bool]string{true: "passed", false: "failed"}[c.Passed], c.Seconds, c.HiddenTests, plural(c.HiddenTests), clipHTML(c.Output))
	}
	if s.AgentOutput != "" {
		fmt.Fprintf(b, "<details><summary>%s printed</summary><pre>%s</pre></details>", html.EscapeString(s.Agent), clipHTML(s.AgentOutput))
	}
	b.WriteString("<ol class=steps>")
	for _, st := range steps {
		stepHTML(b, &st)
	}
	b.WriteString("</ol>")
	if note != "" {
		fmt.Fprintf(b, "<p class=note>trajectory.jsonl: %s</p>", html.EscapeString(note))
	}
	b.WriteString("</details>")
}

// stepHTML is one request of a session: its line (timings, tokens, what
// it called) and, opened, the reply, the calls and their results.
func stepHTML(b *strings.Builder, st *step) {
	q := st.Request
	ttft := "no first output"
	if q.TTFT >= 0 {
		ttft = fmt.Sprintf("TTFT %.2f s", q.TTFT)
	}
	fmt.Fprintf(b, "<li><details><summary>turn %d: sent %.1f s, %s, took %.2f s, %d prompt (%d cached) + %d output tokens", q.Turn, q.Sent, ttft, q.End-q.Sent,
		q.PromptTokens, q.CachedTokens, q.OutputTokens())
	if q.ToolsSec > 0 {
		fmt.Fprintf(b, ", tools %.2f s", q.ToolsSec)
	}
	for _, c := range q.Calls {
		fmt.Fprintf(b, " · <code>%s</code>", html.EscapeString(c.Name))
		if c.ExitCode != nil {
			fmt.Fprintf(b, " exit %d", *c.ExitCode)
		}
		if c.Failed {
			b.WriteString(" (failed)")
		}
	}
	switch {
	case q.Cut:
		b.WriteString(" · <i>cut</i>")
	case q.Error != "":
		fmt.Fprintf(b, " · <i>error: %s</i>", html.EscapeString(clip(q.Error, 200)))
	}
	b.WriteString("</summary>")
	for _, h := range st.History {
		fmt.Fprintf(b, "<div class=msg><b>%s</b><pre>%s</pre></div>", html.EscapeString(h.Role), clipHTML(h.Text))
	}
	if r := st.Reply; r != nil {
		if r.Reasoning != "" {
			fmt.Fprintf(b, "<div class=msg><b>reasoning</b><pre>%s</pre></div>", clipHTML(r.Reasoning))
		}
		if r.Content != "" {
			fmt.Fprintf(b, "<div class=msg><b>reply</b><pre>%s</pre></div>", clipHTML(r.Content))
		}
		for _, c := range r.ToolCalls {
			fmt.Fprintf(b, "<div class=call><b>%s</b><pre>%s</pre>", html.EscapeString(c.Function.Name), clipHTML(c.Function.Arguments))
			for _, res := range st.Results {
				if res.CallID == c.ID {
					fmt.Fprintf(b, "<b>result</b><pre>%s</pre>", clipHTML(res.Content))
				}
			}
			b.WriteString("</div>")
		}
	}
	b.WriteString("</details></li>")
}

// clipHTML is s clipped for the page, escaped.
func clipHTML(s string) string { return html.EscapeString(clip(s, htmlClip)) }

// clip keeps s's head and tail within n bytes, whole runes, and says how
// much it left out.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	h, t := n*3/4, len(s)-n/4
	for h > 0 && !utf8.RuneStart(s[h]) {
		h--
	}
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	return fmt.Sprintf("%s\n[… %d bytes not shown …]\n%s", s[:h], t-h, s[t:])
}
