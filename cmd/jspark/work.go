package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"jspark/agent"
	"jspark/agent/external"
	"jspark/agent/record"
	"jspark/agent/report"
	"jspark/agent/target"
	"jspark/recipes"
	"jspark/sandbox"
)

// WorkOptions are the flags of `jspark work`.
type WorkOptions struct {
	measureFlags // the unnamed endpoints spread the sessions of one target
	Round        string
	Recipe       string
	Window       time.Duration
	Trials       int
	Resume       bool
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
			if o.Trials < 1 {
				return fmt.Errorf("--trials %d: at least 1", o.Trials)
			}
			if o.Resume && o.Out == "" {
				return errors.New("--resume needs --out: the folder of the run to finish")
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return profiled(o.CPUProfile, func() error { return runWork(ctx, o, stdout, stderr) })
		},
	}
	f := cmd.Flags()
	o.measureFlags.add(f, targetHelp{boot: "to run the rounds on",
		endpoint: "instead of the in-process engine; repeat unnamed ones to spread sessions, a named one is a target of its own", out: "RECIPE-ROUND"})
	f.StringVar(&o.Recipe, "recipe", "work", "built-in recipe name or YAML file")
	f.DurationVar(&o.Window, "window", 0, "session window (default: the recipe's, 180s for work)")
	f.IntVar(&o.Trials, "trials", 1, "run each round this many times, each trial with its own sampling seed, for pass@k")
	f.BoolVar(&o.Resume, "resume", false, "finish the interrupted run in --out: its finished round trials are kept, the others run")
	f.BoolVar(&o.NoNamespaces, "no-namespaces", false, "do not isolate shells in namespaces (rlimits and process groups only)")
	f.StringVar(&o.AgentCache, "agent-cache", "", "where a recipe's external agents (pi, codex, opencode) are installed with npm (default "+external.DefaultCache()+")")
	return cmd
}

func runWork(ctx context.Context, o *WorkOptions, stdout, stderr io.Writer) error {
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
	key, err := o.resolve(os.Getenv)
	if err != nil {
		return err
	}
	specs, err := o.specs(true)
	if err != nil {
		return err
	}
	if err := o.claimOut(r); err != nil {
		return err
	}
	run := o.runner(ctx, r, key, stdout, stderr)
	if len(specs) > 1 {
		return o.workTargets(r, specs, run, stdout, stderr)
	}
	res, err := run(specs[0], o.Out)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	report.Work(stdout, res)
	fmt.Fprintf(stdout, "results: %s, %s, trajectories under %s\n",
		filepath.Join(o.Out, "results.json"), filepath.Join(o.Out, "report.html"), o.Out)
	return nil
}

// claimOut makes --out this run's (a new folder under results/ when it is
// not given), or takes back the folder of the run that --resume finishes.
func (o *WorkOptions) claimOut(r *recipes.Recipe) error {
	switch {
	case o.Resume:
		return sandbox.ResumeOut(o.Out)
	case o.Out == "":
		dir, err := sandbox.NewOut(filepath.Join("results", fmt.Sprintf("%s-%s-%s", r.Name, o.Round, time.Now().Format("20060102-150405"))))
		o.Out = dir
		return err
	}
	return sandbox.ClaimOut(o.Out)
}

// workRun runs the recipe's rounds on one target, into out.
type workRun func(sp targetSpec, out string) (*record.Work, error)

// runner opens a target, runs the rounds on it with the progress view that
// suits stdout, and closes it.
func (o *WorkOptions) runner(ctx context.Context, r *recipes.Recipe, key string, stdout, stderr io.Writer) workRun {
	tty := false
	if f, ok := stdout.(*os.File); ok {
		tty = isatty.IsTerminal(f.Fd())
	}
	return func(sp targetSpec, out string) (*record.Work, error) {
		backends, stop, err := o.open(ctx, sp, key, stderr)
		if err != nil {
			return nil, err
		}
		defer stop()
		return agent.Work(ctx, agent.WorkOptions{
			Recipe: r, Round: o.Round, Backends: backends, Window: o.Window, Trials: o.Trials, Out: out, Resume: o.Resume,
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
}

// workTargets runs the rounds on each target in turn, under --out/NAME,
// then writes the combined results.json, report.html and table.
func (o *WorkOptions) workTargets(r *recipes.Recipe, specs []targetSpec, run workRun, stdout, stderr io.Writer) error {
	all := &record.WorkTargets{Version: record.Version, Recipe: r.File}
	for _, sp := range specs {
		out := filepath.Join(o.Out, sp.Name)
		fmt.Fprintf(stderr, "jspark work: target %s (%s %s)\n", sp.Name, sp.Kind, sp.Spec)
		res, err := run(sp, out)
		if err != nil {
			return fmt.Errorf("target %s: %w", sp.Name, err)
		}
		fmt.Fprintf(stdout, "\n%s (%s %s):\n", sp.Name, sp.Kind, sp.Spec)
		report.Work(stdout, res)
		all.Window = res.Window
		all.Targets = append(all.Targets, record.WorkTarget{Name: sp.Name, Kind: sp.Kind, Spec: sp.Spec, Out: out, Work: res})
	}
	if err := report.Save(o.Out, all, report.TargetsHTML(all, o.Out)); err != nil {
		return err
	}
	t := report.Targets(all)
	fmt.Fprintln(stdout)
	t.Write(stdout)
	fmt.Fprintf(stdout, "results: %s, %s; each target's under %s\n",
		filepath.Join(o.Out, "results.json"), filepath.Join(o.Out, "report.html"), filepath.Join(o.Out, "NAME"))
	return nil
}

// open starts a boot, or checks a target's endpoints; stop stops what it started.
func (o *WorkOptions) open(ctx context.Context, sp targetSpec, key string, log io.Writer) ([]target.Backend, func(), error) {
	if sp.Kind == "boot" {
		b, stop, err := inProcessBackend(sp.Engine, log)
		if err != nil {
			return nil, nil, err
		}
		return []target.Backend{b}, stop, nil
	}
	var backends []target.Backend
	for _, u := range sp.URLs {
		b, err := target.Endpoint(ctx, u, key, o.ServedModel, log)
		if err != nil {
			return nil, nil, err
		}
		backends = append(backends, b)
	}
	return backends, func() {}, nil
}

func newRecipesCmd(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "recipes", Short: "List, validate, check and import workload recipes"}
	cmd.AddCommand(newRecipesCheckCmd(stdout), newRecipesImportCmd(stdout))
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
