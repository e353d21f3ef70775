package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
)

// sse writes server-sent events in OpenAI's framings: chat and completions
// send "data: JSON\n\n" ending with "data: [DONE]"; responses send named
// events.
type sse struct {
	c       echo.Context
	started bool
}

func newSSE(c echo.Context) *sse { return &sse{c: c} }

// open sends the status and headers; the events follow.
func (s *sse) open() {
	if s.started {
		return
	}
	s.started = true
	w := s.c.Response()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	w.Flush()
}

// write sends b at once; an error (the client gone, or not reading within
// the write timeout) ends the request.
func (s *sse) write(b []byte) error {
	s.open()
	w := s.c.Response()
	if _, err := w.Write(b); err != nil {
		return err
	}
	if err := http.NewResponseController(w).Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

func (s *sse) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.write(append(append([]byte("data: "), b...), '\n', '\n'))
}

// event sends a named event, as the Responses API frames them:
// "event: NAME\ndata: JSON\n\n".
func (s *sse) event(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.write(append(append([]byte("event: "+name+"\ndata: "), b...), '\n', '\n'))
}

// fail ends a stream with err: as the response itself (a status and an
// error body) when the stream has not started, else as an error event.
func (s *sse) fail(err error) error {
	if !s.started {
		return err
	}
	s.sendError(err)
	return nil
}

func (s *sse) sendError(err error) {
	var ae *APIError
	if !errors.As(err, &ae) {
		ae = &APIError{Status: 500, Message: err.Error(), Type: "server_error"}
	}
	s.send(map[string]*APIError{"error": ae})
	s.done()
}

func (s *sse) done() { s.write([]byte("data: [DONE]\n\n")) }
