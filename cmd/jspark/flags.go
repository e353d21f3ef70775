package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"jspark/backend/chat"
	"jspark/backend/engine"
)

// The flags the commands share, in one place: the device a model runs on
// (generate, serve, work, bench), the engine's options (serve, work, bench
// and each --boot), and the targets work and bench measure. A flag's
// default is the value its struct holds when the flag is declared, and the
// structs start from the defaults of the packages that own them
// (engine.DefaultOptions, server.DefaultOptions), so the CLI cannot drift
// from a library user's defaults; a boot is its parent's values with its
// own flags applied on a copy.

// DeviceFlags say which model runs where.
type DeviceFlags struct {
	Model   string
	Threads int
	Device  string
	KVType  string
}

func defaultDeviceFlags() DeviceFlags { return DeviceFlags{Device: "cpu", KVType: "f16"} }

// add declares the device flags on f, each defaulting to o's value.
func (o *DeviceFlags) add(f *pflag.FlagSet) {
	f.StringVar(&o.Model, "model", o.Model, "GGUF model file (default: the embedded stories260K)")
	f.IntVar(&o.Threads, "threads", o.Threads, "CPU threads (0: all)")
	f.StringVar(&o.Device, "device", o.Device, deviceFlagHelp)
	f.StringVar(&o.KVType, "kv-type", o.KVType, "KV cache element type: f16 (half the memory, faster at long context) or f32")
}

// EngineFlags are the engine's options as flags, with the device's.
type EngineFlags struct {
	DeviceFlags
	KVMemMiB int64
	Trace    string
	// ChatTemplateFile replaces the GGUF's chat template (like llama.cpp's
	// --chat-template-file).
	ChatTemplateFile string
	// ReasoningFormat: auto splits a thinking model's <think> block into
	// reasoning_content; none leaves it in content.
	ReasoningFormat string
	// ToolFormat forces the syntax of the model's tool calls; empty takes
	// the chat template's.
	ToolFormat string
	engine.Options
}

func defaultEngineFlags() EngineFlags {
	o := EngineFlags{DeviceFlags: defaultDeviceFlags(), ReasoningFormat: "auto", Options: engine.DefaultOptions()}
	if o.MaxContext == engine.Auto {
		o.MaxContext = 0 // --ctx says Auto with 0, as --kv-memory does
	}
	return o
}

// flagSet is o's flags, the device's included, as a set of their own (a
// command adds it to its flags; a boot parses its words with it), each
// defaulting to o's value.
func (o *EngineFlags) flagSet() *pflag.FlagSet {
	f := pflag.NewFlagSet("engine", pflag.ContinueOnError)
	o.DeviceFlags.add(f)
	f.IntVar(&o.BlockSize, "kv-block", o.BlockSize, "tokens per KV block")
	f.Int64Var(&o.KVMemMiB, "kv-memory", o.KVMemMiB, "KV cache MiB (0: a fifth of available memory, at most 4 GiB)")
	f.IntVar(&o.PrefillSolo, "prefill-solo", o.PrefillSolo, "prefill tokens per step when nothing else runs")
	f.IntVar(&o.PrefillMixed, "prefill-mixed", o.PrefillMixed, "prefill tokens per step, all prefills together, when anything else runs")
	f.IntVar(&o.MaxSeqs, "max-seqs", o.MaxSeqs, "requests running at once")
	f.IntVar(&o.MaxWaiting, "max-waiting", o.MaxWaiting, "requests in flight (queued or running) before 429")
	f.IntVar(&o.MaxContext, "ctx", o.MaxContext, "context tokens per sequence (0: the model's, at least 32768)")
	f.IntVar(&o.Speculate, "speculate", o.Speculate, "n-gram draft tokens per decode step (0: off)")
	f.IntVar(&o.MaxStepMs, "max-step-ms", o.MaxStepMs, "longest a prefilling step should take, in ms: chunks are sized from the measured speed (0: off, token budgets only)")
	f.DurationVar(&o.SessionRetain, "session-retain", o.SessionRetain, "keep the cache of a session (X-Session-Id or user) active within this long ahead of idle ones' (0: off)")
	f.StringVar(&o.Trace, "trace", o.Trace, "write a per-step JSON-lines trace to this file")
	f.StringVar(&o.ChatTemplateFile, "chat-template-file", o.ChatTemplateFile, "Jinja chat template to use instead of the model's tokenizer.chat_template")
	f.StringVar(&o.ReasoningFormat, "reasoning-format", o.ReasoningFormat, "auto: a thinking model's <think> block is returned as reasoning_content; none: left in content")
	f.StringVar(&o.ToolFormat, "tool-format", o.ToolFormat, "the syntax of the model's tool calls, parsed and forced: "+toolFormats()+" (default: the chat template's)")
	return f
}

func toolFormats() string {
	var names []string
	for _, f := range chat.Formats {
		names = append(names, f.String())
	}
	return strings.Join(names, ", ")
}

// engineOptions are the engine's options as the flags set them: the
// flags' 0 for --kv-memory and --ctx is the engine's Auto.
func (o *EngineFlags) engineOptions() engine.Options {
	opt := o.Options
	opt.KVMemory = engine.Auto
	if o.KVMemMiB > 0 {
		opt.KVMemory = o.KVMemMiB << 20
	}
	if opt.MaxContext == 0 {
		opt.MaxContext = engine.Auto
	}
	return opt
}

// boot is a boot's engine flags: o's values with words (engine flags only)
// applied on a copy.
func (o *EngineFlags) boot(words []string) (*EngineFlags, error) {
	b := *o
	f := b.flagSet()
	f.SetOutput(io.Discard)
	f.Usage = func() {}
	if err := f.Parse(words); err != nil {
		return nil, err
	}
	if f.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (engine flags only)", f.Arg(0))
	}
	return &b, nil
}

// given are the flags of f set on the command line, as a boot's spec
// names them (--name=value).
func given(f *pflag.FlagSet) []string {
	var out []string
	f.VisitAll(func(fl *pflag.Flag) {
		if fl.Changed {
			out = append(out, "--"+fl.Name+"="+fl.Value.String())
		}
	})
	return out
}

// profileFlag declares --cpuprofile.
func profileFlag(f *pflag.FlagSet, path *string) {
	f.StringVar(path, "cpuprofile", "", "write a CPU profile (go tool pprof) to this file")
}

// TargetFlags name what work and bench measure: boots of the in-process
// engine, endpoints, the endpoints' key and model, and the output folder.
type TargetFlags struct {
	Boots     []string // NAME='ENGINE FLAGS'
	Endpoints []string // [NAME=]URL
	APIKeyFlags
	ServedModel string
	Out         string
}

// targetHelp is what the target flags say in one command's --help.
type targetHelp struct{ boot, endpoint, out string }

func (o *TargetFlags) add(f *pflag.FlagSet, h targetHelp) {
	f.StringArrayVar(&o.Boots, "boot", nil, "NAME='ENGINE FLAGS': a configuration of the in-process engine "+h.boot+" (repeatable)")
	f.StringArrayVar(&o.Endpoints, "endpoint", nil, "[NAME=]URL: an OpenAI-compatible base URL (http://host:port/v1) "+h.endpoint)
	o.APIKeyFlags.add(f, "bearer key for --endpoint (its /metrics too)")
	f.StringVar(&o.ServedModel, "served-model", "", "model id to request from --endpoint (default: its first /v1/models entry)")
	f.StringVar(&o.Out, "out", "", "output folder (default: results/"+h.out+"-TIME)")
}

// measureFlags are what work and bench share: the engine flags (for the
// in-process boots), --cpuprofile and the targets.
type measureFlags struct {
	EngineFlags
	TargetFlags
	CPUProfile string
	engineSet  *pflag.FlagSet // the engine flags as declared, for their given values
}

func (o *measureFlags) add(f *pflag.FlagSet, h targetHelp) {
	o.EngineFlags = defaultEngineFlags()
	o.engineSet = o.EngineFlags.flagSet()
	f.AddFlagSet(o.engineSet)
	profileFlag(f, &o.CPUProfile)
	o.TargetFlags.add(f, h)
}

// specs are the command's targets (see parseTargets); spread makes the
// unnamed endpoints one target (work).
func (o *measureFlags) specs(spread bool) ([]targetSpec, error) {
	return parseTargets(&o.EngineFlags, given(o.engineSet), o.Boots, o.Endpoints, spread)
}

// joinSpec is a boot's spec: the command's engine flags, then its own.
func joinSpec(parent, own []string) string {
	return strings.Join(append(append([]string{}, parent...), own...), " ")
}
