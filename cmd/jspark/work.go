package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"jspark/agent"
	"jspark/agent/bench"
	"jspark/recipes"
	"jspark/sandbox"
)

// WorkOptions are the flags of `jspark work`.
type WorkOptions struct {
	EngineFlags
	Round     string
	Recipe    string
	Boots     []string // NAME='ENGINE FLAGS'
	Endpoints []string // [NAME=]URL; the unnamed ones spread the sessions of one target
	APIKeyFlags
	ServedModel  string
	Window       time.Duration
	Out          string
	NoNamespaces bool
	AgentCache   string

	engineArgs []string // the engine flags given on the command line, which every boot inherits
}

func newWorkCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &WorkOptions{}
	cmd := &cobra.Command{
		Use:   "work ROUND",
		Short: "Run a recipe's round of agent sessions (or all) and print the Work table",
		Long: `Run a recipe's round of concurrent agent sessions, each a tool loop in its own
sandboxed workspace, cut at the window; a *-repeat round first runs its first
round on the same backend. Without --endpoint the in-process engine serves the
model (--model, or the embedded default) over loopback HTTP.

Several targets (--boot NAME='ENGINE FLAGS', a configuration of the in-process
engine: the command's engine flags, then its own; --endpoint NAME=URL; the
unnamed --endpoint URLs together, spreading the sessions) each run the rounds
in turn, under --out/NAME, and the seed's "Work: four recipes" table follows:
one row per target and round.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.Round = args[0]
			}
			if cmd.Flags().Changed("window") && o.Window < time.Second {
				return fmt.Errorf("--window %v: a window is at least 1s", o.Window)
			}
			o.engineArgs = changedEngineFlags(cmd.Flags())
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runWork(ctx, o, stdout, stderr)
		},
	}
	addEngineFlags(cmd, &o.EngineFlags)
	f := cmd.Flags()
	f.StringVar(&o.Recipe, "recipe", "work", "built-in recipe name or YAML file")
	f.StringArrayVar(&o.Boots, "boot", nil, "NAME='ENGINE FLAGS': a configuration of the in-process engine to run the rounds on (repeatable)")
	f.StringArrayVar(&o.Endpoints, "endpoint", nil, "[NAME=]URL: an OpenAI-compatible base URL (http://host:port/v1) instead of the in-process engine; repeat unnamed ones to spread sessions, a named one is a target of its own")
	addAPIKeyFlags(cmd, &o.APIKeyFlags, "bearer key for --endpoint (its /metrics too)")
	f.StringVar(&o.ServedModel, "served-model", "", "model id to request from --endpoint (default: its first /v1/models entry)")
	f.DurationVar(&o.Window, "window", 0, "session window (default: the recipe's, 180s for work)")
	f.StringVar(&o.Out, "out", "", "output folder (default: results/RECIPE-ROUND-TIME)")
	f.BoolVar(&o.NoNamespaces, "no-namespaces", false, "do not isolate shells in namespaces (rlimits and process groups only)")
	f.StringVar(&o.AgentCache, "agent-cache", "", "where a recipe's external agents (pi, codex, opencode) are installed with npm (default "+agent.DefaultAgentCache()+")")
	return cmd
}

func runWork(ctx context.Context, o *WorkOptions, stdout, stderr io.Writer) error {
	stopProfile, err := startCPUProfile(o.CPUProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	r, err := recipes.Load(o.Recipe)
	if err != nil {
		return err
	}
	if _, err := agent.Rounds(r, o.Round); err != nil {
		if o.Round == "" {
			return fmt.Errorf("name a round: %w", err)
		}
		return err
	}
	if o.Out == "" {
		o.Out = filepath.Join("results", fmt.Sprintf("%s-%s-%s", r.Name, o.Round, time.Now().Format("20060102-150405")))
	}
	key, err := o.resolve(os.Getenv)
	if err != nil {
		return err
	}
	specs, err := parseTargets(o.Boots, o.Endpoints, o.engineArgs, true)
	if err != nil {
		return err
	}
	tty := false
	if f, ok := stdout.(*os.File); ok {
		tty = isatty.IsTerminal(f.Fd())
	}
	run := func(sp targetSpec, out string) (*agent.WorkResult, error) {
		backends, stop, err := o.open(ctx, sp, key, stderr)
		if err != nil {
			return nil, err
		}
		defer stop()
		return agent.Work(ctx, agent.WorkOptions{
			Recipe: r, Round: o.Round, Backends: backends, Window: o.Window, Out: out,
			Sandbox:    sandbox.Options{NoNamespaces: o.NoNamespaces, Log: stderr},
			AgentCache: o.AgentCache, Log: stderr,
			Progress: func(round string, n int) agent.Progress {
				if tty {
					return agent.NewLiveView(stdout, round, n)
				}
				return agent.NewPlainLog(stderr, round, n)
			},
		})
	}
	if len(specs) == 1 {
		res, err := run(specs[0], o.Out)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout)
		agent.Table(stdout, res)
		fmt.Fprintf(stdout, "results: %s, %s, trajectories under %s\n",
			filepath.Join(o.Out, "results.json"), filepath.Join(o.Out, "report.html"), o.Out)
		return nil
	}
	all := &bench.WorkResults{Recipe: r.File}
	for _, sp := range specs {
		out := filepath.Join(o.Out, sp.Name)
		fmt.Fprintf(stderr, "jspark work: target %s (%s %s)\n", sp.Name, sp.Kind, sp.Spec)
		res, err := run(sp, out)
		if err != nil {
			return fmt.Errorf("target %s: %w", sp.Name, err)
		}
		fmt.Fprintf(stdout, "\n%s (%s %s):\n", sp.Name, sp.Kind, sp.Spec)
		agent.Table(stdout, res)
		all.Window = res.Window
		all.Targets = append(all.Targets, bench.WorkTarget{Name: sp.Name, Kind: sp.Kind, Spec: sp.Spec, Out: out, WorkResult: res})
	}
	b, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.Out, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.Out, "report.html"), []byte(bench.WorkReport(all, o.Out)), 0o644); err != nil {
		return err
	}
	t := bench.WorkTable(all)
	fmt.Fprintln(stdout)
	t.Write(stdout)
	fmt.Fprintf(stdout, "results: %s, %s; each target's under %s\n",
		filepath.Join(o.Out, "results.json"), filepath.Join(o.Out, "report.html"), filepath.Join(o.Out, "NAME"))
	return nil
}

// open starts a boot, or checks a target's endpoints; stop stops what it started.
func (o *WorkOptions) open(ctx context.Context, sp targetSpec, key string, log io.Writer) ([]agent.Backend, func(), error) {
	if sp.Kind == "boot" {
		b, stop, err := inProcessBackend(sp.Engine, log)
		if err != nil {
			return nil, nil, err
		}
		return []agent.Backend{b}, stop, nil
	}
	var backends []agent.Backend
	for _, u := range sp.URLs {
		b, err := endpointBackend(ctx, u, key, o.ServedModel, log)
		if err != nil {
			return nil, nil, err
		}
		backends = append(backends, b)
	}
	return backends, func() {}, nil
}

// inProcessBackend serves the engine on a loopback port: the runner measures
// what any client of the endpoint would see.
func inProcessBackend(ef *EngineFlags, log io.Writer) (agent.Backend, func(), error) {
	e, sopt, closeEngine, err := openEngine(ef, log)
	if err != nil {
		return agent.Backend{}, nil, err
	}
	srv := newServer(e, sopt, log)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		closeEngine()
		return agent.Backend{}, nil, err
	}
	hs := srv.HTTPServer()
	go hs.Serve(ln)
	fmt.Fprintf(log, "jspark: engine %s (KV capacity %d tokens) at http://%s/v1\n", e.Options().ModelName, e.CapacityTokens(), ln.Addr())
	b := agent.Backend{
		URL:   fmt.Sprintf("http://%s/v1", ln.Addr()),
		Model: e.Options().ModelName,
		Counter: agent.FuncSource(func() agent.Counters {
			s := e.Metrics().Snapshot()
			return agent.Counters{Generation: float64(s.GenerationTokens), Running: float64(s.Running), Waiting: float64(s.Waiting),
				Preemptions: float64(s.Preemptions), PrefixHits: float64(s.CacheHits)}
		}),
		Handler: srv.Handler(),
		Context: e.Options().MaxContext,
	}
	return b, func() {
		hs.Close()
		closeEngine()
	}, nil
}

// endpointBackend checks an external endpoint, picks its model and finds
// whether it exports vLLM-named Prometheus metrics.
func endpointBackend(ctx context.Context, base, key, modelID string, log io.Writer) (agent.Backend, error) {
	b := agent.Backend{URL: base, APIKey: key, Model: modelID}
	if b.Model == "" {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/models", nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return b, fmt.Errorf("endpoint %s: %w", base, err)
		}
		defer resp.Body.Close()
		var models struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&models); err != nil || len(models.Data) == 0 {
			return b, fmt.Errorf("endpoint %s: /models lists no model (%v); pass --served-model", base, errors.Join(err, fmt.Errorf("status %s", resp.Status)))
		}
		b.Model = models.Data[0].ID
	}
	p := &agent.Prometheus{URL: agent.MetricsURL(base), APIKey: key, Client: http.DefaultClient}
	if _, err := p.Read(ctx); err != nil {
		fmt.Fprintf(log, "jspark work: %s: no usable /metrics (%v): counting streamed tokens instead\n", base, err)
	} else {
		b.Counter = p
	}
	return b, nil
}

func newRecipesCmd(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "recipes", Short: "List and validate workload recipes"}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the built-in recipes and their rounds",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			for _, name := range recipes.Builtin() {
				r, err := recipes.Load(name)
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "%s\twindow %s, %d tasks, rounds:", name, r.Window.D(), len(r.Tasks))
				for _, rd := range r.Rounds {
					if a := r.AgentOf(&rd); a.External() {
						fmt.Fprintf(stdout, " %s(c%d, %s %s)", rd.Name, rd.Concurrency, a.Kind, a.Version)
					} else {
						fmt.Fprintf(stdout, " %s(c%d)", rd.Name, rd.Concurrency)
					}
				}
				fmt.Fprintln(stdout)
			}
			return nil
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "validate FILE...",
		Short: "Check recipe files; errors name file:line and the field",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			bad := 0
			for _, f := range args {
				if _, err := recipes.Load(f); err != nil {
					fmt.Fprintln(stdout, err)
					bad++
					continue
				}
				fmt.Fprintf(stdout, "%s: ok\n", f)
			}
			if bad > 0 {
				return fmt.Errorf("%d of %d recipes are invalid", bad, len(args))
			}
			return nil
		},
	})
	return cmd
}
