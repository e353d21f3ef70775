package server

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// padded is body (an object) with white space after its first member so
// that it is size bytes long: big, yet cheap to decode.
func padded(body string, size int) string {
	at := strings.Index(body, ",")
	return body[:at+1] + strings.Repeat(" ", size-len(body)) + body[at+1:]
}

// TestManyHugeBodiesAtOnceAreHeldToMaxBigBodies: bodies of several MiB
// sent at once (each could cost forty times its size to decode and render)
// are served at most MaxBigBodies at a time: while that many streams with
// a big body are in flight, another big body waits for a slot as long as a
// body may take to arrive and gets 429, a small request is served, and
// once a stream ends a big body is served again.
func TestManyHugeBodiesAtOnceAreHeldToMaxBigBodies(t *testing.T) {
	f := start(t, nil, func(o *Options) { o.BodyTimeout = 5 * time.Second }) // 4 MiB arrives well within it, even under -race
	stream := padded(`{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":30000,"ignore_eos":true,"stream":true}`, bigBody+1000)
	var held []net.Conn
	for range MaxBigBodies {
		conn, err := net.Dial("tcp", f.srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(stream), stream)
		if line, err := bufio.NewReaderSize(conn, 64).ReadString('\n'); err != nil || !strings.Contains(line, "200") {
			t.Fatalf("status %q %v", line, err)
		}
		held = append(held, conn) // its stream runs, unread: paused, in flight
	}
	big := padded(`{"messages":[{"role":"user","content":"Once"}],"max_tokens":2}`, bigBody+1000)
	resp, out := post(t, f.srv.URL+"/v1/chat/completions", "", big)
	if resp.StatusCode != 429 || !strings.Contains(out, `"code":"too_many_large_bodies"`) || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("a big body while %d are in flight: %d %s", MaxBigBodies, resp.StatusCode, out)
	}
	if resp, out := post(t, f.srv.URL+"/v1/chat/completions", "", `{"messages":[{"role":"user","content":"Once"}],"max_tokens":2}`); resp.StatusCode != 200 {
		t.Fatalf("a small body: %d %s", resp.StatusCode, out)
	}
	held[0].Close()                           // its request ends, and its slot is free again
	guard := time.Now().Add(60 * time.Second) // a hang guard, not a timing
	for {
		resp, out := post(t, f.srv.URL+"/v1/chat/completions", "", big)
		if resp.StatusCode == 200 {
			break
		}
		if resp.StatusCode != 429 || time.Now().After(guard) {
			t.Fatalf("a big body once a stream ended: %d %s", resp.StatusCode, out)
		}
	}
}
