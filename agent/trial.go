package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"jspark/agent/external"
	"jspark/agent/metrics"
	"jspark/agent/record"
	"jspark/recipes"
)

// work is a Work run as it goes: its options and installed agents.
type work struct {
	o      WorkOptions
	rounds []*recipes.Round // the rounds it runs, in order
	agents map[recipes.Agent]*external.Installation
}

// dir is the folder of a round's trial: Out/ROUND, or Out/ROUND/tK when
// the run has several trials.
func (w *work) dir(rd *recipes.Round, trial int) string {
	if w.o.Trials > 1 {
		return filepath.Join(w.o.Out, rd.Name, fmt.Sprintf("t%d", trial))
	}
	return filepath.Join(w.o.Out, rd.Name)
}

// seed is trial k's sampling seed: the recipe's plus k−1 (trial 1 sends
// what a run without trials sends), or k where the recipe has none and
// there are several trials. A repeat round's trial has its first round's
// seed, so its first requests stay byte-identical.
func (w *work) seed(trial int) *int {
	base := w.o.Recipe.Sampling.Seed
	switch {
	case base != nil:
		s := *base + trial - 1
		return &s
	case w.o.Trials > 1:
		return &trial
	}
	return nil
}

// trial runs one trial of a round, or takes its record from the run being
// resumed when it finished there. A trial with an infrastructure failure
// runs once more, the first attempt's folder set aside; one that still
// fails is recorded, unscored where it failed, and left unfinished for a
// resume. sent are its sessions' first requests.
func (w *work) trial(ctx context.Context, rd *recipes.Round, trial int) (rec *record.Round, sent [][]byte, err error) {
	dir := w.dir(rd, trial)
	if w.o.Resume {
		if rec, sent, ok := finished(dir, rd.Name, trial); ok && !w.repeatUnfinished(rd, trial) {
			return rec, sent, nil
		}
		// What an unfinished trial left is not a record: it runs again.
		if err := os.RemoveAll(dir); err != nil {
			return nil, nil, err
		}
	}
	r, err := w.attempt(ctx, rd, trial, dir)
	if err != nil || ctx.Err() != nil {
		return nil, nil, err
	}
	if why := infra(r.res); why != "" {
		aside := dir + ".failed-1"
		if err := os.RemoveAll(aside); err != nil {
			return nil, nil, err
		}
		if err := os.Rename(dir, aside); err != nil {
			return nil, nil, err
		}
		if r, err = w.attempt(ctx, rd, trial, dir); err != nil || ctx.Err() != nil {
			return nil, nil, err
		}
		r.res.Retried = why
	}
	if infra(r.res) == "" {
		if err := markFinished(dir, r.res); err != nil {
			return nil, nil, err
		}
	}
	return r.res, r.payloads, nil
}

// repeatUnfinished says whether a round of this run repeats rd and has not
// finished its trial: rd's trial then runs again with it, though it
// finished, since a repeat round measures the cache its first round has
// just filled, in this engine, which a resumed run's engine has not.
func (w *work) repeatUnfinished(rd *recipes.Round, trial int) bool {
	for _, rr := range w.rounds {
		if rr.RepeatOf != rd.Name {
			continue
		}
		if _, _, ok := finished(w.dir(rr, trial), rr.Name, trial); !ok {
			return true
		}
	}
	return false
}

// attempt runs a round's trial into dir, once the backends have settled.
func (w *work) attempt(ctx context.Context, rd *recipes.Round, trial int, dir string) (*round, error) {
	o := w.o
	metrics.Settle(ctx, counters(o.Backends)...)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ro := RoundOptions{Recipe: o.Recipe, Round: rd, Backends: o.Backends, Window: o.Window, Out: dir, Sandbox: o.Sandbox,
		Agent: w.agents[o.Recipe.AgentOf(rd)], Trial: trial, Seed: w.seed(trial)}
	if o.Progress != nil {
		name := rd.Name
		if o.Trials > 1 {
			name = fmt.Sprintf("%s#%d", rd.Name, trial)
		}
		ro.Progress = o.Progress(name, len(o.Recipe.Plan(rd)))
	}
	r, err := runRound(ctx, ro)
	if err != nil {
		return nil, fmt.Errorf("round %s: %w", rd.Name, err)
	}
	r.res.Dir, _ = filepath.Rel(o.Out, dir)
	r.res.Dir = filepath.ToSlash(r.res.Dir)
	return r, nil
}

// infra is the first infrastructure failure of a round's sessions ("":
// none), named by its session.
func infra(r *record.Round) string {
	for _, s := range r.Sessions {
		if s.Infra != "" {
			return s.Name + ": " + s.Infra
		}
	}
	return ""
}
