// Package server serves an engine over an OpenAI-compatible HTTP API:
// chat and text completions (streamed or not, with tools, constrained
// decoding and usage), models, health, Prometheus metrics and tokenization.
package server

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"jspark/backend/chat"
	"jspark/backend/engine"
	"jspark/backend/gguf"
	"jspark/backend/tokenizer"
)

// Options configure a server. New takes them exactly as given: start from
// DefaultOptions and change what differs. A zero limit or timeout is none.
type Options struct {
	APIKey     string // when set, requests need "Authorization: Bearer KEY"
	ServedName string // the model id clients name (empty: the engine's model name)
	// ChatTemplate is the GGUF's tokenizer.chat_template (or a file's),
	// rendered as Jinja; empty, or one that does not compile, means a
	// built-in (TemplateError says why). The server keeps the compiled
	// template, not this source.
	ChatTemplate string
	// ReasoningFormat says what becomes of a thinking model's <think> block:
	// "auto" (or empty) returns it as reasoning_content when the template
	// writes such blocks, as llama.cpp does; "none" leaves it in content.
	ReasoningFormat string
	// ToolFormat forces the syntax of the model's tool calls (a
	// chat.Format's name, --tool-format); empty takes the template's.
	ToolFormat string
	// MaxTokensDefault caps the output of a chat or Responses request that
	// names no limit (Codex sends none), within what the context leaves;
	// 0 is no cap but the context.
	MaxTokensDefault int
	// MetricsOpen serves /metrics without the key (as vLLM does), for
	// scrapers that send none.
	MetricsOpen bool
	// BodyTimeout bounds the arrival of a request body (408 past it);
	// 0 or negative: none.
	BodyTimeout time.Duration
	// WriteTimeout bounds one write to a client (a stream's event, a body):
	// past it the request is aborted; 0 or negative: none.
	WriteTimeout time.Duration
	// Seed is the sampling seed of a request that names none; nil draws a
	// fresh one per request, so unseeded requests at a temperature differ,
	// as they do with OpenAI, vLLM and llama-server.
	Seed *uint64
	// IdleFree is how long the server waits, once no request is in
	// progress, before it hands the memory its requests freed back to the
	// system (a forced collection); 0 or negative: never, as the Go
	// runtime decides.
	IdleFree time.Duration
	// Log receives what a request's answer does not say (tools a Responses
	// request offers that this server cannot run); nil discards it.
	Log io.Writer
}

// DefaultOptions are the server's defaults, in one place: what `jspark
// serve`'s flags start from and what a library user or a test starts from.
func DefaultOptions() Options {
	return Options{
		ReasoningFormat:  "auto",
		MaxTokensDefault: DefaultMaxTokens,
		BodyTimeout:      DefaultBodyTimeout,
		WriteTimeout:     DefaultWriteTimeout,
		IdleFree:         DefaultIdleFree,
	}
}

// seed is the seed of a request that names none.
func (s *Server) seed() uint64 {
	if s.opt.Seed != nil {
		return *s.opt.Seed
	}
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// DefaultMaxTokens is the output limit of a request that names none: a
// model that never ends its reply stops there, not at the context's end
// minutes later.
const DefaultMaxTokens = 4096

// Server is the HTTP front of one engine.
type Server struct {
	e   *engine.Engine
	opt Options
	tpl chat.Template
	// format is the syntax the model's tool calls are parsed and forced
	// in; preserved, its markers that the vocabulary holds as control
	// tokens, which the output must show for the parser to see them.
	format    chat.Format
	preserved map[int]bool
	tplErr    error
	echo      *echo.Echo
	// stop ends the generations still running when a drain runs out of
	// time (Abort); running counts them.
	stop    context.Context
	abort   context.CancelFunc
	running atomic.Int64
	idle    idle
}

// ChatTemplateOf takes tokenizer.chat_template out of a GGUF file: the
// file no longer holds it, and New keeps only what it compiles it to, so a
// model file's huge template (50 MB, refused) is not kept for the life of
// the process.
func ChatTemplateOf(f *gguf.File) string {
	v, _ := f.Take("tokenizer.chat_template")
	s, _ := v.(string)
	return s
}

// New builds a server for e with opt as given (see Options).
func New(e *engine.Engine, opt Options) *Server {
	if opt.ServedName == "" {
		opt.ServedName = cmp.Or(e.Options().ModelName, "jspark")
	}
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	tok := e.Model().Tok
	s := &Server{e: e, opt: opt}
	tok.MinTokens("") // its tables are made once, here, not in a request
	s.stop, s.abort = context.WithCancel(context.Background())
	s.idle.after = opt.IdleFree
	s.tpl, s.tplErr = chat.Load(opt.ChatTemplate, chat.Special{BOS: tok.Text(tok.BOS), EOS: tok.Text(tok.EOS)})
	s.format = s.tpl.Format()
	if f, err := chat.ParseFormat(opt.ToolFormat); opt.ToolFormat != "" && err == nil {
		s.format = f
	}
	s.preserved = preservedIDs(tok, s.format)
	if len(opt.ChatTemplate) >= bigBody {
		defer freeMemory() // what a huge source cost goes back to the system, as a huge body's does
	}
	s.opt.ChatTemplate = "" // compiled into s.tpl, or refused: the source is not kept
	ec := echo.New()
	ec.HideBanner, ec.HidePort = true, true
	ec.HTTPErrorHandler = s.handleError
	ec.Use(s.trackIdle, s.writeDeadlines, s.auth, s.readBody)
	ec.POST("/v1/chat/completions", s.chatCompletions)
	ec.POST("/v1/completions", s.completions)
	ec.POST("/v1/responses", s.responses)
	ec.GET("/v1/models", s.models)
	ec.GET("/v1/models/:id", s.model)
	ec.GET("/health", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	ec.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(e.Metrics().Registry, promhttp.HandlerOpts{})))
	ec.POST("/tokenize", s.tokenize)
	ec.POST("/detokenize", s.detokenize)
	s.echo = ec
	return s
}

// Running is the number of generations in progress.
func (s *Server) Running() int { return int(s.running.Load()) }

// Abort ends every generation in progress with an error (a stream gets an
// error event, never a finish that claims a normal end) and every later one
// at once: the last step of a drain whose time ran out.
func (s *Server) Abort() { s.abort() }

// errShuttingDown is how a generation cut by Abort ends.
var errShuttingDown = &APIError{Status: http.StatusServiceUnavailable, Message: "the server is shutting down; the response was cut before its end",
	Type: "server_error", Code: strp("server_shutdown")}

// Handler is the HTTP handler.
func (s *Server) Handler() http.Handler { return s.echo }

// callFormat is the syntax forced calls are written in: the model's, or,
// for a template of no known syntax, the built-ins' Hermes tags when the
// template writes them and a bare call object (Llama 3.1's form) when not,
// both of which FormatAuto reads.
func (s *Server) callFormat() chat.Format {
	if s.format != chat.FormatAuto {
		return s.format
	}
	if open, _, _ := s.tpl.CallDelims(); open == "" {
		return chat.FormatLlama
	}
	return chat.FormatHermes
}

// ToolFormat is the tool-call syntax in use.
func (s *Server) ToolFormat() chat.Format { return s.format }

// preservedIDs are the control tokens whose texts are format's markers.
func preservedIDs(tok *tokenizer.Tokenizer, format chat.Format) map[int]bool {
	ids := map[int]bool{}
	for _, m := range format.Preserved() {
		if id, ok := tok.ID(m); ok && tok.IsControl(id) && !tok.EOG[id] {
			ids[id] = true
		}
	}
	return ids
}

// Template is the chat template in use.
func (s *Server) Template() chat.Template { return s.tpl }

// TemplateError says why the model's own template is not in use, or nil.
func (s *Server) TemplateError() error { return s.tplErr }

// chatPrompt renders messages and tokenizes them. A template that writes
// the BOS text itself loses it here when the tokenizer adds BOS anyway, so
// the prompt never starts with two.
func (s *Server) chatPrompt(msgs []chat.Message, tools []chat.Tool, addGeneration bool, vars chat.Vars) (ids []int, text string, err error) {
	text, err = s.tpl.Render(msgs, tools, addGeneration, vars)
	if err != nil {
		return nil, "", err
	}
	tok := s.e.Model().Tok
	if bos := tok.Text(tok.BOS); tok.AddBOS && bos != "" {
		text = strings.TrimPrefix(text, bos)
	}
	if err := s.fits("messages", text); err != nil {
		return nil, "", err
	}
	return tok.Encode(text, true, true), text, nil
}

// reasons reports whether outputs get their reasoning split off.
func (s *Server) reasons() bool { return s.opt.ReasoningFormat != "none" && s.tpl.Thinks() }

// APIError is an OpenAI-style error.
type APIError struct {
	Status  int     `json:"-"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
	// RetryAfter, when set, becomes a Retry-After header (seconds).
	RetryAfter int `json:"-"`
}

func (e *APIError) Error() string { return e.Message }

// promptError is a 400 for a conversation that did not render, or the
// bound's own error. It names the field the renderer's error starts with
// (tools[0].function.parameters, chat_template_kwargs.x), else messages.
func promptError(err error) error {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae
	}
	msg := err.Error()
	param := "messages"
	for _, field := range []string{"tools[", "chat_template_kwargs", "messages["} {
		if strings.HasPrefix(msg, field) {
			param, _, _ = strings.Cut(msg, ":")
			param, _, _ = strings.Cut(param, " ")
		}
	}
	return badRequest(param, "%v", err)
}

func badRequest(param, format string, args ...any) *APIError {
	e := &APIError{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...), Type: "invalid_request_error"}
	if param != "" {
		e.Param = &param
	}
	return e
}

func strp(s string) *string { return &s }

func (s *Server) handleError(err error, c echo.Context) {
	refused(c.Request().Context(), err)
	if c.Response().Committed {
		return
	}
	var ae *APIError
	var he *echo.HTTPError
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &he):
		ae = &APIError{Status: he.Code, Message: fmt.Sprint(he.Message), Type: "invalid_request_error"}
		switch he.Code {
		case http.StatusNotFound:
			ae.Type, ae.Code = "not_found_error", strp("not_found")
		}
	default:
		ae = &APIError{Status: http.StatusInternalServerError, Message: err.Error(), Type: "server_error"}
	}
	if ae.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", fmt.Sprint(ae.RetryAfter))
	}
	c.JSON(ae.Status, map[string]*APIError{"error": ae})
}

func (s *Server) checkModel(name string) error {
	if name == "" || name == s.opt.ServedName {
		return nil
	}
	return &APIError{Status: http.StatusNotFound, Message: fmt.Sprintf("the model %q does not exist; this server serves %q", name, s.opt.ServedName),
		Type: "invalid_request_error", Param: strp("model"), Code: strp("model_not_found")}
}

func (s *Server) modelObject() map[string]any {
	return map[string]any{
		"id": s.opt.ServedName, "object": "model", "created": 0, "owned_by": "jspark",
		"max_model_len": s.e.Options().MaxContext,
	}
}

func (s *Server) models(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"object": "list", "data": []map[string]any{s.modelObject()}})
}

// model is GET /v1/models/{id}.
func (s *Server) model(c echo.Context) error {
	id := c.Param("id")
	if id == "" {
		return s.models(c)
	}
	if err := s.checkModel(id); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.modelObject())
}

func (s *Server) tokenize(c echo.Context) error {
	var req struct {
		Model       string         `json:"model"`
		Prompt      *string        `json:"prompt"`
		Messages    []chat.Message `json:"messages"`
		Tools       []chat.Tool    `json:"tools"`
		AddSpecial  *bool          `json:"add_special_tokens"`
		AddGenerate *bool          `json:"add_generation_prompt"`
		Kwargs      chat.Vars      `json:"chat_template_kwargs"`
	}
	if err := decode(c, &req); err != nil {
		return err
	}
	if err := s.checkModel(req.Model); err != nil {
		return err
	}
	tok := s.e.Model().Tok
	var ids []int
	switch {
	case req.Prompt != nil:
		if err := s.fits("prompt", *req.Prompt); err != nil {
			return err
		}
		ids = tok.Encode(*req.Prompt, req.AddSpecial == nil || *req.AddSpecial, true)
	case len(req.Messages) > 0:
		if err := checkArguments(req.Messages); err != nil {
			return err
		}
		var err error
		if ids, _, err = s.chatPrompt(req.Messages, req.Tools, req.AddGenerate == nil || *req.AddGenerate, req.Kwargs); err != nil {
			return promptError(err)
		}
	default:
		return badRequest("prompt", "give prompt or messages")
	}
	if ids == nil {
		ids = []int{}
	}
	return c.JSON(http.StatusOK, map[string]any{"tokens": ids, "count": len(ids), "max_model_len": s.e.Options().MaxContext})
}

func (s *Server) detokenize(c echo.Context) error {
	var req struct {
		Tokens []int `json:"tokens"`
	}
	if err := decode(c, &req); err != nil {
		return err
	}
	tok := s.e.Model().Tok
	for i, t := range req.Tokens {
		if t < 0 || t >= tok.VocabSize() {
			return badRequest("tokens", "tokens[%d] = %d is outside the vocabulary of %d", i, t, tok.VocabSize())
		}
	}
	return c.JSON(http.StatusOK, map[string]string{"prompt": tok.Decode(req.Tokens, false)})
}

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func now() int64 { return time.Now().Unix() }
