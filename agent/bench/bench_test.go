package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// sseServer answers every request with the given events, sleeping before
// each; the client under test is the bench's own (the engine behind it is
// exercised by cmd/jspark's tests).
func sseServer(t *testing.T, pauses []time.Duration, events []string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i, e := range events {
			select {
			case <-time.After(pauses[i]):
			case <-r.Context().Done():
				return
			}
			fmt.Fprintf(w, "data: %s\n\n", e)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(s.Close)
	return s
}

func TestClientTimesEveryOutputEvent(t *testing.T) {
	ms := time.Millisecond
	s := sseServer(t, []time.Duration{0, 30 * ms, 0, 20 * ms, 0, 0},
		[]string{
			`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`, // no output: not an event
			`{"choices":[{"index":0,"delta":{"reasoning_content":"think"}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"bash"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"command\":\"ls\"}"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"content":"done"},"finish_reason":"tool_calls"}]}`,
			`{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":9,"prompt_tokens_details":{"cached_tokens":96}}}`,
		})
	c := &client{url: s.URL, http: s.Client(), zero: time.Now()}
	var rec Record
	n := 0
	if err := c.stream(context.Background(), "/chat/completions", chat("", "hi", 8), &rec, func(time.Time) { n++ }); err != nil {
		t.Fatal(err)
	}
	want := Record{PromptTokens: 100, CompletionTokens: 9, CachedTokens: 96, Finish: "tool_calls", Text: "done",
		Calls: []ToolCall{{ID: "c1", Name: "bash", Arguments: `{"command":"ls"}`}}}
	got := rec
	got.Sent, got.TTFT, got.End, got.Gaps = 0, 0, 0, nil
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("record (-want +got):\n%s", d)
	}
	// Four output events: reasoning, the call's name, its arguments, the text.
	if n != 4 || len(rec.Gaps) != 3 || len(rec.Events()) != 4 {
		t.Fatalf("%d events, gaps %v", n, rec.Gaps)
	}
	// The first event came 30 ms after the stream opened, the third gap
	// holds the 20 ms pause: as measured, not asserted in wall time, each
	// gap sums with the TTFT to the last event.
	ev := rec.Events()
	if math.Abs(ev[3]-(rec.Sent+rec.TTFT+rec.Gaps[0]+rec.Gaps[1]+rec.Gaps[2])) > 1e-9 || rec.End < ev[3] || rec.TTFT <= 0 {
		t.Errorf("events %v, sent %v, end %v", ev, rec.Sent, rec.End)
	}
}

func TestClientErrorsAndCut(t *testing.T) {
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(400)
		fmt.Fprint(w, `{"error":{"message":"max_tokens too large"}}`)
	}))
	defer bad.Close()
	c := &client{url: bad.URL, http: bad.Client(), zero: time.Now()}
	var rec Record
	if err := c.stream(context.Background(), "/chat/completions", chat("", "hi", 8), &rec, nil); err == nil ||
		rec.Error != `400 Bad Request: {"error":{"message":"max_tokens too large"}}` || rec.TTFT != -1 || rec.OK() {
		t.Errorf("err %v, record %+v", err, rec)
	}

	inStream := sseServer(t, []time.Duration{0}, []string{`{"error":{"message":"engine stopped"}}`})
	c = &client{url: inStream.URL, http: inStream.Client(), zero: time.Now()}
	rec = Record{}
	if err := c.stream(context.Background(), "/completions", map[string]any{}, &rec, nil); err == nil || rec.Error != "engine stopped" {
		t.Errorf("in-stream error: %v, %q", err, rec.Error)
	}

	slow := sseServer(t, []time.Duration{0, time.Hour}, []string{`{"choices":[{"text":"a"}]}`, `{"choices":[{"text":"b"}]}`})
	c = &client{url: slow.URL, http: slow.Client(), zero: time.Now()}
	ctx, cancel := context.WithCancel(context.Background())
	rec = Record{}
	err := c.stream(ctx, "/completions", map[string]any{}, &rec, func(time.Time) { cancel() })
	if err != nil || !rec.Cut || rec.Error != "" || rec.TTFT < 0 || rec.Text != "a" {
		t.Errorf("cut: %v %+v", err, rec)
	}
}

func TestPauseIsTheLargestGapDuringAdmission(t *testing.T) {
	// Incumbent events at 1.0, 1.1, 1.2, 2.0, 2.1; the arrival is sent at
	// 1.15 and answers at 1.9: the gap 1.2 → 2.0 is the pause.
	inc := Record{Sent: 0.5, TTFT: 0.5, Gaps: []float64{0.1, 0.1, 0.8, 0.1}, End: 2.2}
	arr := Record{Sent: 1.15, TTFT: 0.75, End: 2.0}
	if p := pause(inc, arr); math.Abs(p-0.8) > 1e-9 {
		t.Errorf("pause %v, want 0.8", p)
	}
	// A gap before the arrival's send does not count, however long.
	inc = Record{Sent: 0, TTFT: 0.1, Gaps: []float64{2.0, 0.1, 0.1}, End: 3}
	arr = Record{Sent: 2.15, TTFT: 0.1, End: 2.3}
	if p := pause(inc, arr); math.Abs(p-0.1) > 1e-9 {
		t.Errorf("pause %v, want 0.1", p)
	}
	// An incumbent with no event after the admission closes at its end.
	inc = Record{Sent: 0, TTFT: 0.1, Gaps: []float64{0.1}, End: 1.0, Cut: true}
	arr = Record{Sent: 0.15, TTFT: 0.7, End: 0.9}
	if p := pause(inc, arr); math.Abs(p-0.8) > 1e-9 {
		t.Errorf("open gap pause %v, want 0.8", p)
	}
}

func TestPercentileAsNumpy(t *testing.T) {
	xs := []float64{0.5, 0.1, 0.4, 0.2, 0.3}
	// numpy.percentile(xs, [50, 90, 99]) = 0.3, 0.46, 0.496
	for p, want := range map[float64]float64{50: 0.3, 90: 0.46, 99: 0.496, 0: 0.1, 100: 0.5} {
		if got := percentile(xs, p); math.Abs(got-want) > 1e-12 {
			t.Errorf("p%v = %v, want %v", p, got, want)
		}
	}
	if median([]float64{1, 2, 3, 10}) != 2.5 || !math.IsNaN(median(nil)) || secs(math.NaN()) != "–" {
		t.Error("median")
	}
	if count(65536) != "65,536" || count(999) != "999" || count(1000000) != "1,000,000" {
		t.Error("count")
	}
}

func TestParseLength(t *testing.T) {
	for s, want := range map[string]int{"4k": 4096, "64K": 65536, "512": 512, "1.5k": 1536} {
		if n, err := ParseLength(s); err != nil || n != want {
			t.Errorf("%s: %d %v", s, n, err)
		}
	}
	for _, s := range []string{"", "k", "-4k", "4 k", "4m"} {
		if _, err := ParseLength(s); err == nil {
			t.Errorf("%q parsed", s)
		}
	}
}

func TestPromptsAreTheSeedsTasks(t *testing.T) {
	p, err := LoadPrompts()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, x := range p.Tasks {
		ids = append(ids, x.Kind+":"+x.ID)
		if len(strings.Fields(x.Prompt)) < 40 {
			t.Errorf("%s: a real task, not %q", x.ID, x.Prompt)
		}
	}
	want := []string{"prose:prose-explanation", "prose:prose-memo", "prose:prose-story", "code:ttl_lru_cache", "code:interval_rooms", "code:structured_log_summary", "code:dependency_waves"}
	if d := cmp.Diff(want, ids); d != "" {
		t.Error(d)
	}
	if len(p.IDs) != 12 {
		t.Errorf("%d id prompts", len(p.IDs))
	}
	// Generated texts are the same for the same seed, so a repeat and a
	// changed suffix share their prefix.
	if words(50, 3) != words(50, 3) || words(50, 3) == words(50, 4) || !strings.HasSuffix(words(9, 1), ".") || logLines(3, 2) != logLines(3, 2) {
		t.Error("generators not deterministic")
	}
}

// oneRequestServer serves one request per connection as a keep-alive
// answer (no Connection: close) and closes the connection when the next
// request arrives on it, as a server that drops idle keep-alive
// connections (llama-server after 5 requests) does at the worst moment.
func oneRequestServer(t *testing.T) (addr string, served *atomic.Int32) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	served = new(atomic.Int32)
	body := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				req, err := http.ReadRequest(r)
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				served.Add(1)
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
				http.ReadRequest(r) // the next request on this connection: dropped unanswered
			}()
		}
	}()
	return "http://" + l.Addr().String(), served
}

// TestClientResendsOnADroppedKeepAlive: a request that went out on a
// reused connection the server then closed unanswered is sent again on a
// new one (it carries an Idempotency-Key), not lost to EOF.
func TestClientResendsOnADroppedKeepAlive(t *testing.T) {
	url, served := oneRequestServer(t)
	c := &client{url: url, http: &http.Client{}, zero: time.Now()}
	for i := range 4 {
		var rec Record
		if err := c.stream(context.Background(), "/chat/completions", chat("", "hi", 8), &rec, nil); err != nil || rec.Text != "ok" {
			t.Fatalf("request %d: %v (text %q)", i, err, rec.Text)
		}
	}
	if n := served.Load(); n != 4 {
		t.Fatalf("the server answered %d requests, want 4", n)
	}
}
