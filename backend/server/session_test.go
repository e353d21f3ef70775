package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"jspark/backend/usage"
)

// postWith is post with extra headers.
func postWith(t *testing.T, url string, header map[string]string, body string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Usage struct {
			Jspark *usage.Jspark `json:"jspark"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Usage.Jspark == nil || resp.StatusCode != 200 {
		t.Fatalf("%s: status %d, no usage.jspark (%v)", url, resp.StatusCode, err)
	}
	return r.Usage.Jspark.Session
}

// TestSessionKey: the engine keeps a request's blocks under the
// X-Session-Id header, else the body's user field: the session comes back
// in usage.jspark, and a repeat in the same session hits the blocks the
// engine kept for it (jspark_session_kept_hits_total).
func TestSessionKey(t *testing.T) {
	f := start(t, nil, nil)
	long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 12)
	chatBody := func(user string) string {
		b, _ := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "user", "content": long}},
			"max_tokens": 2, "temperature": 0, "user": user})
		return string(b)
	}
	kept := func() int64 { return f.e.Metrics().Snapshot().SessionKeptHits }

	if got := postWith(t, f.srv.URL+"/v1/chat/completions", nil, chatBody("")); got != "" {
		t.Fatalf("no header, no user: session %q", got)
	}
	before := kept()
	hdr := map[string]string{"X-Session-Id": "r1/s0"}
	for i := range 2 {
		if got := postWith(t, f.srv.URL+"/v1/chat/completions", hdr, chatBody("alice")); got != "r1/s0" {
			t.Fatalf("request %d with X-Session-Id r1/s0 and user alice: session %q", i, got)
		}
	}
	if kept() <= before {
		t.Fatalf("the repeat in session r1/s0 hit no kept block (%d → %d)", before, kept())
	}
	for path, body := range map[string]string{
		"/v1/chat/completions": chatBody("alice"),
		"/v1/completions":      `{"prompt":"Once upon a time","max_tokens":2,"temperature":0,"user":"bob"}`,
		"/v1/responses":        `{"input":"Once upon a time","max_output_tokens":2,"temperature":0,"user":"carol"}`,
	} {
		var want struct{ User string }
		json.Unmarshal([]byte(body), &want)
		if got := postWith(t, f.srv.URL+path, nil, body); got != want.User {
			t.Errorf("%s with user %q and no header: session %q", path, want.User, got)
		}
		if got := postWith(t, f.srv.URL+path, hdr, body); got != "r1/s0" {
			t.Errorf("%s with X-Session-Id r1/s0: session %q", path, got)
		}
	}
}
