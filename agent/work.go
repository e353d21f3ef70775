package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"jspark/agent/external"
	"jspark/agent/metrics"
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
	Out      string
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

// Work runs the rounds and writes results.json and report.html under Out.
func Work(ctx context.Context, o WorkOptions) (*record.Work, error) {
	rounds, err := Rounds(o.Recipe, o.Round)
	if err != nil {
		return nil, err
	}
	window := o.Window
	if window == 0 {
		window = o.Recipe.Window.D()
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	// External agents are installed before the first round: npm's time is
	// not any window's.
	agents, err := installAgents(ctx, o, rounds)
	if err != nil {
		return nil, err
	}
	res := &record.Work{Version: record.Version, Recipe: o.Recipe.File, Window: window.Seconds()}
	for _, b := range o.Backends {
		res.Backends = append(res.Backends, b.URL)
	}
	ran := map[string]*round{}
	for _, rd := range rounds {
		metrics.Settle(ctx, counters(o.Backends)...)
		ro := RoundOptions{Recipe: o.Recipe, Round: rd, Backends: o.Backends, Window: window, Out: filepath.Join(o.Out, rd.Name), Sandbox: o.Sandbox,
			Agent: agents[o.Recipe.AgentOf(rd)]}
		if o.Progress != nil {
			ro.Progress = o.Progress(rd.Name, len(o.Recipe.Plan(rd)))
		}
		r, err := runRound(ctx, ro)
		if err != nil {
			return nil, fmt.Errorf("round %s: %w", rd.Name, err)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		ran[rd.Name] = r
		res.Rounds = append(res.Rounds, r.res)
		if first := ran[rd.RepeatOf]; first != nil {
			repeatPairs(&res.RepeatPairs, r.payloads, first.payloads)
		}
	}
	if err := report.Save(o.Out, res, report.WorkHTML(res)); err != nil {
		return nil, err
	}
	return res, nil
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
