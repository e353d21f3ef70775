//go:build linux

package sandbox

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A door makes one host service reachable from inside the sandbox at
// 127.0.0.1:PORT, across shell restarts, while the rest of the host's network
// stays out of reach.
func TestDoorReachesHostServiceOnly(t *testing.T) {
	for _, noNS := range []bool{false, true} {
		t.Run(fmt.Sprintf("no-namespaces=%v", noNS), func(t *testing.T) {
			s, err := New(filepath.Join(t.TempDir(), "ws"), nil, Options{NoNamespaces: noNS})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if !noNS && !s.Isolated() {
				lacks(t, "namespaces are not available here")
			}
			l, err := s.Listen(0)
			if err != nil {
				t.Fatal(err)
			}
			addr := l.Addr().(*net.TCPAddr)
			if !addr.IP.Equal(net.IPv4(127, 0, 0, 1)) || addr.Port == 0 || (!noNS && addr.Port != doorPortBase) {
				t.Fatalf("door address %s", addr)
			}
			go http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				fmt.Fprintf(w, "host saw %s %s %q", r.Method, r.URL.Path, b)
			}))
			get := fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d && printf 'POST /v1/x HTTP/1.0\r\nContent-Length: 2\r\n\r\nhi' >&3 && cat <&3 | tail -n 1`, addr.Port)
			want := `host saw POST /v1/x "hi"`
			if r := run(t, s, get, 10*time.Second); r.Output != want {
				t.Fatalf("through the door: %+v", r)
			}
			// A new shell (a new network namespace) has the door at the same address.
			run(t, s, "exit 3", 10*time.Second)
			if r := run(t, s, get, 10*time.Second); r.Output != want {
				t.Fatalf("through the door after a restart: %+v", r)
			}
			if _, err := s.Listen(0); err == nil || !strings.Contains(err.Error(), "before the first command") {
				t.Errorf("Listen after a command: %v", err)
			}
			s.Close()
			if _, err := l.Accept(); err == nil {
				t.Errorf("the door accepts after Close")
			}
		})
	}
}

// Inside its namespace the sandbox's loopback is up: its own processes may
// talk to each other, which a door needs and a test server wants.
func TestSandboxLoopbackIsUp(t *testing.T) {
	s := newSandbox(t, nil)
	if !s.Isolated() {
		lacks(t, "namespaces are not available here")
	}
	r := run(t, s, `exec 3<>/dev/tcp/127.0.0.1/1`, 10*time.Second)
	// Connection refused (nothing listens on port 1), not "network is unreachable".
	if !strings.Contains(r.Output, "Connection refused") {
		t.Errorf("loopback: %q", r.Output)
	}
}
