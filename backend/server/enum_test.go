// These run at full scale (an enum of 100,000 and 800,000 values), which the
// race detector slows past the 2 s compile budget: the plain run covers them.

//go:build !race

package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sashabaranov/go-openai"
)

// enumBody is a chat request whose response_format is one string enum of
// n values of about 12 bytes each.
func enumBody(n int) string {
	var b strings.Builder
	b.WriteString(`{"messages":[{"role":"user","content":"Pick one"}],"max_tokens":8,"response_format":{"type":"json_schema","json_schema":{"name":"pick","schema":{"enum":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"value-%06d"`, i)
	}
	b.WriteString(`]}}}}`)
	return b.String()
}

// TestHugeEnumDoesNotStallOtherClients: a response_format enum of 100,000
// values (1.3 MB; it once held the engine for 18.5 s) is compiled in its
// request's handler, outside the engine loop, and decoded with cheap masks:
// a stream running beside it never waits on it. Measured side by side: a
// stall would make the stream's largest gap most of the huge request's own
// time and many times its gap alone; it shares steps with the huge request
// (whose masks cost some milliseconds), so a gap of a few steps is normal.
func TestHugeEnumDoesNotStallOtherClients(t *testing.T) {
	f := start(t, nil, nil)
	body := enumBody(100000)
	// A story stream that cannot end by itself, ended below.
	req, _ := http.NewRequest("POST", f.srv.URL+"/v1/chat/completions", strings.NewReader(
		`{"messages":[{"role":"user","content":"Tell me a story"}],"stream":true,"ignore_eos":true,"max_tokens":20000}`))
	sresp, err := http.DefaultClient.Do(req)
	if err != nil || sresp.StatusCode != 200 {
		t.Fatalf("stream: %v", err)
	}
	defer sresp.Body.Close()
	lines := bufio.NewReader(sresp.Body)
	if _, err := lines.ReadString('\n'); err != nil { // the role chunk: the stream runs
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		maxGap  time.Duration
		stopped bool
	)
	go func() {
		last := time.Now()
		for {
			_, err := lines.ReadString('\n')
			now := time.Now()
			mu.Lock()
			if stopped || err != nil {
				mu.Unlock()
				return
			}
			maxGap = max(maxGap, now.Sub(last))
			mu.Unlock()
			last = now
		}
	}()
	// The stream alone first: its largest gap on this machine now.
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	alone := maxGap
	maxGap = 0
	mu.Unlock()
	began := time.Now()
	resp, out := post(t, f.srv.URL+"/v1/chat/completions", "", body)
	huge := time.Since(began)
	mu.Lock()
	stopped = true
	gap := maxGap
	mu.Unlock()
	if resp.StatusCode != 200 || !strings.Contains(out, `"content":"\"value-`) {
		t.Fatalf("huge enum: %d %.300s", resp.StatusCode, out)
	}
	t.Logf("huge enum request %v; the other stream's largest gap %v beside it, %v alone", huge, gap, alone)
	if gap > huge*4/5 && gap > 5*alone {
		t.Errorf("the other stream waited %v while a %v enum request ran (%v alone): it was stalled by it", gap, huge, alone)
	}
}

// TestEnumPastTheBudgetIs400: a schema past the compile budget (an enum of
// more than 8 MiB) is refused with a 400 naming response_format, before it
// reaches the engine; the server goes on serving.
func TestEnumPastTheBudgetIs400(t *testing.T) {
	f := start(t, nil, nil)
	resp, out := post(t, f.srv.URL+"/v1/chat/completions", "", enumBody(800000))
	if resp.StatusCode != 400 || !strings.Contains(out, `"param":"response_format"`) || !strings.Contains(out, "too large to compile") {
		t.Fatalf("%d %.300s", resp.StatusCode, out)
	}
	_, err := f.client.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "x"}}, MaxTokens: 3})
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("after the refusal: %v", err)
	}
}
