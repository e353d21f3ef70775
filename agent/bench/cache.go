package bench

import (
	"context"
	"fmt"
	"jspark/agent/report"
	"strings"
)

// The cache screen: per length, a first-use request, then salted trials of
// an uncached prompt, its exact repeat and a changed suffix (the same
// prompt with its last words replaced), each timed to its first output.

const (
	firstOutputTokens = 4  // cache and arrival requests stop soon after their first output
	suffixWords       = 32 // the changed suffix, at most a quarter of the text
)

func cachePlanned(c *Config, _ *Prompts) int { return len(c.Lengths) * (1 + 3*c.Trials) }

func cacheCase(n int, what string) string { return lengthLabel(n) + " " + what }

func cachePrompt(text string) string {
	return text + "\n\nIn one sentence, what is the text above about?"
}

func runCache(ctx context.Context, r *runner) error {
	w, err := r.sizer(ctx, wordPrompts)
	if err != nil {
		return err
	}
	for _, n := range r.cfg.Lengths {
		body := words(w.units(n), uint64(n))
		f := strings.Fields(body)
		k := min(suffixWords, len(f)/4)
		changed := strings.Join(f[:len(f)-k], " ") + " " + words(k, uint64(n)+1)
		send := func(c string, trial int, salt, text string) {
			r.settle(ctx)
			r.send(ctx, Record{Case: cacheCase(n, c), Trial: trial, Salt: salt}, chatPath, chat("", salted(salt, cachePrompt(text)), firstOutputTokens), nil)
		}
		send("first-use", 0, newSalt(), body)
		for t := 1; t <= r.cfg.Trials && ctx.Err() == nil; t++ {
			salt := newSalt()
			send("uncached", t, salt, body)
			send("exact repeat", t, salt, body)
			send("changed suffix", t, salt, changed)
		}
	}
	return nil
}

// ttfts are the TTFTs of the records that produced output.
func ttfts(recs []Record) []float64 {
	var out []float64
	for _, r := range recs {
		if r.OK() {
			out = append(out, r.TTFT)
		}
	}
	return out
}

// trialTTFT is a cell: the median TTFT of a case's trials (trial ≥ 1).
func trialTTFT(res *Result, target, screen, c string) float64 {
	var recs []Record
	for _, r := range res.records(target, screen, c) {
		if r.Trial >= 1 {
			recs = append(recs, r)
		}
	}
	return median(ttfts(recs))
}

func cacheTables(res *Result) []report.Table {
	t := report.Table{Screen: "cache", Title: "Solo/cache screen · seconds to first output", Columns: []string{"Measurement"}}
	for _, tg := range res.Targets {
		t.Columns = append(t.Columns, tg.Name)
	}
	var trials []string
	for _, n := range res.Config.Lengths {
		for _, c := range []string{"first-use", "uncached", "exact repeat", "changed suffix"} {
			row := []string{cacheCase(n, c)}
			for _, tg := range res.Targets {
				if c == "first-use" {
					row = append(row, secs(median(ttfts(res.records(tg.Name, "cache", cacheCase(n, c))))))
				} else {
					row = append(row, secs(trialTTFT(res, tg.Name, "cache", cacheCase(n, c))))
				}
			}
			t.Add(row...)
		}
		row := []string{cacheCase(n, "reused tokens, repeat / suffix")}
		for _, tg := range res.Targets {
			row = append(row, reused(res.records(tg.Name, "cache", cacheCase(n, "exact repeat"))...)+" / "+reused(res.records(tg.Name, "cache", cacheCase(n, "changed suffix"))...))
		}
		t.Add(row...)
	}
	if len(res.Config.Lengths) > 0 {
		n := res.Config.Lengths[len(res.Config.Lengths)-1]
		for _, tg := range res.Targets {
			var ts []string
			for _, r := range res.records(tg.Name, "cache", cacheCase(n, "uncached")) {
				ts = append(ts, strings.TrimSuffix(secs(r.TTFT), " s"))
			}
			trials = append(trials, fmt.Sprintf("%s %s", tg.Name, strings.Join(ts, ", ")))
		}
	}
	t.Note = fmt.Sprintf("Uncached, exact repeat and changed suffix are medians of %d salted trials with warmed kernels (a random salt opens each trial's prompt; "+
		"the repeat resends it, the changed suffix replaces its last %d words, at most a quarter); first-use is each length's first request, salted, separate from the trials. "+
		"Reused tokens are the median usage cached_tokens of prompt tokens. %s uncached trials: %s s.%s %s",
		res.Config.Trials, suffixWords, lengthLabel(last(res.Config.Lengths)), strings.Join(trials, "; "), res.errorsNote("cache"), res.countersNote("cache"))
	return []report.Table{t}
}

// reused is "cached of prompt" tokens, medians over the records.
func reused(recs ...Record) string {
	var cached, prompt []float64
	for _, r := range recs {
		if r.OK() {
			cached = append(cached, float64(r.CachedTokens))
			prompt = append(prompt, float64(r.PromptTokens))
		}
	}
	if len(cached) == 0 {
		return "–"
	}
	return count(int(median(cached))) + " of " + count(int(median(prompt)))
}

func last(xs []int) int {
	if len(xs) == 0 {
		return 0
	}
	return xs[len(xs)-1]
}
