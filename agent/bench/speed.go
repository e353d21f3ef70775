package bench

import (
	"context"
	"fmt"
	"jspark/agent/report"
	"sort"
	"strings"
)

// The speed screen: each of the seven tasks once, streamed, salted, greedy.
// Whole-request tok/s = completion tokens / full HTTP duration (TTFT
// included); the after-first-output estimate = (tokens − 1) / (duration −
// TTFT).

func speedPlanned(_ *Config, p *Prompts) int { return len(p.Tasks) }

func (r *runner) taskBody(t Task, salt string) map[string]any {
	b := chat(r.p.System, salted(salt, t.Prompt), r.cfg.MaxTokens)
	if r.cfg.IgnoreEOS {
		b["ignore_eos"] = true
	}
	return b
}

func runSpeed(ctx context.Context, r *runner) error {
	for _, t := range r.p.Tasks {
		if ctx.Err() != nil {
			break
		}
		r.settle(ctx)
		salt := newSalt()
		r.send(ctx, Record{Case: t.ID, Trial: 1, Role: t.Kind, Salt: salt}, chatPath, r.taskBody(t, salt), nil)
	}
	return nil
}

// wholeRate is completion tokens / full HTTP duration.
func wholeRate(r Record) float64 { return float64(r.CompletionTokens) / r.Duration() }

// afterFirstRate is (tokens − 1) / (HTTP duration − TTFT).
func afterFirstRate(r Record) float64 {
	return float64(r.CompletionTokens-1) / (r.Duration() - r.TTFT)
}

func speedTables(res *Result) []report.Table {
	var out []report.Table
	sum := report.Table{Screen: "speed", Title: "Measured single-stream output rates by target",
		Columns: []string{"Target", "Prose tok/s", "Code tok/s", "Inter-event gap p50 / p90 / p99 / max", "Finish"}}
	for _, tg := range res.Targets {
		t := report.Table{Screen: "speed", Title: tg.Name + " streamed full-answer speed",
			Columns: []string{"Task", "Output tokens", "TTFT", "Whole-request tok/s", "After-first-output tok/s estimate"}}
		var prose, code, gaps []float64
		finishes := map[string]int{}
		for _, r := range res.records(tg.Name, "speed") {
			if !r.OK() {
				t.Add(r.Case, "error", "–", "–", "–")
				finishes["error"]++
				continue
			}
			t.Add(r.Case, count(r.CompletionTokens), secs(r.TTFT), rate(wholeRate(r)), rate(afterFirstRate(r)))
			if r.Role == "prose" {
				prose = append(prose, wholeRate(r))
			} else {
				code = append(code, wholeRate(r))
			}
			gaps = append(gaps, r.Gaps...)
			finishes[r.Finish]++
		}
		t.Note = "One streamed response per task, salted, greedy; after-first-output estimate uses (tokens − 1)/(HTTP time − TTFT), transport and finalization included. " +
			"A chunk may hold several tokens (speculation); this is not GPU-only decode timing." + res.errorsNote("speed")
		out = append(out, t)
		sum.Add(tg.Name, span(prose), span(code), spread(gaps), finishNote(finishes))
	}
	sum.Note = "Completion tokens / full HTTP duration, TTFT included; ranges span the three prose or four code tasks. Output lengths vary: these are not matched pure-decode rates. " +
		"Inter-event gaps pool every streamed gap of the seven responses. " + res.countersNote("speed")
	return append(out, sum)
}

// finishNote is "stop 5, length 2".
func finishNote(m map[string]int) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var parts []string
	for _, k := range ks {
		name := k
		if name == "" {
			name = "none"
		}
		parts = append(parts, fmt.Sprintf("%s %d", name, m[k]))
	}
	return strings.Join(parts, ", ")
}
