package main

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"jspark/backend/engine"
	"jspark/backend/model"
	"jspark/kernels/cpu"
)

// TestCLIDefaultsAreTheEngines: the engine options the flags give when none
// is set are engine.DefaultOptions, so a library user gets the scheduler a
// `jspark serve` user gets: the same step plan for a long prompt, the step
// bound's first probe chunk included (the engine's zero options once
// prefilled it 4096 tokens at a time while the CLI bounded steps to 200 ms).
func TestCLIDefaultsAreTheEngines(t *testing.T) {
	o := defaultEngineFlags()
	if err := o.flagSet().Parse(nil); err != nil {
		t.Fatal(err)
	}
	cli, lib := o.engineOptions(), engine.DefaultOptions()
	if d := cmp.Diff(lib, cli, cmpopts.IgnoreFields(engine.Options{}, "Log", "Trace", "OnStep", "Clock")); d != "" {
		t.Fatalf("the CLI's default engine options (-DefaultOptions +CLI):\n%s", d)
	}

	m, _, err := model.Open("", cpu.New(2)) // the embedded stories260K
	if err != nil {
		t.Fatal(err)
	}
	prompt := make([]int, 1500)
	for i := range prompt {
		prompt[i] = 3 + i*7919%(m.Vocab-3)
	}
	plan := func(opt engine.Options) []engine.StepTrace {
		// The cache's size is the machine's (Auto: a fifth of its memory)
		// and each step is timed as 50 ms by a fake clock, so that the time
		// bound sizes chunks alike in both runs.
		var now time.Time
		var steps []engine.StepTrace
		opt.Log, opt.KVBlocks = io.Discard, 1024
		opt.Clock = func() time.Time { now = now.Add(50 * time.Millisecond); return now }
		opt.OnStep = func(s engine.StepTrace) { steps = append(steps, s) }
		e, err := engine.New(m, opt)
		if err != nil {
			t.Fatal(err)
		}
		events, err := e.Submit(context.Background(), engine.Request{Prompt: prompt, MaxTokens: 2, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		for range events {
		}
		e.Close() // the loop has traced its last step
		return steps
	}
	want, got := plan(lib), plan(cli)
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("step plans (-DefaultOptions +CLI):\n%s", d)
	}
	if len(want) < 3 || len(want[0].Prefill) != 1 || want[0].Prefill[0].Tokens != 4*lib.BlockSize {
		t.Fatalf("the plan does not start with the step bound's probe of 4 blocks: %+v", want)
	}
	t.Logf("%d steps; chunks %v", len(want), chunks(want))
}

func chunks(steps []engine.StepTrace) []int {
	var n []int
	for _, s := range steps {
		for _, c := range s.Prefill {
			n = append(n, c.Tokens)
		}
	}
	return n
}
