package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"jspark/backend/chat"
	"jspark/backend/engine"
	"jspark/backend/model"
	"jspark/backend/server"
)

// EngineFlags are the engine options every engine-running command takes.
type EngineFlags struct {
	Model    string
	Threads  int
	Device   string
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
	KVType     string
	CPUProfile string
	engine.Options
}

func addEngineFlags(cmd *cobra.Command, o *EngineFlags) {
	f := cmd.Flags()
	d := engine.DefaultOptions()
	o.Options = d // what no flag sets keeps the engine's default
	f.StringVar(&o.Model, "model", "", "GGUF model file (default: the embedded stories260K)")
	f.IntVar(&o.Threads, "threads", 0, "CPU threads (0: all)")
	f.StringVar(&o.Device, "device", "cpu", deviceFlagHelp)
	f.IntVar(&o.BlockSize, "kv-block", d.BlockSize, "tokens per KV block")
	f.Int64Var(&o.KVMemMiB, "kv-memory", 0, "KV cache MiB (0: a fifth of available memory, at most 4 GiB)")
	f.IntVar(&o.PrefillSolo, "prefill-solo", d.PrefillSolo, "prefill tokens per step when nothing else runs")
	f.IntVar(&o.PrefillMixed, "prefill-mixed", d.PrefillMixed, "prefill tokens per step, all prefills together, when anything else runs")
	f.IntVar(&o.MaxSeqs, "max-seqs", d.MaxSeqs, "requests running at once")
	f.IntVar(&o.MaxWaiting, "max-waiting", d.MaxWaiting, "requests in flight (queued or running) before 429")
	f.IntVar(&o.MaxContext, "ctx", 0, "context tokens per sequence (0: the model's, at least 32768)")
	f.IntVar(&o.Speculate, "speculate", d.Speculate, "n-gram draft tokens per decode step (0: off)")
	f.IntVar(&o.MaxStepMs, "max-step-ms", d.MaxStepMs, "longest a prefilling step should take, in ms: chunks are sized from the measured speed (0: off, token budgets only)")
	f.DurationVar(&o.SessionRetain, "session-retain", d.SessionRetain, "keep the cache of a session (X-Session-Id or user) active within this long ahead of idle ones' (0: off)")
	f.StringVar(&o.Trace, "trace", "", "write a per-step JSON-lines trace to this file")
	f.StringVar(&o.ChatTemplateFile, "chat-template-file", "", "Jinja chat template to use instead of the model's tokenizer.chat_template")
	f.StringVar(&o.ReasoningFormat, "reasoning-format", "auto", "auto: a thinking model's <think> block is returned as reasoning_content; none: left in content")
	f.StringVar(&o.ToolFormat, "tool-format", "", "the syntax of the model's tool calls, parsed and forced: "+toolFormats()+" (default: the chat template's)")
	f.StringVar(&o.KVType, "kv-type", "f32", "KV cache element type: f32 or f16 (half the memory)")
	f.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile (go tool pprof) to this file")
}

func toolFormats() string {
	var names []string
	for _, f := range chat.Formats {
		names = append(names, f.String())
	}
	return strings.Join(names, ", ")
}

// engineOptions are the engine's options as the flags set them.
func (o *EngineFlags) engineOptions() engine.Options {
	opt := o.Options
	if o.KVMemMiB > 0 { // the flag's 0 is the engine's Auto
		opt.KVMemory = o.KVMemMiB << 20
	}
	if opt.MaxContext == 0 {
		opt.MaxContext = engine.Auto
	}
	return opt
}

// chatTemplate is the template source for o: the file's when given, else the GGUF's.
func (o *EngineFlags) chatTemplate(fromGGUF string) (string, error) {
	if o.ChatTemplateFile == "" {
		return fromGGUF, nil
	}
	b, err := os.ReadFile(o.ChatTemplateFile)
	if err != nil {
		return "", fmt.Errorf("--chat-template-file: %w", err)
	}
	return string(b), nil
}

// newServer builds the HTTP front of e and says once when the model's
// template could not be used.
func newServer(e *engine.Engine, o server.Options, log io.Writer) *server.Server {
	srv := server.New(e, o)
	if err := srv.TemplateError(); err != nil {
		fmt.Fprintf(log, "jspark: warning: %v\n", err)
	}
	return srv
}

// openEngine loads the model and starts an engine; close releases both.
// The server options it returns carry the chat template and reasoning format.
func openEngine(o *EngineFlags, log io.Writer) (*engine.Engine, server.Options, func(), error) {
	switch o.ReasoningFormat {
	case "", "auto", "none":
	default:
		return nil, server.Options{}, nil, fmt.Errorf("--reasoning-format %q: want auto or none", o.ReasoningFormat)
	}
	if o.ToolFormat != "" {
		if _, err := chat.ParseFormat(o.ToolFormat); err != nil {
			return nil, server.Options{}, nil, fmt.Errorf("--tool-format: %w", err)
		}
	}
	kvType, err := parseKVType(o.KVType)
	if err != nil {
		return nil, server.Options{}, nil, err
	}
	f, err := model.OpenFile(o.Model)
	if err != nil {
		return nil, server.Options{}, nil, err
	}
	k, closeDevice, err := openDevice(o.Device, o.Threads)
	if err != nil {
		f.Close()
		return nil, server.Options{}, nil, err
	}
	m, err := model.Load(f, k)
	if err != nil {
		closeDevice()
		f.Close()
		return nil, server.Options{}, nil, err
	}
	m.KVType = kvType
	tpl, err := o.chatTemplate(server.ChatTemplateOf(f))
	if err != nil {
		closeDevice()
		f.Close()
		return nil, server.Options{}, nil, err
	}
	sopt := server.DefaultOptions()
	sopt.ChatTemplate, sopt.ReasoningFormat, sopt.ToolFormat = tpl, o.ReasoningFormat, o.ToolFormat
	opt := o.engineOptions()
	opt.Log = log
	var trace *os.File
	if o.Trace != "" {
		if trace, err = os.Create(o.Trace); err != nil {
			closeDevice()
			f.Close()
			return nil, server.Options{}, nil, err
		}
		opt.Trace = trace
	}
	e, err := engine.New(m, opt)
	if err != nil {
		closeDevice()
		f.Close()
		return nil, server.Options{}, nil, err
	}
	fmt.Fprintln(log, "jspark", f.MemoryPlan(k))
	return e, sopt, func() {
		e.Close()
		if trace != nil {
			trace.Close()
		}
		closeDevice()
		f.Close()
	}, nil
}

// ServeOptions are the flags of `jspark serve`.
type ServeOptions struct {
	EngineFlags
	APIKeyFlags
	Host             string
	Port             int
	ServedName       string
	MetricsOpen      bool
	BodyTimeout      time.Duration
	WriteTimeout     time.Duration
	MaxTokensDefault int
	ShutdownTimeout  time.Duration
	Seed             int64
}

func newServeCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &ServeOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the model over an OpenAI-compatible HTTP API",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			go func() { <-ctx.Done(); stop() }() // the drain starts; a second signal ends the process at once
			return runServe(ctx, o, stderr)
		},
	}
	addEngineFlags(cmd, &o.EngineFlags)
	f := cmd.Flags()
	f.StringVar(&o.Host, "host", "127.0.0.1", "address to bind (loopback by default)")
	f.IntVar(&o.Port, "port", 8080, "port (0: any free port)")
	addAPIKeyFlags(cmd, &o.APIKeyFlags, "require this bearer key")
	f.StringVar(&o.ServedName, "served-name", "", "model id clients use (default: the model's name)")
	f.IntVar(&o.MaxTokensDefault, "max-tokens-default", server.DefaultMaxTokens, "output tokens of a request that names no limit (capped by the context)")
	f.Int64Var(&o.Seed, "seed", -1, "sampling seed of a request that names none (-1: a fresh one per request, as OpenAI, vLLM and llama-server do)")
	f.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM or SIGINT, how long running requests may go on before they are ended with an error")
	f.BoolVar(&o.MetricsOpen, "metrics-open", false, "serve /metrics without the API key (as vLLM does), for scrapers that send none")
	f.DurationVar(&o.BodyTimeout, "body-timeout", server.DefaultBodyTimeout, "longest a request body may take to arrive (408 past it)")
	f.DurationVar(&o.WriteTimeout, "write-timeout", server.DefaultWriteTimeout, "longest one write to a client may wait (a stream nobody reads is paused, then aborted past it)")
	return cmd
}

func runServe(ctx context.Context, o *ServeOptions, log io.Writer) error {
	key, err := o.resolve(os.Getenv)
	if err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(o.CPUProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	// The port first: a port in use is said at once, before the model loads.
	ln, err := net.Listen("tcp", net.JoinHostPort(o.Host, fmt.Sprint(o.Port)))
	if err != nil {
		return err
	}
	defer ln.Close()
	e, sopt, closeEngine, err := openEngine(&o.EngineFlags, log)
	if err != nil {
		return err
	}
	defer closeEngine()
	sopt.APIKey, sopt.ServedName, sopt.Log = key, o.ServedName, log
	sopt.MetricsOpen, sopt.BodyTimeout, sopt.WriteTimeout, sopt.MaxTokensDefault = o.MetricsOpen, o.BodyTimeout, o.WriteTimeout, o.MaxTokensDefault
	if o.Seed >= 0 {
		seed := uint64(o.Seed)
		sopt.Seed = &seed
	}
	srv := newServer(e, sopt, log)
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 30 * time.Second}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		<-ctx.Done()
		drain(hs, srv, o.ShutdownTimeout, log)
	}()
	fmt.Fprintf(log, "jspark serve: ready at http://%s/v1 (model %q, template %s)\n", ln.Addr(), e.Options().ModelName, srv.Template().Name)
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-drained // Serve returns as soon as the drain starts; the engine closes after it
	return nil
}

// drain ends serving on a signal: it stops accepting, lets the requests in
// progress finish for up to timeout, then ends the rest with an error (a
// stream gets an error event, never a normal finish) and waits for their
// handlers to send it.
func drain(hs *http.Server, srv *server.Server, timeout time.Duration, log io.Writer) {
	fmt.Fprintf(log, "jspark serve: draining: %d requests running, up to %s\n", srv.Running(), timeout)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if hs.Shutdown(ctx) == nil {
		fmt.Fprintln(log, "jspark serve: drained")
		return
	}
	n := srv.Running()
	srv.Abort()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	hs.Shutdown(ctx2)
	hs.Close()
	fmt.Fprintf(log, "jspark serve: drained; %d requests still running at the timeout were ended with an error\n", n)
}
