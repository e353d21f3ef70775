package main

import (
	"bufio"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"jspark/backend/engine"
)

// serveProcess runs `jspark serve` as its own process; it returns the
// command and its base URL. Its stderr goes on into log.
func serveProcess(t *testing.T, log *strings.Builder, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--port", "0", "--kv-memory", "16"}, args...)...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "jspark serve: ready at "); ok {
			done := make(chan struct{})
			go func() {
				for sc.Scan() {
					log.WriteString(sc.Text() + "\n")
				}
				close(done)
			}()
			t.Cleanup(func() { <-done })
			return cmd, strings.Fields(rest)[0]
		}
	}
	t.Fatal("no ready line")
	return nil, ""
}

// streamAfterSIGTERM opens a long stream, reads its first event, sends the
// server SIGTERM and reads the rest; it returns the rest and the exit code,
// and checks that no new connection was accepted during the drain.
func streamAfterSIGTERM(t *testing.T, maxTokens string, args ...string) (rest string, code int, log string) {
	t.Helper()
	var lb strings.Builder
	cmd, url := serveProcess(t, &lb, args...)
	body := `{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":` + maxTokens + `,"ignore_eos":true,"stream":true}`
	resp, err := http.Post(url+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	for i := 0; i < 2; i++ { // the role chunk, then a token
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		r.ReadString('\n')
	}
	cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan int, 1)
	go func() {
		cmd.Wait()
		exited <- cmd.ProcessState.ExitCode()
	}()
	time.Sleep(100 * time.Millisecond) // let the signal land before the next connection
	if resp2, err := http.Get(strings.TrimSuffix(url, "/v1") + "/health"); err == nil {
		resp2.Body.Close()
		t.Errorf("a new connection was served during the drain: %d", resp2.StatusCode)
	}
	b, _ := io.ReadAll(r)
	select {
	case code = <-exited:
	case <-time.After(60 * time.Second): // a hang guard, not a timing
		t.Fatal("the server did not exit after its drain")
	}
	return string(b), code, lb.String()
}

// TestSIGTERMDrainsRunningStreams: on SIGTERM a stream in progress runs to
// its own end (here its max_tokens) before the process exits 0.
func TestSIGTERMDrainsRunningStreams(t *testing.T) {
	rest, code, log := streamAfterSIGTERM(t, "2000", "--shutdown-timeout", "60s")
	if code != 0 || !strings.Contains(rest, `"finish_reason":"length"`) || !strings.HasSuffix(rest, "data: [DONE]\n\n") {
		t.Fatalf("exit %d; the stream ended ...%s\nlog:\n%s", code, rest[max(0, len(rest)-300):], log)
	}
	if !strings.Contains(log, "jspark serve: draining: 1 requests running") || !strings.Contains(log, "jspark serve: drained\n") {
		t.Fatalf("log:\n%s", log)
	}
}

// TestSIGTERMTimeoutEndsStreamsWithAnError: a stream still running when
// --shutdown-timeout runs out ends with an error event, never a finish
// that claims a normal end, and the process exits 0 after it.
func TestSIGTERMTimeoutEndsStreamsWithAnError(t *testing.T) {
	rest, code, log := streamAfterSIGTERM(t, "30000", "--shutdown-timeout", "300ms")
	if code != 0 || strings.Contains(rest, `"finish_reason":"`) || !strings.Contains(rest, `"code":"server_shutdown"`) {
		t.Fatalf("exit %d; the stream ended ...%s\nlog:\n%s", code, rest[max(0, len(rest)-300):], log)
	}
	if !strings.Contains(log, "1 requests still running at the timeout were ended with an error") {
		t.Fatalf("log:\n%s", log)
	}
}

// TestEngineFlagsSessionRetain: --session-retain defaults to the engine's
// retention, and 0 turns it off, as the engine's own 0 does.
func TestEngineFlagsSessionRetain(t *testing.T) {
	for _, c := range []struct {
		args []string
		want time.Duration
	}{
		{nil, engine.DefaultOptions().SessionRetain},
		{[]string{"--session-retain", "5s"}, 5 * time.Second},
		{[]string{"--session-retain", "0"}, 0},
	} {
		o := defaultEngineFlags()
		if err := o.flagSet().Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if got := o.engineOptions().SessionRetain; got != c.want {
			t.Errorf("%v: SessionRetain %v, want %v", c.args, got, c.want)
		}
	}
}
