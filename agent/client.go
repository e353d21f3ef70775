package agent

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"

	"jspark/agent/record"
	"jspark/agent/target"
	"jspark/backend/usage"

	openai "github.com/sashabaranov/go-openai"
)

// sessionClient is a session's client of b: every request names the
// session (key), each its own Idempotency-Key, responses bounded, the
// first request's body kept and every body appended to bodies (a
// record.BodiesFile; "" keeps none).
func sessionClient(b target.Backend, key, bodies string) (*openai.Client, *payloadCapture) {
	base := ""
	if u, err := url.Parse(b.URL); err == nil {
		base = strings.TrimSuffix(u.Path, "/")
	}
	capture := &payloadCapture{next: sessionHeader{next: http.DefaultTransport, id: key}, base: base, bodies: bodies}
	cfg := openai.DefaultConfig(b.APIKey)
	cfg.BaseURL = b.URL
	cfg.HTTPClient = &http.Client{Transport: capture}
	return openai.NewClientWithConfig(cfg), capture
}

// payloadCapture keeps the body of the first request sent through it and
// appends every body to the session's bodies file, for a replay.
type payloadCapture struct {
	next   http.RoundTripper
	base   string // the base URL's path, which recorded paths are under
	bodies string // the bodies file; "" keeps none
	first  []byte
	err    error // the first body that could not be kept
}

func (p *payloadCapture) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil && (p.first == nil || p.bodies != "") {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		if p.first == nil {
			p.first = b
		}
		if p.bodies != "" && p.err == nil {
			p.err = record.AppendBody(p.bodies, strings.TrimPrefix(req.URL.Path, p.base), b)
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	resp, err := p.next.RoundTrip(req)
	return bound(resp), err
}

// sessionHeader names the session on every request (X-Session-Id: round/
// session), so a server that retains an active session's cache (jspark
// serve) keeps this one's prefix while its tools run.
type sessionHeader struct {
	next http.RoundTripper
	id   string
}

func (h sessionHeader) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context()) // a RoundTripper must not modify the request
	req.Header.Set("X-Session-Id", h.id)
	if req.Header.Get("Idempotency-Key") == "" {
		req.Header.Set("Idempotency-Key", target.IdempotencyKey())
	}
	return h.next.RoundTrip(req)
}

// jsparkTiming reads usage.jspark.timing from a chunk that carries usage:
// nil when the backend sends none (any endpoint but jspark serve).
func jsparkTiming(chunk []byte) (*usage.Timing, error) {
	var u struct {
		Usage struct {
			Jspark *struct {
				Timing *usage.Timing `json:"timing"`
			} `json:"jspark"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(chunk, &u); err != nil || u.Usage.Jspark == nil || u.Usage.Jspark.Timing == nil {
		return nil, err
	}
	t := u.Usage.Jspark.Timing
	if t.QueuedSec < 0 || t.PrefillSec < 0 || t.DecodeSec < 0 || t.PreemptedSec < 0 {
		return nil, invalid("usage.jspark.timing has a negative time: %+v", *t)
	}
	return t, nil
}
