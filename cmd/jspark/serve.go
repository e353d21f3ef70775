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
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"jspark/backend/server"
)

// ServeOptions are the flags of `jspark serve`.
type ServeOptions struct {
	EngineFlags
	APIKeyFlags
	CPUProfile       string
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
	o := &ServeOptions{EngineFlags: defaultEngineFlags()}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the model over an OpenAI-compatible HTTP API",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			go func() { <-ctx.Done(); stop() }() // the drain starts; a second signal ends the process at once
			return profiled(o.CPUProfile, func() error { return runServe(ctx, o, stderr) })
		},
	}
	f := cmd.Flags()
	d := server.DefaultOptions()
	f.AddFlagSet(o.EngineFlags.flagSet())
	profileFlag(f, &o.CPUProfile)
	f.StringVar(&o.Host, "host", "127.0.0.1", "address to bind (loopback by default)")
	f.IntVar(&o.Port, "port", 8080, "port (0: any free port)")
	o.APIKeyFlags.add(f, "require this bearer key")
	f.StringVar(&o.ServedName, "served-name", "", "model id clients use (default: the model's name)")
	f.IntVar(&o.MaxTokensDefault, "max-tokens-default", d.MaxTokensDefault, "output tokens of a request that names no limit (capped by the context)")
	f.Int64Var(&o.Seed, "seed", -1, "sampling seed of a request that names none (-1: a fresh one per request, as OpenAI, vLLM and llama-server do)")
	f.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM or SIGINT, how long running requests may go on before they are ended with an error")
	f.BoolVar(&o.MetricsOpen, "metrics-open", false, "serve /metrics without the API key (as vLLM does), for scrapers that send none")
	f.DurationVar(&o.BodyTimeout, "body-timeout", d.BodyTimeout, "longest a request body may take to arrive (408 past it)")
	f.DurationVar(&o.WriteTimeout, "write-timeout", d.WriteTimeout, "longest one write to a client may wait (a stream nobody reads is paused, then aborted past it)")
	return cmd
}

func runServe(ctx context.Context, o *ServeOptions, log io.Writer) error {
	key, err := o.resolve(os.Getenv)
	if err != nil {
		return err
	}
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
	hs := srv.HTTPServer()
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
