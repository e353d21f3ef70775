package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"jspark/agent/external"
	"jspark/agent/record"
	"jspark/agent/report"
	"jspark/agent/target"
	"jspark/recipes"
	"jspark/sandbox"
)

// WorkOptions are a `jspark work` run.
type WorkOptions struct {
	Recipe   *recipes.Recipe
	Round    string // a round's name or "all"
	Backends []target.Backend
	Window   time.Duration // 0: the recipe's
	Trials   int           // times each round runs, each trial seeded apart (0: once)
	Out      string
	// Resume finishes the run that Out holds: the round trials it
	// finished are kept as they are, the others run (see resume.go).
	Resume   bool
	Sandbox  sandbox.Options
	Progress func(round string, sessions int) Progress // nil: none
	// AgentCache is where external agents are installed ("":
	// external.DefaultCache); Log is told about installations (nil:
	// discarded).
	AgentCache string
	Log        io.Writer
}

// Rounds resolves a round argument into the rounds to run, in order: a
// repeat round brings its first round before it.
func Rounds(r *recipes.Recipe, name string) ([]*recipes.Round, error) {
	var want []*recipes.Round
	if name == "all" {
		for i := range r.Rounds {
			want = append(want, &r.Rounds[i])
		}
	} else if rd := r.Round(name); rd != nil {
		want = append(want, rd)
	} else {
		var names []string
		for _, rd := range r.Rounds {
			names = append(names, rd.Name)
		}
		return nil, fmt.Errorf("recipe %s has no round %q (rounds: %s, or all)", r.Name, name, strings.Join(names, ", "))
	}
	var out []*recipes.Round
	seen := map[string]bool{}
	add := func(rd *recipes.Round) {
		if !seen[rd.Name] {
			seen[rd.Name] = true
			out = append(out, rd)
		}
	}
	for _, rd := range want {
		if rd.RepeatOf != "" {
			add(r.Round(rd.RepeatOf))
		}
		add(rd)
	}
	return out, nil
}

// Work runs the rounds, each --trials times (trials outer: a repeat round
// follows its first round of the same trial), and writes results.json and
// report.html under Out after every round's trial, so an interrupted run
// has the record of what finished; with Resume it finishes a run that Out
// holds (see resume.go).
func Work(ctx context.Context, o WorkOptions) (*record.Work, error) {
	rounds, err := Rounds(o.Recipe, o.Round)
	if err != nil {
		return nil, err
	}
	if o.Window == 0 {
		o.Window = o.Recipe.Window.D()
	}
	o.Trials = max(o.Trials, 1)
	if err := startRun(o); err != nil {
		return nil, err
	}
	// External agents are installed before the first round: npm's time is
	// not any window's.
	agents, err := installAgents(ctx, o, rounds)
	if err != nil {
		return nil, err
	}
	res := &record.Work{Version: record.Version, Recipe: o.Recipe.File, Window: o.Window.Seconds(), Trials: o.Trials}
	for _, b := range o.Backends {
		res.Backends = append(res.Backends, b.URL)
	}
	w := &work{o: o, rounds: rounds, agents: agents}
	for trial := 1; trial <= o.Trials; trial++ {
		payloads := map[string][][]byte{} // this trial's rounds' first requests
		for _, rd := range rounds {
			rec, sent, err := w.trial(ctx, rd, trial)
			if err == nil && ctx.Err() != nil {
				err = fmt.Errorf("interrupted in round %s, trial %d of %d: %w (`--out %s --resume` finishes the run)", rd.Name, trial, o.Trials, ctx.Err(), o.Out)
			}
			if err != nil {
				return nil, errors.Join(err, save(o.Out, res))
			}
			res.Rounds = append(res.Rounds, rec)
			if first, ok := payloads[rd.RepeatOf]; ok {
				repeatPairs(&res.RepeatPairs, sent, first)
			}
			payloads[rd.Name] = sent
			if err := save(o.Out, res); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// save writes results.json, with the pass rates of the rounds so far, and
// report.html.
func save(out string, res *record.Work) error {
	res.PassRates = record.Rates(res)
	return report.Save(out, res, report.WorkHTML(res, out))
}

// repeatPairs counts a repeat round's sessions, and those that sent exactly
// their first-round twin's first request.
func repeatPairs(p *record.RepeatPairs, repeat, first [][]byte) {
	for i, b := range repeat {
		p.Total++
		if i < len(first) && b != nil && bytes.Equal(b, first[i]) {
			p.Identical++
		}
	}
}

// installAgents installs each external agent the rounds name, once.
func installAgents(ctx context.Context, o WorkOptions, rounds []*recipes.Round) (map[recipes.Agent]*external.Installation, error) {
	out := map[recipes.Agent]*external.Installation{}
	log := o.Log
	if log == nil {
		log = io.Discard
	}
	cache := o.AgentCache
	if cache == "" {
		cache = external.DefaultCache()
	}
	for _, rd := range rounds {
		a := o.Recipe.AgentOf(rd)
		if !a.External() || out[a] != nil {
			continue
		}
		for _, b := range o.Backends {
			if b.Handler == nil {
				return nil, fmt.Errorf("round %s: agent %s: %w", rd.Name, a.Kind, external.ErrNoEngine)
			}
		}
		in, err := external.Install(ctx, a, cache, log)
		if err != nil {
			return nil, fmt.Errorf("round %s: %w", rd.Name, err)
		}
		out[a] = in
	}
	return out, nil
}
