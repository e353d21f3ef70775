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
	"jspark/recipes"
	"jspark/sandbox"
)

// WorkOptions are the flags of `jspark work`.
type WorkOptions struct {
	EngineFlags
	Round     string
	Recipe    string
	Endpoints []string
	APIKeyFlags
	ServedModel  string
	Window       time.Duration
	Out          string
	NoNamespaces bool
	AgentCache   string
}

func newWorkCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &WorkOptions{}
	cmd := &cobra.Command{
		Use:   "work ROUND",
		Short: "Run a recipe's round of agent sessions (or all) and print the Work table",
		Long: `Run a recipe's round of concurrent agent sessions, each a tool loop in its own
sandboxed workspace, cut at the window; a *-repeat round first runs its first
round on the same backend. Without --endpoint the in-process engine serves the
model (--model, or the embedded default) over loopback HTTP.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Round = args[0]
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runWork(ctx, o, stdout, stderr)
		},
	}
	addEngineFlags(cmd, &o.EngineFlags)
	f := cmd.Flags()
	f.StringVar(&o.Recipe, "recipe", "work", "built-in recipe name or YAML file")
	f.StringArrayVar(&o.Endpoints, "endpoint", nil, "OpenAI-compatible base URL (http://host:port/v1) instead of the in-process engine; repeat to spread sessions")
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
		return err
	}
	if o.Out == "" {
		o.Out = filepath.Join("results", fmt.Sprintf("%s-%s-%s", r.Name, o.Round, time.Now().Format("20060102-150405")))
	}
	key, err := o.resolve(os.Getenv)
	if err != nil {
		return err
	}
	var backends []agent.Backend
	if len(o.Endpoints) > 0 {
		for _, u := range o.Endpoints {
			b, err := endpointBackend(ctx, u, key, o.ServedModel, stderr)
			if err != nil {
				return err
			}
			backends = append(backends, b)
		}
	} else {
		b, stop, err := inProcessBackend(&o.EngineFlags, stderr)
		if err != nil {
			return err
		}
		defer stop()
		backends = append(backends, b)
	}
	tty := false
	if f, ok := stdout.(*os.File); ok {
		tty = isatty.IsTerminal(f.Fd())
	}
	res, err := agent.Work(ctx, agent.WorkOptions{
		Recipe: r, Round: o.Round, Backends: backends, Window: o.Window, Out: o.Out,
		Sandbox:    sandbox.Options{NoNamespaces: o.NoNamespaces, Log: stderr},
		AgentCache: o.AgentCache, Log: stderr,
		Progress: func(round string, n int) agent.Progress {
			if tty {
				return agent.NewLiveView(stdout, round, n)
			}
			return agent.NewPlainLog(stderr, round, n)
		},
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	agent.Table(stdout, res)
	fmt.Fprintf(stdout, "results: %s, %s, trajectories under %s\n",
		filepath.Join(o.Out, "results.json"), filepath.Join(o.Out, "report.html"), o.Out)
	return nil
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
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 30 * time.Second}
	go hs.Serve(ln)
	fmt.Fprintf(log, "jspark work: engine %s (KV capacity %d tokens) at http://%s/v1\n", e.Options().ModelName, e.CapacityTokens(), ln.Addr())
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
