package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// smallBuffers gives accepted connections a small send buffer, so that a
// client that stops reading is felt after a few events, not megabytes.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}

// TestUnreadStreamPausesThenTimesOut: a client that opens a stream and
// stops reading pauses its request (the engine stops decoding it once its
// events back up, instead of generating on into memory), and the write
// timeout then aborts it and frees its blocks; the stream never claims an
// end.
func TestUnreadStreamPausesThenTimesOut(t *testing.T) {
	f := start(t, nil, nil)
	srv := httptest.NewUnstartedServer(New(f.e, serverOptions(func(o *Options) { o.WriteTimeout = 2 * time.Second })).Handler())
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	defer srv.Close()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const maxTokens = 8000
	generated := func() int64 { return f.e.Metrics().Snapshot().GenerationTokens }
	guard := time.Now().Add(60 * time.Second) // a hang guard, not a timing
	r := openUnread(t, f, conn, maxTokens, guard)
	paused := generated()
	if f.e.Metrics().Snapshot().Running == 0 || paused > 2000 {
		t.Fatalf("the unread stream was not paused: %d of %d tokens generated, running %d", paused, maxTokens, f.e.Metrics().Snapshot().Running)
	}
	// The write timeout aborts it: the request ends and its blocks come back.
	for {
		s := f.e.Metrics().Snapshot()
		if s.Running == 0 && s.FreeBlocks == int64(f.e.CapacityTokens()/16) {
			break
		}
		if time.Now().After(guard) {
			t.Fatalf("the paused stream was never aborted: %+v", s)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if g := generated(); g > paused+outboxSlack || g >= maxTokens {
		t.Fatalf("%d tokens generated after the pause at %d", g, paused)
	}
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	rest, _ := io.ReadAll(r)
	if strings.Contains(string(rest), "[DONE]") || strings.Contains(string(rest), `"finish_reason":"`) {
		t.Fatalf("an aborted stream claims an end: ...%s", rest[max(0, len(rest)-300):])
	}
}

// openUnread sends a streamed chat request of maxTokens on conn, reads its
// status line and then nothing, and returns once generation has stood
// still for half a second (paused), the request is gone, or guard passes.
func openUnread(t *testing.T, f *fixture, conn net.Conn, maxTokens int, guard time.Time) *bufio.Reader {
	t.Helper()
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":%d,"ignore_eos":true,"stream":true}`, maxTokens)
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	r := bufio.NewReaderSize(conn, 64)
	if line, err := r.ReadString('\n'); err != nil || !strings.Contains(line, "200") {
		t.Fatalf("status %q %v", line, err)
	}
	generated := func() int64 { return f.e.Metrics().Snapshot().GenerationTokens }
	for generated() == 0 && time.Now().Before(guard) {
		time.Sleep(5 * time.Millisecond)
	}
	last, still := generated(), 0
	for f.e.Metrics().Snapshot().Running > 0 && still < 25 && time.Now().Before(guard) {
		time.Sleep(20 * time.Millisecond)
		if g := generated(); g == last {
			still++
		} else {
			last, still = g, 0
		}
	}
	t.Logf("paused after %d tokens", last)
	return r
}

// outboxSlack is how far generation may move between the pause being seen
// and the abort (a step in flight).
const outboxSlack = 8

// TestNeverReadingClientPausesBeforeKernelBuffersFill: a client that opens
// a stream with the system's own socket buffers and reads nothing pauses
// its request after a few hundred tokens, on the bytes the server holds
// unsent, not once the kernel's send buffer (megabytes: 13,000 tokens and
// 48 s of decoding once) is full.
func TestNeverReadingClientPausesBeforeKernelBuffersFill(t *testing.T) {
	if underRace {
		// Slowed twenty-fold, the handler lags the engine by more events
		// than the bound allows for (3,059 tokens once); the pass without
		// the detector holds the bound.
		t.Skip("a count of tokens, not a race")
	}
	f := start(t, nil, nil)
	conn, err := net.Dial("tcp", f.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const maxTokens = 30000
	generated := func() int64 { return f.e.Metrics().Snapshot().GenerationTokens }
	guard := time.Now().Add(120 * time.Second) // a hang guard, not a timing
	openUnread(t, f, conn, maxTokens, guard)
	paused := generated()
	if f.e.Metrics().Snapshot().Running == 0 || paused > 2000 {
		t.Fatalf("a stream nobody reads ran to %d of %d tokens (running %d)", paused, maxTokens, f.e.Metrics().Snapshot().Running)
	}
	conn.Close() // the client goes: the request ends
	for f.e.Metrics().Snapshot().Running > 0 {
		if time.Now().After(guard) {
			t.Fatal("the paused stream outlived its client")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
