package server

import (
	"context"
	"net"
	"net/http"
	"time"
)

// UnsentWindow bounds the bytes a connection may hold written but not yet
// sent to its client (the kernel counts them; TCP_NOTSENT_LOWAT on Linux).
// Past it a write waits, the handler stops taking its request's events and
// the engine pauses the request a window of events later: a stream whose
// client reads nothing costs a few hundred tokens, not the megabytes of an
// autotuned send buffer (7,000 to 13,000 tokens and up to 48 s of decoding
// once), and the write timeout then ends it. A client that reads keeps the
// window drained: an event is a few hundred bytes.
const UnsentWindow = 16 << 10

// ConnContext prepares each connection of an http.Server that serves the
// handler (http.Server.ConnContext): it bounds what the connection holds
// unsent to UnsentWindow where the system can (Linux), and leaves the
// connection as it is elsewhere.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	boundUnsent(c, UnsentWindow)
	return ctx
}

// HTTPServer is an http.Server for the handler: each connection prepared
// by ConnContext, and request headers due within 30 s (the body has its
// own timeout, Options.BodyTimeout).
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 30 * time.Second, ConnContext: ConnContext}
}
