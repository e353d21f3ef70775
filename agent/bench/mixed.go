package bench

import (
	"context"
	"fmt"
	"jspark/agent/report"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// The mixed screen: at Cn, n−1 incumbent streams (real tasks) are decoding
// when the n-th request, a real task over an L-token log, arrives. The
// cell's pause is the worst incumbent's largest gap between output events
// while the arrival is admitted; its new-request TTFT is the arrival's.

const (
	incumbentTokens = 4096 // incumbents decode to this cap (ignore_eos) or until cut
	steadyEvents    = 4    // incumbents are decoding: each has this many output events
)

func mixedPlanned(c *Config, _ *Prompts) int {
	n := 0
	for _, k := range c.ArriveAt {
		n += len(c.ArriveLengths) * c.Trials * k
	}
	return n
}

func mixedCase(n, k int) string { return fmt.Sprintf("%s arrives / C%d", lengthLabel(n), k) }

func runMixed(ctx context.Context, r *runner) error {
	lines, err := r.sizer(ctx, logPrompts)
	if err != nil {
		return err
	}
	for _, n := range r.cfg.ArriveLengths {
		for _, k := range r.cfg.ArriveAt {
			for t := 1; t <= r.cfg.Trials && ctx.Err() == nil; t++ {
				r.settle(ctx)
				r.mixedCell(ctx, mixedCase(n, k), t, k-1, r.p.Arrival+"\n"+logLines(lines.units(n), uint64(n)))
			}
		}
	}
	return nil
}

// mixedCell runs one repeat of a cell: incumbents first, the arrival once
// they decode, and everything cut once each incumbent has shown what
// happened after the arrival's first output.
func (r *runner) mixedCell(ctx context.Context, c string, trial, incumbents int, arrival string) {
	cctx, cut := context.WithCancel(ctx)
	defer cut()
	var wg sync.WaitGroup
	events := make([]atomic.Int64, incumbents)
	lastEvent := make([]atomic.Int64, incumbents) // unix nanoseconds
	done := make([]chan struct{}, incumbents)
	for i := range incumbents {
		done[i] = make(chan struct{})
		task := r.p.Tasks[(i+trial)%len(r.p.Tasks)]
		body := chat(r.p.System, salted(newSalt(), task.Prompt), incumbentTokens)
		body["ignore_eos"] = true
		wg.Go(func() {
			defer close(done[i])
			r.send(cctx, Record{Case: c, Trial: trial, Role: "incumbent"}, chatPath, body, func(t time.Time) {
				lastEvent[i].Store(t.UnixNano())
				events[i].Add(1)
			})
		})
	}
	// Wait until every incumbent decodes steadily (or has ended).
	steadyBy := time.Now().Add(5 * time.Minute)
	for i := range incumbents {
		for events[i].Load() < steadyEvents && !closed(done[i]) && time.Now().Before(steadyBy) && cctx.Err() == nil {
			time.Sleep(2 * time.Millisecond)
		}
	}
	first := make(chan struct{})
	var once sync.Once
	var firstAt atomic.Int64
	arrived := make(chan struct{})
	salt := newSalt()
	wg.Go(func() {
		defer close(arrived)
		r.send(cctx, Record{Case: c, Trial: trial, Role: "arrival", Salt: salt}, chatPath, chat("", salted(salt, arrival), firstOutputTokens), func(t time.Time) {
			once.Do(func() { firstAt.Store(t.UnixNano()); close(first) })
		})
	})
	select {
	case <-first:
	case <-arrived:
	case <-cctx.Done():
	}
	// Each incumbent's gap is closed by its next event after the arrival's
	// first output; wait for those (bounded), then cut.
	deadline := time.Now().Add(10 * time.Second)
	for i := range incumbents {
		for lastEvent[i].Load() <= firstAt.Load() && !closed(done[i]) && time.Now().Before(deadline) && cctx.Err() == nil {
			time.Sleep(2 * time.Millisecond)
		}
	}
	<-arrived
	cut()
	wg.Wait()
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// pause is an incumbent's largest gap between output events that overlaps
// the arrival's admission (from its send to its first output). A stream
// that showed no event after the admission closes its last gap at its end.
func pause(inc, arr Record) float64 {
	if !arr.OK() {
		return math.NaN()
	}
	from, to := arr.Sent, arr.Sent+arr.TTFT
	ev := inc.Events()
	if len(ev) == 0 {
		return math.NaN()
	}
	if ev[len(ev)-1] < to {
		ev = append(ev, inc.End)
	}
	p := 0.0
	for i := 1; i < len(ev); i++ {
		if ev[i] > from && ev[i-1] < to {
			p = max(p, ev[i]-ev[i-1])
		}
	}
	return p
}

// mixedCell is the cell's pause and new-request TTFT: the worst incumbent
// per repeat, then the median over repeats 2..N (repeat 1 warms the case;
// with one trial it is the only one).
func mixedValues(res *Result, target, c string) (pauseS, ttft float64) {
	recs := res.records(target, "mixed", c)
	byTrial := map[int][]Record{}
	for _, r := range recs {
		byTrial[r.Trial] = append(byTrial[r.Trial], r)
	}
	var pauses, ttfts []float64
	for t := 1; t <= res.Config.Trials; t++ {
		if t == 1 && res.Config.Trials > 1 {
			continue
		}
		var arr *Record
		for i := range byTrial[t] {
			if byTrial[t][i].Role == "arrival" {
				arr = &byTrial[t][i]
			}
		}
		if arr == nil || !arr.OK() {
			continue
		}
		ttfts = append(ttfts, arr.TTFT)
		worst := math.NaN()
		for _, x := range byTrial[t] {
			if x.Role == "incumbent" {
				if p := pause(x, *arr); !math.IsNaN(p) && (math.IsNaN(worst) || p > worst) {
					worst = p
				}
			}
		}
		if !math.IsNaN(worst) {
			pauses = append(pauses, worst)
		}
	}
	return median(pauses), median(ttfts)
}

func mixedTables(res *Result) []report.Table {
	t := report.Table{Screen: "mixed", Title: fmt.Sprintf("Warmed mixed traffic · %s", repeatsLabel(res.Config.Trials)), Columns: []string{"Case"}}
	for _, tg := range res.Targets {
		t.Columns = append(t.Columns, tg.Name+" pause", tg.Name+" new-request TTFT")
	}
	for _, n := range res.Config.ArriveLengths {
		for _, k := range res.Config.ArriveAt {
			row := []string{mixedCase(n, k)}
			for _, tg := range res.Targets {
				p, ttft := mixedValues(res, tg.Name, mixedCase(n, k))
				row = append(row, secs(p), secs(ttft))
			}
			t.Add(row...)
		}
	}
	t.Note = "Pause is each incumbent stream's largest gap between output events while the new request is admitted (its send to its first output), " +
		"summarized by the worst incumbent per cell and then the median across the warmed repeats; repeat 1 stays in results.json. " +
		fmt.Sprintf("At Cn, n−1 incumbents (the speed tasks, salted, ignore_eos, up to %d tokens) are decoding when the n-th request arrives: a salted summary of a service log of the row's length. ", incumbentTokens) +
		"Streams are cut once every incumbent has an output event after the arrival's first." + res.errorsNote("mixed") + " " + res.countersNote("mixed")
	return []report.Table{t}
}

func repeatsLabel(trials int) string {
	switch {
	case trials <= 1:
		return "one repeat"
	case trials == 2:
		return "repeat 2"
	case trials == 3:
		return "medians of repeats 2 and 3"
	default:
		return fmt.Sprintf("medians of repeats 2–%d", trials)
	}
}
