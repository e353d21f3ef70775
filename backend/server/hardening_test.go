package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"jspark/backend/engine"
)

// Each test here is named after an attack on the server.

func TestMaxTokensTwoToThe63IsRangeChecked(t *testing.T) {
	f := start(t, func(o *engine.Options) { o.MaxContext = 64 }, nil)
	const huge = "9223372036854775807"
	for _, c := range []struct{ path, body, param string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":` + huge + `}`, "max_tokens"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":` + huge + `}`, "max_completion_tokens"},
		{"/v1/completions", `{"prompt":"x","max_tokens":` + huge + `}`, "max_tokens"},
		{"/v1/responses", `{"input":"x","max_output_tokens":` + huge + `}`, "max_output_tokens"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":65}`, "max_tokens"},
	} {
		resp, body := post(t, f.srv.URL+c.path, "", c.body)
		if resp.StatusCode != 400 || !strings.Contains(body, `is more than this model's maximum context length of 64 tokens","type":"invalid_request_error","param":"`+c.param+`","code":"context_length_exceeded"`) {
			t.Errorf("%s %s: %d %s", c.path, c.body, resp.StatusCode, body)
		}
	}
}

// A prompt far longer than the context is refused from its length before
// it is tokenized: the request allocates a few copies of its body, not the
// tokenizer's hundreds of bytes per input byte.
func TestHugePromptRejectedBeforeTokenizing(t *testing.T) {
	f := start(t, func(o *engine.Options) { o.MaxContext = 256 }, nil)
	text := strings.Repeat("Once upon a time there was a cat. ", 30000) // 1 MiB
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"` + text + `"}]}`},
		{"/v1/completions", `{"prompt":"` + text + `"}`},
		{"/v1/responses", `{"input":"` + text + `"}`},
		{"/tokenize", `{"prompt":"` + text + `"}`},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		resp, body := post(t, f.srv.URL+c.path, "", c.body)
		runtime.ReadMemStats(&after)
		if resp.StatusCode != 400 || !strings.Contains(body, `maximum context length is 256 tokens; the prompt has at least`) || !strings.Contains(body, `"code":"context_length_exceeded"`) {
			t.Errorf("%s: %d %.300s", c.path, resp.StatusCode, body)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
			t.Errorf("%s: a 1 MiB prompt allocated %d MiB", c.path, alloc>>20)
		}
	}
}

func TestKeyWithoutBearerIsRefused(t *testing.T) {
	f := start(t, nil, func(o *Options) { o.APIKey = "k" })
	for _, c := range []struct {
		header string
		status int
	}{{"k", 401}, {"Basic k", 401}, {"Bearer", 401}, {"Bearer kk", 401}, {"Bearer k", 200}, {"bearer k", 200}} {
		req, _ := http.NewRequest("GET", f.srv.URL+"/v1/models", nil)
		req.Header.Set("Authorization", c.header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("Authorization %q: %d, want %d", c.header, resp.StatusCode, c.status)
		}
	}
}

func TestMetricsNeedTheKeyUnlessOpen(t *testing.T) {
	for _, open := range []bool{false, true} {
		f := start(t, nil, func(o *Options) { o.APIKey, o.MetricsOpen = "k", open })
		for _, key := range []string{"", "k"} {
			req, _ := http.NewRequest("GET", f.srv.URL+"/metrics", nil)
			if key != "" {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if want := map[bool]int{true: 200, false: 401}[open || key != ""]; resp.StatusCode != want {
				t.Errorf("metrics open %v, key %q: %d, want %d", open, key, resp.StatusCode, want)
			}
		}
	}
}

func TestInvalidUTF8BodyIs400(t *testing.T) {
	f := start(t, nil, nil)
	body := "{\"messages\":[{\"role\":\"user\",\"content\":\"caf\xe9\"}],\"max_tokens\":2}"
	resp, out := post(t, f.srv.URL+"/v1/chat/completions", "", body)
	if resp.StatusCode != 400 || !strings.Contains(out, `not valid UTF-8 (byte 42 is 0xe9)`) {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
}

// A body of unknown length (chunked) past the cap is a 413 like a declared
// one, not a malformed-JSON 400.
func TestChunkedBodyOverCapIs413(t *testing.T) {
	f := start(t, nil, nil)
	body := io.MultiReader(strings.NewReader(`{"messages":[{"role":"user","content":"`), io.LimitReader(neverEnding('x'), MaxBody), strings.NewReader(`"}]}`))
	req, _ := http.NewRequest("POST", f.srv.URL+"/v1/chat/completions", body)
	if req.ContentLength != 0 {
		t.Fatal("the request is not chunked")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || !strings.Contains(string(out), `"code":"body_too_large"`) {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
}

type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// A body sent a byte at a time is cut at the body timeout with a 408.
func TestTrickledBodyTimesOut(t *testing.T) {
	f := start(t, nil, func(o *Options) { o.BodyTimeout = 300 * time.Millisecond })
	conn, err := net.Dial("tcp", f.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"messages":[{"role":"user","content":"x"}],"max_tokens":2}`
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; i < len(body); i++ {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := conn.Write([]byte{body[i]}); err != nil {
				return
			}
		}
	}()
	conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // a hang guard, not a timing
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 408 || !bytes.Contains(out, []byte(`the request body did not arrive within 300ms`)) {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
}

// A request that names no output limit (as Codex sends them) stops at
// --max-tokens-default, or earlier where the context leaves less room.
func TestNoLimitIsCappedByMaxTokensDefault(t *testing.T) {
	f := start(t, func(o *engine.Options) { o.MaxContext = 40 }, func(o *Options) { o.MaxTokensDefault = 7 })
	for _, c := range []struct {
		path, body, want string
	}{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"ignore_eos":true}`, `"finish_reason":"length"}],"usage":{"prompt_tokens":17,"completion_tokens":7,`},
		{"/v1/responses", `{"input":"x","ignore_eos":true}`, `"output_tokens":7,`},
		// 40 - 37 prompt tokens leave 3.
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x x x x x x x x x x x"}],"ignore_eos":true}`, `"finish_reason":"length"}],"usage":{"prompt_tokens":37,"completion_tokens":3,`},
	} {
		resp, body := post(t, f.srv.URL+c.path, "", c.body)
		if resp.StatusCode != 200 || !strings.Contains(body, c.want) {
			t.Errorf("%s %s: %d %s", c.path, c.body, resp.StatusCode, body)
		}
	}
}

// TestAbortNeverClaimsANormalEnd: generations cut by Abort (a drain out of
// time) end with an error in every shape, never a finish reason, and later
// requests are refused.
func TestAbortNeverClaimsANormalEnd(t *testing.T) {
	f := start(t, nil, nil)
	s := New(f.e, DefaultOptions())
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	long := `"max_tokens":20000,"ignore_eos":true`
	type answer struct {
		status int
		body   string
	}
	bodies := map[string]string{
		"/v1/chat/completions stream": `{"messages":[{"role":"user","content":"x"}],"stream":true,` + long + `}`,
		"/v1/chat/completions":        `{"messages":[{"role":"user","content":"x"}],` + long + `}`,
		"/v1/responses stream":        `{"input":"x","stream":true,` + long + `}`,
		"/v1/completions stream":      `{"prompt":"x","stream":true,` + long + `}`,
	}
	got := map[string]chan answer{}
	for name, body := range bodies {
		got[name] = make(chan answer, 1)
		go func() {
			req, _ := http.NewRequest("POST", srv.URL+strings.Fields(name)[0], strings.NewReader(body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				got[name] <- answer{body: err.Error()}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got[name] <- answer{resp.StatusCode, string(b)}
		}()
	}
	guard := time.Now().Add(30 * time.Second) // a hang guard, not a timing
	for s.Running() < len(bodies) || f.e.Metrics().Snapshot().Running < int64(len(bodies)) {
		if time.Now().After(guard) {
			t.Fatalf("%d generations running", s.Running())
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.Abort()
	for name, ch := range got {
		a := <-ch
		switch {
		case strings.Contains(a.body, `finish_reason":"`) || strings.Contains(a.body, `"type":"response.completed"`) || strings.Contains(a.body, `"type":"response.incomplete"`):
			t.Errorf("%s claims an end: ...%s", name, a.body[max(0, len(a.body)-400):])
		case !strings.Contains(a.body, `"server_shutdown"`):
			t.Errorf("%s: %d ...%s", name, a.status, a.body[max(0, len(a.body)-400):])
		case !strings.Contains(name, "stream") && a.status != 503:
			t.Errorf("%s: status %d", name, a.status)
		}
	}
	if resp, body := post(t, srv.URL+"/v1/completions", "", `{"prompt":"x","max_tokens":2}`); resp.StatusCode != 503 {
		t.Fatalf("after Abort: %d %s", resp.StatusCode, body)
	}
}

// TestStoryEndsByItself: the embedded model ends a story with BOS (its
// llama2.c training never wrote EOS); a greedy reply stops there with
// finish_reason stop, well inside the limit, in chat and completions.
func TestStoryEndsByItself(t *testing.T) {
	f := start(t, nil, nil)
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Once upon a time"}],"temperature":0,"max_tokens":1000}`},
		{"/v1/completions", `{"prompt":"Once upon a time, there was a little girl","temperature":0,"max_tokens":1000}`},
	} {
		resp, body := post(t, f.srv.URL+c.path, "", c.body)
		var out struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(body), &out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 {
			t.Fatalf("%s: %d %s (%v)", c.path, resp.StatusCode, body, err)
		}
		if out.Choices[0].FinishReason != "stop" || out.Usage.CompletionTokens >= 1000 || out.Usage.CompletionTokens < 10 {
			t.Errorf("%s: finish %q after %d tokens, want stop by itself", c.path, out.Choices[0].FinishReason, out.Usage.CompletionTokens)
		}
		t.Logf("%s: %s after %d tokens", c.path, out.Choices[0].FinishReason, out.Usage.CompletionTokens)
	}
}
