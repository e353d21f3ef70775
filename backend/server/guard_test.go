package server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestTrickled100KBBodyIsAnswered408AndClosed: a body that declares 100 KB
// and sends a byte every few milliseconds gets its 408 at the body timeout
// and the connection is closed; net/http once read the rest of it (a
// hundred seconds here, days at a byte a second) before answering.
func TestTrickled100KBBodyIsAnswered408AndClosed(t *testing.T) {
	f := start(t, nil, func(o *Options) { o.BodyTimeout = 300 * time.Millisecond })
	conn, err := net.Dial("tcp", f.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const size = 100 << 10
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"messages\":[", size)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for range size {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if _, err := conn.Write([]byte{' '}); err != nil {
				return
			}
		}
	}()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second)) // a hang guard, not a timing
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 408 || !bytes.Contains(out, []byte(`"code":"body_timeout"`)) || !resp.Close {
		t.Fatalf("%d close=%v %s", resp.StatusCode, resp.Close, out)
	}
	if n, err := r.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the connection stays open after the 408: read %d, %v", n, err)
	}
}
