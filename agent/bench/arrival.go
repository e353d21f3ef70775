package bench

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"jspark/agent/report"
	"jspark/tools"
)

// The arrival screen (the seed's "long tool reuse and reverse arrival"):
// the long prompt's cold TTFT alone; a short prompt sent a moment into
// the long one's prefill, its TTFT as a fraction of the long cold TTFT;
// and a stable-tool continuation, its reused tokens against the committed
// prefix the first turn left.

const toolTurnTokens = 96 // the stable-tool first turn's cap

// stableTools are the runner's own tools whose schemas the stable-tool turn
// sends (two: the schemas' tokens come on top of the long prompt's).
var stableTools = []string{"bash", "write"}

func arrivalPlanned(c *Config, _ *Prompts) int { return 3*c.Trials + 2 }

func arrivalCase(what string, n int) string { return lengthLabel(n) + " " + what }

func runArrival(ctx context.Context, r *runner) error {
	w, err := r.sizer(ctx, wordPrompts)
	if err != nil {
		return err
	}
	long := words(w.units(r.cfg.Long), uint64(r.cfg.Long))
	short := words(w.units(r.cfg.Short), 7)
	for t := 1; t <= r.cfg.Trials && ctx.Err() == nil; t++ {
		r.settle(ctx)
		salt := newSalt()
		r.send(ctx, Record{Case: arrivalCase("cold", r.cfg.Long), Trial: t, Role: "long", Salt: salt}, chatPath, chat("", salted(salt, cachePrompt(long)), firstOutputTokens), nil)
	}
	delay := r.cfg.Delay
	if delay == 0 {
		cold := trialTTFT(r.res, r.name, "arrival", arrivalCase("cold", r.cfg.Long))
		delay = time.Duration(cold / 20 * float64(time.Second))
	}
	for t := 1; t <= r.cfg.Trials && ctx.Err() == nil; t++ {
		r.settle(ctx)
		c := arrivalCase("arrival", r.cfg.Long)
		ls, ss := newSalt(), newSalt()
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.send(ctx, Record{Case: c, Trial: t, Role: "long", Salt: ls}, chatPath, chat("", salted(ls, cachePrompt(long)), firstOutputTokens), nil)
		}()
		select {
		case <-time.After(delay):
		case <-ctx.Done():
		}
		r.send(ctx, Record{Case: c, Trial: t, Role: "short", Salt: ss}, chatPath, chat("", salted(ss, cachePrompt(short)), firstOutputTokens), nil)
		<-done
	}
	r.settle(ctx)
	return r.stableTool(ctx, long)
}

// stableTool sends a long prompt with the bench's tool schemas (the
// runner's own, byte-stable), forces a call, answers it, and times the
// continuation.
func (r *runner) stableTool(ctx context.Context, long string) error {
	ts, err := tools.Select(stableTools)
	if err != nil {
		return err
	}
	var schemas []map[string]any
	for _, t := range ts {
		schemas = append(schemas, map[string]any{"type": "function", "function": map[string]any{"name": t.Name, "description": t.Description, "parameters": t.Parameters}})
	}
	salt := newSalt()
	c := arrivalCase("stable-tool", r.cfg.Long)
	msgs := []map[string]any{
		{"role": "system", "content": r.p.System},
		{"role": "user", "content": salted(salt, long+"\n\nSave the text above to notes.txt with a tool, then say what it is about.")},
	}
	body := map[string]any{"messages": msgs, "tools": schemas, "tool_choice": "required", "max_tokens": toolTurnTokens, "temperature": 0}
	first := r.send(ctx, Record{Case: c, Trial: 1, Role: "first", Salt: salt}, chatPath, body, nil)
	if first.Error != "" {
		return nil // recorded; the table says so
	}
	asst := map[string]any{"role": "assistant", "content": first.Text}
	var results []map[string]any
	var calls []map[string]any
	for i, tc := range first.Calls {
		id := tc.ID
		if id == "" {
			id = fmt.Sprintf("call_%d", i)
		}
		calls = append(calls, map[string]any{"id": id, "type": "function", "function": map[string]any{"name": tc.Name, "arguments": tc.Arguments}})
		results = append(results, map[string]any{"role": "tool", "tool_call_id": id, "content": "ok: 1 file written"})
	}
	if len(calls) > 0 {
		asst["tool_calls"] = calls
	}
	msgs = append(msgs, asst)
	msgs = append(msgs, results...)
	if len(calls) == 0 {
		msgs = append(msgs, map[string]any{"role": "user", "content": "Go on."})
	}
	body = map[string]any{"messages": msgs, "tools": schemas, "max_tokens": firstOutputTokens, "temperature": 0}
	r.send(ctx, Record{Case: c, Trial: 1, Role: "continuation", Salt: salt}, chatPath, body, nil)
	return nil
}

func roleRecords(recs []Record, role string) []Record {
	var out []Record
	for _, r := range recs {
		if r.Role == role {
			out = append(out, r)
		}
	}
	return out
}

// arrivalValues are a target's cells: the long cold TTFT (median of the
// trials), the short request's and the long one's TTFT in the arrival
// trials (medians), and the delay the short one was sent after.
func arrivalValues(res *Result, target string) (cold, short, long, delay float64) {
	n := res.Config.Long
	cold = trialTTFT(res, target, "arrival", arrivalCase("cold", n))
	arr := res.records(target, "arrival", arrivalCase("arrival", n))
	longs, shorts := roleRecords(arr, "long"), roleRecords(arr, "short")
	var ds []float64
	for i := range min(len(longs), len(shorts)) {
		ds = append(ds, shorts[i].Sent-longs[i].Sent)
	}
	return cold, median(ttfts(shorts)), median(ttfts(longs)), median(ds)
}

func arrivalTables(res *Result) []report.Table {
	n := res.Config.Long
	L := lengthLabel(n)
	t := report.Table{Screen: "arrival", Title: "Long tool reuse and reverse arrival", Columns: []string{"Check"}}
	for _, tg := range res.Targets {
		t.Columns = append(t.Columns, tg.Name)
	}
	rows := [][]string{
		{"Stable-tool " + L + " continuation"},
		{L + " cold TTFT, alone"},
		{"Short prompt arrives during the " + L + " prefill"},
		{"Short TTFT / " + L + " cold TTFT"},
		{L + " TTFT with the arrival"},
	}
	var ratios []string
	for _, tg := range res.Targets {
		st := res.records(tg.Name, "arrival", arrivalCase("stable-tool", n))
		cell := "–"
		if f, c := roleRecords(st, "first"), roleRecords(st, "continuation"); len(f) == 1 && len(c) == 1 && c[0].OK() && f[0].Error == "" {
			bound := f[0].PromptTokens + f[0].CompletionTokens
			cell = fmt.Sprintf("%s; %s reused tokens of %s committed", secs(c[0].TTFT), count(c[0].CachedTokens), count(bound))
			if len(f[0].Calls) == 0 {
				cell += " (no tool call)"
			}
		} else if len(c) == 1 && c[0].Error != "" || len(f) == 1 && f[0].Error != "" {
			cell = "error"
		}
		cold, short, long, delay := arrivalValues(res, tg.Name)
		ratio := short / cold
		rows[0] = append(rows[0], cell)
		rows[1] = append(rows[1], secs(cold))
		rows[2] = append(rows[2], fmt.Sprintf("%s short-request TTFT, sent %s in", secs(short), secs(delay)))
		rows[3] = append(rows[3], fixed2(ratio))
		rows[4] = append(rows[4], secs(long))
		var sp []float64
		for _, r := range roleRecords(res.records(tg.Name, "arrival", arrivalCase("arrival", n)), "short") {
			sp = append(sp, float64(r.PromptTokens))
		}
		ratios = append(ratios, fmt.Sprintf("%s %s (short prompt %s tokens)", tg.Name, fixed2(ratio), count(int(median(sp)))))
	}
	for _, r := range rows {
		t.Add(r...)
	}
	delay := "a twentieth of the long cold TTFT (the seed's 2 s into 42.78 s)"
	if res.Config.Delay > 0 {
		delay = res.Config.Delay.String()
	}
	t.Note = fmt.Sprintf("The long prompt is sized to %s tokens, the short one to %s (its question alone may be longer); TTFTs are medians of %d salted trials, the short request sent %s after the long one. "+
		"The seed's short/long cold was 40.458/42.780 s = 0.95; here: %s. The stable-tool turn adds the runner's bash and write schemas (byte-stable) to the long prompt, "+
		"forces a call (tool_choice required) and answers it; committed = the first turn's prompt + completion tokens, the most a cache can reuse.%s %s",
		count(n), count(res.Config.Short), res.Config.Trials, delay, strings.Join(ratios, ", "), res.errorsNote("arrival"), res.countersNote("arrival"))
	return []report.Table{t}
}

func fixed2(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
}
