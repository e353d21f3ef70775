package main

import (
	"fmt"
	"io"
	"net"
	"os"

	"jspark/agent/metrics"
	"jspark/agent/target"
	"jspark/backend/chat"
	"jspark/backend/engine"
	"jspark/backend/model"
	"jspark/backend/server"
)

// closers are what a command opened, closed on one call, the last opened
// first.
type closers []func()

func (c *closers) add(f func()) { *c = append(*c, f) }

func (c closers) close() {
	for i := len(c) - 1; i >= 0; i-- {
		c[i]()
	}
}

// openEngine loads the model and starts an engine; close releases all it
// opened. The server options it returns carry the chat template and
// reasoning format.
func openEngine(o *EngineFlags, log io.Writer) (_ *engine.Engine, _ server.Options, close func(), err error) {
	var cs closers
	defer func() {
		if err != nil {
			cs.close()
		}
	}()
	if o.ReasoningFormat != "auto" && o.ReasoningFormat != "none" && o.ReasoningFormat != "" {
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
	cs.add(func() { f.Close() })
	k, closeDevice, err := openDevice(o.Device, o.Threads)
	if err != nil {
		return nil, server.Options{}, nil, err
	}
	cs.add(closeDevice)
	m, err := model.Load(f, k)
	if err != nil {
		return nil, server.Options{}, nil, err
	}
	m.KVType = kvType
	tpl, err := o.chatTemplate(server.ChatTemplateOf(f))
	if err != nil {
		return nil, server.Options{}, nil, err
	}
	opt := o.engineOptions()
	opt.Log = log
	if o.Trace != "" {
		trace, err := os.Create(o.Trace)
		if err != nil {
			return nil, server.Options{}, nil, err
		}
		cs.add(func() { trace.Close() })
		opt.Trace = trace
	}
	e, err := engine.New(m, opt)
	if err != nil {
		return nil, server.Options{}, nil, err
	}
	cs.add(e.Close)
	fmt.Fprintln(log, "jspark", f.MemoryPlan(k))
	sopt := server.DefaultOptions()
	sopt.ChatTemplate, sopt.ReasoningFormat, sopt.ToolFormat = tpl, o.ReasoningFormat, o.ToolFormat
	return e, sopt, cs.close, nil
}

// chatTemplate is the template source for o: the file's when given, else the GGUF's.
func (o *EngineFlags) chatTemplate(fromGGUF string) (string, error) {
	if o.ChatTemplateFile == "" {
		return fromGGUF, nil
	}
	f, err := os.Open(o.ChatTemplateFile)
	if err != nil {
		return "", fmt.Errorf("--chat-template-file: %w", err)
	}
	defer f.Close()
	// Read at most one byte past the bound: /dev/zero or a FIFO must not
	// be read without end.
	b, err := io.ReadAll(io.LimitReader(f, maxTemplateBytes+1))
	if err != nil {
		return "", fmt.Errorf("--chat-template-file: %w", err)
	}
	if len(b) > maxTemplateBytes {
		return "", fmt.Errorf("--chat-template-file %s: larger than %d KiB (chat templates are tens of KiB)", o.ChatTemplateFile, maxTemplateBytes>>10)
	}
	return string(b), nil
}

// maxTemplateBytes bounds a --chat-template-file: the largest real
// template (ik_llama.cpp's models/templates) is under 30 KiB.
const maxTemplateBytes = 1 << 20

// newServer builds the HTTP front of e and says once when the model's
// template could not be used.
func newServer(e *engine.Engine, o server.Options, log io.Writer) *server.Server {
	srv := server.New(e, o)
	if err := srv.TemplateError(); err != nil {
		fmt.Fprintf(log, "jspark: warning: %v\n", err)
	}
	return srv
}

// inProcessBackend serves the engine on a loopback port: the runner and the
// bench measure what any client of the endpoint would see.
func inProcessBackend(ef *EngineFlags, log io.Writer) (target.Backend, func(), error) {
	e, sopt, closeEngine, err := openEngine(ef, log)
	if err != nil {
		return target.Backend{}, nil, err
	}
	srv := newServer(e, sopt, log)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		closeEngine()
		return target.Backend{}, nil, err
	}
	hs := srv.HTTPServer()
	go hs.Serve(ln)
	fmt.Fprintf(log, "jspark: engine %s (KV capacity %d tokens) at http://%s/v1\n", e.Options().ModelName, e.CapacityTokens(), ln.Addr())
	b := target.Backend{
		URL:   fmt.Sprintf("http://%s/v1", ln.Addr()),
		Model: e.Options().ModelName,
		Counter: metrics.Engine(func() metrics.Counters {
			s := e.Metrics().Snapshot()
			return metrics.Counters{Generation: float64(s.GenerationTokens), Running: float64(s.Running), Waiting: float64(s.Waiting),
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
