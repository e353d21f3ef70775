package bench

import (
	"context"
	"fmt"
	"jspark/agent/report"
	"math"
	"strings"
	"sync"
)

// The concurrency screen: at Cn, n streams start together (the speed tasks
// in turn, salted); aggregate tok/s = every completion token / the shared
// window (first send → last end).

func concurrencyPlanned(c *Config, _ *Prompts) int {
	n := 0
	for _, k := range c.Concurrency {
		n += k
	}
	return n
}

func concurrencyCase(n int) string { return fmt.Sprintf("C%d", n) }

func runConcurrency(ctx context.Context, r *runner) error {
	for _, n := range r.cfg.Concurrency {
		if ctx.Err() != nil {
			break
		}
		r.settle(ctx)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			t := r.p.Tasks[i%len(r.p.Tasks)]
			salt := newSalt()
			body := r.taskBody(t, salt)
			wg.Go(func() {
				<-start
				r.send(ctx, Record{Case: concurrencyCase(n), Trial: 1, Role: t.ID, Salt: salt}, chatPath, body, nil)
			})
		}
		close(start)
		wg.Wait()
	}
	return nil
}

// aggregate is a level's completion tokens over its shared window, and its
// streams' TTFTs.
func aggregate(recs []Record) (tokS float64, ttft []float64) {
	if len(recs) == 0 {
		return math.NaN(), nil
	}
	first, last, tokens := math.Inf(1), math.Inf(-1), 0
	for _, r := range recs {
		first, last = math.Min(first, r.Sent), math.Max(last, r.End)
		tokens += r.CompletionTokens
		if r.OK() {
			ttft = append(ttft, r.TTFT)
		}
	}
	return float64(tokens) / (last - first), ttft
}

func concurrencyTables(res *Result) []report.Table {
	levels := res.Config.Concurrency
	title := "Concurrency"
	if len(levels) > 0 {
		title = fmt.Sprintf("Concurrency · C%d–C%d", levels[0], levels[len(levels)-1])
	}
	t := report.Table{Screen: "concurrency", Title: title, Columns: []string{"Offered streams"}}
	for _, tg := range res.Targets {
		t.Columns = append(t.Columns, tg.Name+" aggregate tok/s", tg.Name+" mean TTFT")
	}
	var spreads []string
	for _, n := range levels {
		row := []string{concurrencyCase(n)}
		for _, tg := range res.Targets {
			a, tt := aggregate(res.records(tg.Name, "concurrency", concurrencyCase(n)))
			row = append(row, rate(a), secs(mean(tt)))
		}
		t.Add(row...)
	}
	for _, tg := range res.Targets {
		var all []float64
		failed := 0
		for _, r := range res.records(tg.Name, "concurrency") {
			if r.OK() {
				all = append(all, r.TTFT)
			} else {
				failed++
			}
		}
		spreads = append(spreads, fmt.Sprintf("%s TTFT p50/p90/p99/max %s over %d streams (%d failed)", tg.Name, spread(all), len(all), failed))
	}
	t.Note = "Aggregate completion tokens / the shared HTTP window (first send to last end) of the level's streams, which start together: the speed tasks in turn, salted, greedy, " +
		fmt.Sprintf("up to %d tokens each. ", res.Config.MaxTokens) + strings.Join(spreads, "; ") + "." + res.errorsNote("concurrency") + " " + res.countersNote("concurrency")
	return []report.Table{t}
}
