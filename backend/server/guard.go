package server

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
)

// MaxBody bounds a request body: a long agent conversation with its tools
// is a few MiB at most; anything larger gets 413, whether it says its
// length or comes chunked.
const MaxBody = 32 << 20

// DefaultBodyTimeout bounds how long a request body may take to arrive.
const DefaultBodyTimeout = 60 * time.Second

// bigBody is the size past which a request's garbage is handed back to the
// operating system when it ends: the Go runtime keeps freed heap for reuse,
// so one huge prompt would otherwise leave the process that large.
const bigBody = 4 << 20

// DefaultWriteTimeout bounds one write to a client: a stream nobody reads
// pauses its request (the engine stops decoding it once its events back
// up) and is aborted when a write has waited this long.
const DefaultWriteTimeout = 30 * time.Second

// writeDeadlines gives every write of a response (a stream's events, a
// JSON body, an error) its own deadline, so a client that stops reading
// cannot hold a request, its KV blocks and its slot for ever.
func (s *Server) writeDeadlines(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.opt.WriteTimeout > 0 {
			w := c.Response().Writer
			c.Response().Writer = &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: s.opt.WriteTimeout}
		}
		return next(c)
	}
}

// deadlineWriter sets the write deadline before each write and flush.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	w.rc.SetWriteDeadline(time.Now().Add(w.d)) // unsupported by test recorders: no deadline there
	return w.ResponseWriter.Write(b)
}

// FlushError flushes and says whether the bytes went out (echo's Flush
// drops the error).
func (w *deadlineWriter) FlushError() error {
	w.rc.SetWriteDeadline(time.Now().Add(w.d))
	return w.rc.Flush()
}

func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// readBody reads a request's whole body before the handler runs, so that no
// handler reads from the network: within the body timeout (a body trickled a
// byte at a time cannot hold a connection and a handler for ever; 408), at
// most MaxBody bytes (413), and valid UTF-8 (400: encoding/json would
// silently replace invalid bytes with U+FFFD, changing the prompt).
func (s *Server) readBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if req.Body == nil || req.Body == http.NoBody {
			return next(c)
		}
		if req.ContentLength > MaxBody {
			c.Response().Header().Set("Connection", "close") // the body is not read
			return tooLarge()
		}
		rc := http.NewResponseController(c.Response().Writer)
		if s.opt.BodyTimeout > 0 {
			rc.SetReadDeadline(time.Now().Add(s.opt.BodyTimeout)) // unsupported by test recorders: no deadline there
		}
		b, err := io.ReadAll(io.LimitReader(req.Body, MaxBody+1))
		if err != nil || len(b) > MaxBody {
			// The rest of the body may still be on its way, and net/http
			// reads it (before the answer, and again when it closes the
			// body) to reuse the connection: with no deadline, a body
			// trickled a byte a second held its 408 and its connection for
			// ever. Nothing more is read; the answer closes the connection.
			rc.SetReadDeadline(time.Unix(1, 0))
			c.Response().Header().Set("Connection", "close")
		} else {
			rc.SetReadDeadline(time.Time{}) // the connection stays open for the response (and the client's disconnect)
		}
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			return &APIError{Status: http.StatusRequestTimeout, Message: fmt.Sprintf("the request body did not arrive within %s", s.opt.BodyTimeout),
				Type: "invalid_request_error", Code: strp("body_timeout")}
		case err != nil:
			return badRequest("", "reading the request body: %v", err)
		case len(b) > MaxBody:
			return tooLarge()
		}
		if !utf8.Valid(b) {
			at := 0
			for at < len(b) {
				r, n := utf8.DecodeRune(b[at:])
				if r == utf8.RuneError && n <= 1 {
					break
				}
				at += n
			}
			return badRequest("", "the request body is not valid UTF-8 (byte %d is 0x%02x)", at, b[at])
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		c.Set(bodyKey, b)
		if len(b) >= bigBody {
			defer freeMemory()
		}
		return next(c)
	}
}

func tooLarge() *APIError {
	return &APIError{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("the request body is over %d MiB", MaxBody>>20),
		Type: "invalid_request_error", Code: strp("body_too_large")}
}

var freeing atomic.Bool

// freeMemory returns freed heap to the operating system, once at a time.
func freeMemory() {
	if freeing.CompareAndSwap(false, true) {
		go func() {
			defer freeing.Store(false)
			debug.FreeOSMemory()
		}()
	}
}

// auth checks "Authorization: Bearer KEY" when the server has a key. The
// scheme is required (a bare key is refused) and case-insensitive, as
// RFC 9110 has it; the key compares in constant time. /health is always
// open, /metrics when Options.MetricsOpen says so (vLLM leaves it open).
func (s *Server) auth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.opt.APIKey == "" || c.Path() == "/health" || (s.opt.MetricsOpen && c.Path() == "/metrics") {
			return next(c)
		}
		refuse := func(msg string) error {
			return &APIError{Status: http.StatusUnauthorized, Message: msg, Type: "authentication_error", Code: strp("invalid_api_key")}
		}
		h := c.Request().Header.Get("Authorization")
		if h == "" {
			return refuse("missing API key: send Authorization: Bearer KEY")
		}
		scheme, key, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return refuse("the Authorization header must be \"Bearer KEY\"")
		}
		if subtle.ConstantTimeCompare([]byte(strings.TrimSpace(key)), []byte(s.opt.APIKey)) != 1 {
			return refuse("incorrect API key")
		}
		return next(c)
	}
}

// fits rejects a prompt text that cannot fit the context from its length
// alone, before tokenizing it: tokenizing costs far more memory than the
// text (a 30 MB prompt took the process past 5 GiB). The bound does not
// rest on the vocabulary's longest token being short (tokenizer.MinTokens).
func (s *Server) fits(param, text string) error {
	ctx := s.e.Options().MaxContext
	if least := s.e.Model().Tok.MinTokens(text); least > ctx {
		e := badRequest(param, "this model's maximum context length is %d tokens; the prompt has at least %d tokens (%d bytes)",
			ctx, least, len(text))
		e.Code = strp("context_length_exceeded")
		return e
	}
	return nil
}

// maxTokens range-checks a request's output limit against the context, so
// that no later sum of lengths can overflow.
func (s *Server) maxTokens(param string, n int) error {
	if n <= 0 {
		return badRequest(param, "%s must be positive, got %d", param, n)
	}
	if ctx := s.e.Options().MaxContext; n > ctx {
		e := badRequest(param, "%s %d is more than this model's maximum context length of %d tokens", param, n, ctx)
		e.Code = strp("context_length_exceeded")
		return e
	}
	return nil
}
