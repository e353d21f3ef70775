package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"jspark/agent/bench"
)

// ReplayOptions are the flags of `jspark bench replay`.
type ReplayOptions struct {
	measureFlags
	Dir      string
	Round    string
	GapScale float64
}

func newReplayCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &ReplayOptions{}
	cmd := &cobra.Command{
		Use:   "replay DIR",
		Short: "Re-send a recorded work run's requests to a backend and print the serving columns",
		Long: `Re-send the requests of a recorded ` + "`jspark work`" + ` run (DIR: its --out folder,
or one target's folder of a run over several) to each target in turn: every
session's request bodies as they were sent (requests.jsonl beside each
trajectory), the sessions of a round at once, each request after the
previous response plus the gap the recording had there (the tools' time), a
request the window cut held as long and then cancelled. No sandbox runs and
nothing is checked. The table puts the recording's serving columns beside
each target's, with how many requests produced as many output tokens as
recorded: where all did, a difference is the serving's, not the model's.
results.json and report.html go under --out.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Dir = args[0]
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return profiled(o.CPUProfile, func() error { return runReplay(ctx, o, stdout, stderr) })
		},
	}
	f := cmd.Flags()
	o.measureFlags.add(f, targetHelp{boot: "to replay on", endpoint: "to replay on (repeatable)", out: "replay-TIME"})
	f.StringVar(&o.Round, "round", "all", "the recorded round to replay (a repeat round brings its first round), or all")
	f.Float64Var(&o.GapScale, "gap-scale", 1, "the recorded gaps between a response and the next request times this (0: none, a closed loop)")
	return cmd
}

func runReplay(ctx context.Context, o *ReplayOptions, stdout, stderr io.Writer) error {
	if o.GapScale < 0 {
		return fmt.Errorf("--gap-scale %g: want 0 or more", o.GapScale)
	}
	key, err := o.resolve(os.Getenv)
	if err != nil {
		return err
	}
	targets, err := benchTargets(&o.measureFlags, key, stderr)
	if err != nil {
		return err
	}
	if o.Out == "" {
		o.Out = filepath.Join("results", "replay-"+time.Now().Format("20060102-150405"))
	}
	var prog bench.Progress = bench.NewLines(stderr)
	if f, ok := stderr.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		prog = bench.NewBars(stderr)
	}
	res, err := bench.Replay(ctx, bench.ReplayOptions{Dir: o.Dir, Round: o.Round, Targets: targets, GapScale: o.GapScale, Out: o.Out,
		Progress: prog, Log: stderr})
	if err != nil {
		return err
	}
	for i := range res.Tables {
		fmt.Fprintln(stdout)
		res.Tables[i].Write(stdout)
	}
	fmt.Fprintf(stdout, "\nresults: %s, %s\n", filepath.Join(o.Out, "results.json"), filepath.Join(o.Out, "report.html"))
	return nil
}
