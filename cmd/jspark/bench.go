package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"jspark/agent/bench"
	"jspark/agent/target"
	"jspark/backend/refs"
	"jspark/sandbox"
)

// BenchOptions are the flags of `jspark bench`.
type BenchOptions struct {
	measureFlags
	Screen string
	apiKey string // resolved from the flags or the environment

	Lengths, ArriveLengths, ArriveAt, Long, Short, Concurrency string
	Delay                                                      time.Duration
	Trials, MaxTokens, IDTokens, RepeatPairs                   int
	IgnoreEOS                                                  bool
	IDsRef                                                     string
}

func newBenchCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &BenchOptions{}
	d := bench.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "bench SCREEN",
		Short: "Run the seed's measurement screens: cache, mixed, arrival, speed, concurrency, ids, or all",
		Long: `Run the seed report's measurement screens against one or more targets and
print each screen's table, one column per target. A target is a boot of the
in-process engine (--boot NAME='ENGINE FLAGS', repeatable; without --boot and
--endpoint, one boot with the command's engine flags) or an OpenAI-compatible
endpoint (--endpoint [NAME=]URL, repeatable). Each target is started or
checked in turn, warmed, measured and stopped. results.json (every request)
and report.html (plots) go under --out.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Screen = args[0]
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return profiled(o.CPUProfile, func() error { return runBench(ctx, o, stdout, stderr) })
		},
	}
	f := cmd.Flags()
	o.measureFlags.add(f, targetHelp{boot: "to start and measure", endpoint: "to measure (repeatable)", out: "bench-SCREEN"})
	f.StringVar(&o.Lengths, "lengths", joinLengths(d.Lengths), "cache: prompt lengths in tokens (k = 1024)")
	f.StringVar(&o.ArriveLengths, "arrive-lengths", joinLengths(d.ArriveLengths), "mixed: the arriving prompt's lengths")
	f.StringVar(&o.ArriveAt, "arrive-at", "2,3", "mixed: streams at once when the request arrives, it included (C2, C3)")
	f.StringVar(&o.Long, "long", lengthFlag(d.Long), "arrival: the long prompt's length (and the stable-tool turn's)")
	f.StringVar(&o.Short, "short", lengthFlag(d.Short), "arrival: the short prompt's length")
	f.DurationVar(&o.Delay, "delay", 0, "arrival: send the short prompt this long after the long one (0: a twentieth of the long cold TTFT)")
	f.IntVar(&o.Trials, "trials", d.Trials, "cache, mixed, arrival: salted trials per cell")
	f.StringVar(&o.Concurrency, "concurrency", "1-6", "concurrency: offered streams, a range 1-6 or a list 1,2,4")
	f.IntVar(&o.MaxTokens, "max-tokens", d.MaxTokens, "speed, concurrency: output tokens per request at most")
	f.BoolVar(&o.IgnoreEOS, "ignore-eos", false, "speed, concurrency: decode to --max-tokens (ignore_eos)")
	f.IntVar(&o.IDTokens, "id-tokens", d.IDTokens, "ids: greedy tokens per prompt")
	f.IntVar(&o.RepeatPairs, "repeat-pairs", d.RepeatPairs, "ids: prompts sent twice")
	f.StringVar(&o.IDsRef, "ids-ref", "", "ids: reference outputs, JSON lines {prompt|prompt_ids, gen_ids, text} (default: the first target's)")
	return cmd
}

func runBench(ctx context.Context, o *BenchOptions, stdout, stderr io.Writer) error {
	names, err := bench.ParseScreen(o.Screen)
	if err != nil {
		return err
	}
	cfg, err := o.config()
	if err != nil {
		return err
	}
	if o.apiKey, err = o.resolve(os.Getenv); err != nil {
		return err
	}
	targets, err := o.targets(stderr)
	if err != nil {
		return err
	}
	if o.Out == "" {
		o.Out, err = sandbox.NewOut(filepath.Join("results", fmt.Sprintf("bench-%s-%s", o.Screen, time.Now().Format("20060102-150405"))))
	} else {
		err = sandbox.ClaimOut(o.Out)
	}
	if err != nil {
		return err
	}
	var prog bench.Progress = bench.NewLines(stderr)
	if f, ok := stderr.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		prog = bench.NewBars(stderr)
	}
	res, err := bench.Bench(ctx, bench.Options{Screens: names, Targets: targets, Config: cfg, Out: o.Out, Progress: prog, Log: stderr})
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

func (o *BenchOptions) config() (bench.Config, error) {
	c := bench.DefaultConfig()
	var err error
	lengths := func(flag, s string) []int {
		var out []int
		for _, p := range strings.Split(s, ",") {
			n, e := bench.ParseLength(p)
			if e != nil && err == nil {
				err = fmt.Errorf("--%s: %w", flag, e)
			}
			out = append(out, n)
		}
		return out
	}
	c.Lengths = lengths("lengths", o.Lengths)
	c.ArriveLengths = lengths("arrive-lengths", o.ArriveLengths)
	c.Long = lengths("long", o.Long)[0]
	c.Short = lengths("short", o.Short)[0]
	if err != nil {
		return c, err
	}
	if c.ArriveAt, err = counts("arrive-at", o.ArriveAt, 2); err != nil {
		return c, err
	}
	if c.Concurrency, err = counts("concurrency", o.Concurrency, 1); err != nil {
		return c, err
	}
	for _, v := range []struct {
		flag string
		n    int
	}{{"trials", o.Trials}, {"max-tokens", o.MaxTokens}, {"id-tokens", o.IDTokens}} {
		if v.n < 1 {
			return c, fmt.Errorf("--%s %d: want at least 1", v.flag, v.n)
		}
	}
	if o.RepeatPairs < 0 {
		return c, fmt.Errorf("--repeat-pairs %d: want 0 or more", o.RepeatPairs)
	}
	if o.Delay < 0 {
		return c, fmt.Errorf("--delay %s: want 0 (auto) or more", o.Delay)
	}
	c.Delay, c.Trials, c.MaxTokens, c.IgnoreEOS, c.IDTokens, c.RepeatPairs = o.Delay, o.Trials, o.MaxTokens, o.IgnoreEOS, o.IDTokens, o.RepeatPairs
	if o.IDsRef != "" {
		if c.References, err = refs.Load(o.IDsRef); err != nil {
			return c, fmt.Errorf("--ids-ref: %w", err)
		}
		c.ReferenceFile = o.IDsRef
	}
	return c, nil
}

// counts parses "1-6" or "2,3", each at least lo.
func counts(flag, s string, lo int) ([]int, error) {
	bad := fmt.Errorf("--%s %q: want a range such as 1-6 or a list such as 2,3 of counts ≥ %d", flag, s, lo)
	if a, b, ok := strings.Cut(s, "-"); ok {
		x, e1 := strconv.Atoi(strings.TrimSpace(a))
		y, e2 := strconv.Atoi(strings.TrimSpace(b))
		if e1 != nil || e2 != nil || x < lo || y < x || y > 256 {
			return nil, bad
		}
		var out []int
		for n := x; n <= y; n++ {
			out = append(out, n)
		}
		return out, nil
	}
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < lo || n > 256 {
			return nil, bad
		}
		out = append(out, n)
	}
	return out, nil
}

func joinLengths(ns []int) string {
	var s []string
	for _, n := range ns {
		s = append(s, lengthFlag(n))
	}
	return strings.Join(s, ",")
}

func lengthFlag(n int) string {
	if n%1024 == 0 {
		return fmt.Sprintf("%dk", n/1024)
	}
	return fmt.Sprint(n)
}

// targets are the boots, in the order given, then the endpoints, each its
// own column.
func (o *BenchOptions) targets(log io.Writer) ([]bench.Target, error) {
	specs, err := o.specs(false)
	if err != nil {
		return nil, err
	}
	var out []bench.Target
	for _, sp := range specs {
		t := bench.Target{Name: sp.Name, Kind: sp.Kind, Spec: sp.Spec}
		if sp.Kind == "boot" {
			ef := sp.Engine
			t.Open = func(context.Context) (target.Backend, func(), error) { return inProcessBackend(ef, log) }
		} else {
			u := sp.URLs[0]
			t.Open = func(ctx context.Context) (target.Backend, func(), error) {
				b, err := target.Endpoint(ctx, u, o.apiKey, o.ServedModel, io.Discard)
				return b, func() {}, err
			}
		}
		out = append(out, t)
	}
	return out, nil
}
