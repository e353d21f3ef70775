package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"jspark/recipes"
	"jspark/sandbox"
)

// WorkOptions are a `jspark work` run.
type WorkOptions struct {
	Recipe   *recipes.Recipe
	Round    string // a round's name or "all"
	Backends []Backend
	Window   time.Duration // 0: the recipe's
	Out      string
	Sandbox  sandbox.Options
	Progress func(round string, sessions int) Progress // nil: none
	// AgentCache is where external agents are installed ("": DefaultAgentCache);
	// Log is told about installations (nil: discarded).
	AgentCache string
	Log        io.Writer
}

// RepeatPairs is how many repeat sessions sent exactly their twin's first request.
type RepeatPairs struct {
	Identical int `json:"identical"`
	Total     int `json:"total"`
}

// WorkResult is results.json.
type WorkResult struct {
	Recipe      string         `json:"recipe"`
	Backends    []string       `json:"backends"`
	Window      float64        `json:"window"`
	Rounds      []*RoundResult `json:"rounds"`
	RepeatPairs RepeatPairs    `json:"repeat_pairs"`
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
func Work(ctx context.Context, o WorkOptions) (*WorkResult, error) {
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
	res := &WorkResult{Recipe: o.Recipe.File, Window: window.Seconds()}
	for _, b := range o.Backends {
		res.Backends = append(res.Backends, b.URL)
	}
	byName := map[string]*RoundResult{}
	for _, rd := range rounds {
		settle(ctx, o.Backends)
		ro := RoundOptions{Recipe: o.Recipe, Round: rd, Backends: o.Backends, Window: window, Out: filepath.Join(o.Out, rd.Name), Sandbox: o.Sandbox,
			Agent: agents[o.Recipe.AgentOf(rd)]}
		if o.Progress != nil {
			ro.Progress = o.Progress(rd.Name, len(o.Recipe.Plan(rd)))
		}
		rr, err := RunRound(ctx, ro)
		if err != nil {
			return nil, fmt.Errorf("round %s: %w", rd.Name, err)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		byName[rd.Name] = rr
		res.Rounds = append(res.Rounds, rr)
		if first := byName[rd.RepeatOf]; first != nil {
			for i, s := range rr.Sessions {
				res.RepeatPairs.Total++
				if i < len(first.Sessions) && s.payload != nil && bytes.Equal(s.payload, first.Sessions[i].payload) {
					res.RepeatPairs.Identical++
				}
			}
		}
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.Out, "results.json"), append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.Out, "report.html"), []byte(Report(res)), 0o644); err != nil {
		return nil, err
	}
	return res, nil
}

// installAgents installs each external agent the rounds name, once.
func installAgents(ctx context.Context, o WorkOptions, rounds []*recipes.Round) (map[recipes.Agent]*Installation, error) {
	out := map[recipes.Agent]*Installation{}
	log := o.Log
	if log == nil {
		log = io.Discard
	}
	cache := o.AgentCache
	if cache == "" {
		cache = DefaultAgentCache()
	}
	for _, rd := range rounds {
		a := o.Recipe.AgentOf(rd)
		if !a.External() || out[a] != nil {
			continue
		}
		for _, b := range o.Backends {
			if b.Handler == nil {
				return nil, fmt.Errorf("round %s: agent %s: %w", rd.Name, a.Kind, errNoEngine)
			}
		}
		in, err := Install(ctx, a, cache, log)
		if err != nil {
			return nil, fmt.Errorf("round %s: %w", rd.Name, err)
		}
		out[a] = in
	}
	return out, nil
}

// Table writes the seed's Work table for the result.
func Table(w io.Writer, res *WorkResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "Round\tBackend tok/s\tInitial TTFT, s\tLater median TTFT, s\tTools\tNonzero exits\tAPI errors\tPending at cut\tWaiting max\tRunning max\tPreemptions\t")
	for _, r := range res.Rounds {
		s := r.Summary
		fmt.Fprintf(tw, "%s\t%.2f\t%s\t%s\t%d\t%d\t%d\t%d\t%.0f\t%.0f\t%.0f\t\n", r.Name, s.BackendTokS, seconds(s.InitialTTFT), seconds(s.LaterMedianTTFT),
			s.ToolCalls, s.NonzeroExits, s.APIErrors, s.PendingAtCut, s.WaitingMax, s.RunningMax, s.Preemptions)
	}
	tw.Flush()
	for _, r := range res.Rounds {
		fmt.Fprintf(w, "%s: %s\n", r.Name, WindowLine(r))
	}
	if len(res.Rounds) > 0 {
		counted := res.Rounds[0].Summary.CountedBy
		note := map[string]string{
			"engine":     "the engine's accepted-output-token counter",
			"prometheus": "the endpoint's vllm:generation_tokens_total",
			"stream":     "streamed tokens (the endpoint has no /metrics)",
		}[counted]
		fmt.Fprintf(w, "Backend tok/s = output tokens counted by %s / the %.0f s window.\n", note, res.Window)
	}
	if res.RepeatPairs.Total > 0 {
		fmt.Fprintf(w, "initial payloads: %d/%d repeat pairs byte-identical\n", res.RepeatPairs.Identical, res.RepeatPairs.Total)
	}
	for _, r := range res.Rounds {
		for _, s := range r.Sessions {
			if s.Agent != "" {
				fmt.Fprintf(w, "%s %s: %s\n", r.Name, s.Name, AgentLine(r, &s))
			}
		}
	}
}

// WindowLine says where a round's window went: the sums over its requests
// of the engine's queued, prefill, decode and preempted time, and of the
// tools' time.
func WindowLine(r *RoundResult) string {
	u := r.Summary.WindowUse
	if u == nil {
		return "where the window went: not reported by this backend"
	}
	tools := fmt.Sprintf("tools %.1f s", u.ToolsSec)
	for _, s := range r.Sessions {
		if s.Agent != "" {
			tools = "tools not measured (an external agent runs its own)"
		}
	}
	return fmt.Sprintf("where the window went (sums over sessions): queue %.1f s, prefill %.1f s, decode %.1f s, preempted %.1f s, %s",
		u.QueuedSec, u.PrefillSec, u.DecodeSec, u.PreemptedSec, tools)
}

// AgentLine is the seed's Pi-validation line for an external agent's session:
// how it ended and when, its requests and reads, the engine's prefix hits.
func AgentLine(r *RoundResult, s *SessionResult) string {
	reads, cached := 0, 0
	for _, q := range s.Requests {
		cached += q.CachedTokens
		for _, c := range q.Calls {
			if c.Name == "read" {
				reads++
			}
		}
	}
	var b strings.Builder
	switch {
	case s.AgentExit != nil:
		fmt.Fprintf(&b, "%s exited %d after %.3f s", s.Agent, *s.AgentExit, *s.AgentSeconds)
	case s.AgentError != "":
		fmt.Fprintf(&b, "%s could not run: %s", s.Agent, s.AgentError)
	default:
		fmt.Fprintf(&b, "%s cut at %.0f s", s.Agent, r.Window)
	}
	fmt.Fprintf(&b, ": %d requests, %d reads, %d tool calls, %d cached prompt tokens; engine prefix hits %.0f tokens in the round", len(s.Requests), reads, s.ToolCalls, cached, r.Summary.PrefixHits)
	if s.ExpectMet != nil {
		fmt.Fprintf(&b, "; expected answer %s", map[bool]string{true: "found", false: "NOT found"}[*s.ExpectMet])
	}
	return b.String()
}

// seconds is a table cell: "–" when nothing was measured.
func seconds(v *float64) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprintf("%.3f", *v)
}

// settle waits (up to a minute) until no backend has requests running or
// waiting: requests a cut round's clients dropped may still be finishing an
// engine step, and a round must start on an idle backend to measure its own.
func settle(ctx context.Context, bs []Backend) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		busy := false
		for _, b := range bs {
			if b.Counter == nil {
				continue
			}
			if c, err := b.Counter.Read(ctx); err == nil && c.Running+c.Waiting > 0 {
				busy = true
			}
		}
		if !busy {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
