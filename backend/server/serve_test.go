// The server as its own process, under hostile input: built once, the
// race detector has nothing to add (the process it watches is not built
// with it), and Linux's parent-death signal keeps it from outliving a
// fuzzing worker.

//go:build linux && !race

package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var jspark struct {
	once sync.Once
	path string
	err  error
}

// jsparkBinary builds `jspark` once per test process.
func jsparkBinary(t testing.TB) string {
	jspark.once.Do(func() {
		dir, err := os.MkdirTemp("", "jspark-serve-test")
		if err != nil {
			jspark.err = err
			return
		}
		jspark.path = filepath.Join(dir, "jspark")
		out, err := exec.Command("go", "build", "-o", jspark.path, "../../cmd/jspark").CombinedOutput()
		if err != nil {
			jspark.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if jspark.err != nil {
		t.Fatal(jspark.err)
	}
	return jspark.path
}

// serveMemory bounds the served process's address space: a request that
// allocated without bound would end it (out of memory), which the test
// sees. The model and its cache need a few hundred MiB of it.
const serveMemory = 3 << 30

// served is one `jspark serve` process.
type served struct {
	url    string // http://127.0.0.1:PORT
	cmd    *exec.Cmd
	exited chan struct{}
	mu     sync.Mutex
	log    bytes.Buffer // its standard error
}

// startServed runs `jspark serve` on a free port with a small cache and
// context, and args; it is killed when the test ends.
func startServed(t testing.TB, args ...string) *served {
	t.Helper()
	bin := jsparkBinary(t)
	argv := append([]string{"serve", "--port", "0", "--kv-memory", "16", "--ctx", "512", "--max-tokens-default", "16", "--body-timeout", "20s"}, args...)
	cmd := exec.Command("sh", append([]string{"-c", fmt.Sprintf(`ulimit -v %d && exec "$0" "$@"`, serveMemory>>10), bin}, argv...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &served{cmd: cmd, exited: make(chan struct{})}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			if s.log.Len() < 1<<20 {
				s.log.WriteString(line + "\n")
			}
			s.mu.Unlock()
			if rest, ok := strings.CutPrefix(line, "jspark serve: ready at "); ok {
				ready <- strings.TrimSuffix(strings.Fields(rest)[0], "/v1")
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(s.stop)
	select {
	case s.url = <-ready:
	case <-s.exited:
		t.Fatalf("jspark serve %v ended before it was ready:\n%s", args, s.stderr())
	case <-time.After(60 * time.Second): // a hang guard, not a timing
		t.Fatalf("jspark serve %v not ready:\n%s", args, s.stderr())
	}
	return s
}

func (s *served) stop() {
	s.cmd.Process.Kill()
	<-s.exited
}

func (s *served) stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// serveClient gives a request ample time: a hostile input is answered in
// seconds; one that hangs is a failure.
var serveClient = &http.Client{Timeout: 120 * time.Second}

// send posts body to path and checks the answer and then that the process
// lives and /health answers: a success, or an OpenAI-style error (never a
// 500: hostile input is the client's error), never a success for a body
// that is not one JSON object, and no panic in the log.
func (s *served) send(t testing.TB, path, body, what string) {
	t.Helper()
	resp, err := serveClient.Post(s.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		select {
		case <-s.exited:
		default:
			// A body over the cap may be cut off mid-send by the 413.
			if len(body) <= MaxBody {
				t.Fatalf("%s: %s: %v", what, path, err)
			}
		}
	} else {
		out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		ok := resp.StatusCode == 200 || resp.StatusCode < 500 && bytes.HasPrefix(out, []byte(`{"error":`))
		if resp.StatusCode == 200 && !oneObject(body) {
			t.Fatalf("%s: %s: %d for a body that is not one JSON object: %.300s", what, path, resp.StatusCode, out)
		}
		if !ok {
			t.Fatalf("%s: %s: %d %.300s", what, path, resp.StatusCode, out)
		}
	}
	s.alive(t, what)
}

// alive checks that the process runs, /health answers and the log holds
// no panic.
func (s *served) alive(t testing.TB, what string) {
	t.Helper()
	select {
	case <-s.exited:
		t.Fatalf("%s: jspark serve died:\n%s", what, tail(s.stderr(), 3000))
	default:
	}
	resp, err := serveClient.Get(s.url + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s: /health: %v %v\n%s", what, resp, err, tail(s.stderr(), 3000))
	}
	resp.Body.Close()
	if log := s.stderr(); strings.Contains(log, "panic") || strings.Contains(log, "fatal error") {
		t.Fatalf("%s: the log says:\n%s", what, tail(log, 3000))
	}
}

// oneObject says whether body is one JSON object and nothing after it but
// white space.
func oneObject(body string) bool {
	return json.Valid([]byte(body)) && strings.TrimLeft(body, " \t\r\n")[0] == '{'
}

func tail(s string, n int) string { return s[max(0, len(s)-n):] }

// conversation is what each template is rendered over: every role, a tool
// call with arguments, tools, streamed and not, and each endpoint that
// renders.
var conversation = []struct{ path, body string }{
	{"/v1/chat/completions", endpointBodies[0].body},
	{"/v1/chat/completions", strings.Replace(endpointBodies[0].body, `"stream":false`, `"stream":true`, 1)},
	{"/v1/responses", endpointBodies[2].body},
	{"/tokenize", endpointBodies[3].body},
}

// TestServeSurvivesHostileInput: `jspark serve` as its own process, fed a
// few hundred bodies with nested, huge or malformed JSON in every field of
// every endpoint, then random hostile chat templates through
// --chat-template-file, never dies: after each input it runs, /health
// answers and its log holds no panic. (The short, deterministic run of
// FuzzServeBody and FuzzServeTemplate.)
func TestServeSurvivesHostileInput(t *testing.T) {
	s := startServed(t)
	for i := range 300 {
		path, body := hostileBody(1, i)
		s.send(t, path, body, fmt.Sprintf("input %d (%d bytes)", i, len(body)))
	}
	for i := range 6 {
		s := startTemplate(t, hostileTemplate(1, i))
		if s == nil {
			continue // refused at boot
		}
		for j, c := range conversation {
			s.send(t, c.path, c.body, fmt.Sprintf("template %d, request %d", i, j))
		}
		s.stop()
	}
}

// templateBound is the most bytes of a --chat-template-file (cmd/jspark's
// maxTemplateBytes): a larger one is refused at boot.
const templateBound = 1 << 20

// startTemplate serves with source as --chat-template-file; a source past
// templateBound must be refused at boot, naming the flag, and gives nil.
func startTemplate(t testing.TB, source string) *served {
	t.Helper()
	file := filepath.Join(t.TempDir(), "template.jinja")
	if err := os.WriteFile(file, []byte(source), 0o644); err != nil {
		t.Fatal(err)
	}
	if len(source) > templateBound {
		out, err := exec.Command(jsparkBinary(t), "serve", "--port", "0", "--chat-template-file", file).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "--chat-template-file "+file+": larger than") {
			t.Fatalf("a %d-byte template: %v\n%s", len(source), err, out)
		}
		return nil
	}
	return startServed(t, "--chat-template-file", file)
}

// FuzzServeBody posts fuzzed bodies to one `jspark serve` process (one per
// fuzzing worker): it never dies, and answers each with a success or an
// OpenAI-style error.
func FuzzServeBody(f *testing.F) {
	for i := range 40 {
		path, body := hostileBody(2, i)
		if len(body) < 1<<20 {
			f.Add(endpointIndex(path), body)
		}
	}
	s := startServed(f)
	f.Fuzz(func(t *testing.T, endpoint uint8, body string) {
		path := endpointBodies[int(endpoint)%len(endpointBodies)].path
		s.send(t, path, body, "fuzzed body")
	})
}

func endpointIndex(path string) uint8 {
	for i, e := range endpointBodies {
		if e.path == path {
			return uint8(i)
		}
	}
	return 0
}

// FuzzServeTemplate serves each fuzzed chat template from a file and
// renders one request of the conversation with it: a template that does
// not compile serves the built-in one, one that breaks its budget is a 400
// for the request, and the process never dies. (One request an input: the
// fuzzing engine gives an input 10 s, and a template that spends its whole
// render budget takes seconds a request on a loaded machine.)
func FuzzServeTemplate(f *testing.F) {
	for i := range 8 { // few: each starts a process, and the seeds run in every `go test`
		f.Add(uint8(i), hostileTemplate(2, i))
	}
	jsparkBinary(f) // built once, outside any input's time
	f.Fuzz(func(t *testing.T, request uint8, source string) {
		c := conversation[int(request)%len(conversation)]
		if s := startTemplate(t, source); s != nil {
			s.send(t, c.path, c.body, "the conversation")
		}
	})
}
