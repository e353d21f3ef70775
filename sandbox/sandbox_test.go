//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func newSandbox(t *testing.T, files map[string]string) *Sandbox {
	t.Helper()
	s, err := New(filepath.Join(t.TempDir(), "ws"), files, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func run(t *testing.T, s *Sandbox, cmd string, timeout time.Duration) Result {
	t.Helper()
	r, err := s.Exec(context.Background(), cmd, timeout, 4000)
	if err != nil {
		t.Fatalf("%q: %v", cmd, err)
	}
	return r
}

func TestShellKeepsStateAndExitCodes(t *testing.T) {
	s := newSandbox(t, map[string]string{"a/b.txt": "hello\n"})
	cases := []struct {
		cmd  string
		out  string
		code int
	}{
		{"cat a/b.txt", "hello\n", 0},
		{"cd a && X=7", "", 0},
		{"echo $X; ls", "7\nb.txt\n", 0},
		{"false", "", 1},
		{"exit_code() { return 3; }; exit_code", "", 3},
		{"echo 'unbalanced", "", 2}, // a syntax error is the command's, not the stream's
		{"echo still here", "still here\n", 0},
		{"echo err >&2", "err\n", 0},
		{"test -t 1 && echo tty", "tty\n", 0},
		{"cat", "", 0}, // stdin is empty, not the command stream
	}
	for _, c := range cases {
		r := run(t, s, c.cmd, 10*time.Second)
		out := r.Output
		if c.code == 2 {
			out = "" // bash's message names its own line numbers
		}
		if out != c.out || r.ExitCode != c.code || r.TimedOut {
			t.Errorf("%q: got (%q, %d, timeout %v), want (%q, %d)", c.cmd, r.Output, r.ExitCode, r.TimedOut, c.out, c.code)
		}
	}
	if r := run(t, s, "exit 5", 10*time.Second); r.ExitCode != 5 || !r.Restarted {
		t.Errorf("exit 5: %+v", r)
	}
	if r := run(t, s, "pwd", 10*time.Second); r.ExitCode != 0 || strings.HasSuffix(strings.TrimSpace(r.Output), "/a") {
		t.Errorf("after exit, a fresh shell starts in the workspace: %+v", r)
	}
}

func TestTimeoutKillsCommand(t *testing.T) {
	s := newSandbox(t, nil)
	r := run(t, s, "sleep 1000", time.Second)
	if !r.TimedOut || r.ExitCode != 124 || !strings.Contains(r.Output, "timed out after 1s") {
		t.Fatalf("sleep 1000: %+v", r)
	}
	if r.Restarted {
		t.Errorf("a killed child should not cost the shell: %+v", r)
	}
	if n := len(members(s.sh.pid(), s.uid, s.dedicated)); n != 1 {
		t.Errorf("%d processes left after the timeout, want the shell alone", n)
	}
	// A busy loop in the shell itself can only be stopped by replacing the shell.
	r = run(t, s, "while :; do :; done", time.Second)
	if !r.TimedOut || !r.Restarted || r.ExitCode != 124 {
		t.Fatalf("busy loop: %+v", r)
	}
	if r := run(t, s, "echo alive", time.Second); r.Output != "alive\n" {
		t.Fatalf("after restart: %+v", r)
	}
}

func TestOutputCappedWithMarker(t *testing.T) {
	s := newSandbox(t, nil)
	r := run(t, s, "yes", time.Second)
	if !r.TimedOut || !r.Truncated || !strings.Contains(r.Output, "bytes of output truncated") {
		t.Fatalf("yes: timed out %v truncated %v, %d bytes", r.TimedOut, r.Truncated, len(r.Output))
	}
	if len(r.Output) > 4000+200 {
		t.Errorf("output %d bytes, cap 4000", len(r.Output))
	}
	r = run(t, s, "seq 1 5000", 10*time.Second)
	if !strings.HasPrefix(r.Output, "1\n2\n") || !strings.HasSuffix(r.Output, "4999\n5000\n") || !r.Truncated {
		t.Errorf("seq keeps head and tail: %q…%q", r.Output[:20], r.Output[len(r.Output)-20:])
	}
}

func TestForkBombContained(t *testing.T) {
	s := newSandbox(t, nil)
	if !s.dedicated && !s.ns {
		lacks(t, "no namespaces and no uid of its own here: a fork bomb would spend the test user's whole process limit")
	}
	r := run(t, s, ":(){ :|:& };:", 3*time.Second)
	t.Logf("fork bomb: exit %d, timed out %v, restarted %v", r.ExitCode, r.TimedOut, r.Restarted)
	// The bomb did not outlive its command (or its shell, if it had to go).
	if s.sh != nil {
		if n := len(members(s.sh.pid(), s.uid, s.dedicated)); n != 1 {
			t.Errorf("%d processes after the fork bomb's command, want the shell alone", n)
		}
	}
	// Bash may first report the jobs it lost ("Killed").
	if r := run(t, s, "echo SHELL-ANSWERS", 10*time.Second); !strings.HasSuffix(r.Output, "\nSHELL-ANSWERS\n") && r.Output != "SHELL-ANSWERS\n" {
		t.Fatalf("after the fork bomb: %q", r.Output[max(0, len(r.Output)-80):])
	}
	// At the process limit the shell itself still answers (it needs no fork).
	r = run(t, s, ":(){ :|: & }; : ; sleep 2; echo STILL-HERE", 20*time.Second)
	if !strings.Contains(r.Output, "STILL-HERE") && !r.TimedOut {
		t.Errorf("a bomb in the foreground: exit %d, output %q", r.ExitCode, r.Output[max(0, len(r.Output)-300):])
	}
	s.Close()
	if s.dedicated || s.ns {
		if n := len(members(0, s.uid, s.dedicated)); n != 0 {
			t.Errorf("%d fork-bomb processes survive Close", n)
		}
	}
}

func TestNoProcessSurvivesClose(t *testing.T) {
	s := newSandbox(t, nil)
	tag := fmt.Sprintf("jspark-survivor-%d", time.Now().UnixNano())
	// Started in the background while a long command runs, then the cut.
	ctx, cut := context.WithCancel(context.Background())
	go func() {
		for countTagged(tag) < 3 {
			time.Sleep(20 * time.Millisecond)
		}
		cut()
	}()
	s.Exec(ctx, fmt.Sprintf(`(exec -a %[1]s-bg sleep 1000) & setsid bash -c 'exec -a %[1]s-setsid sleep 1000' & nohup bash -c '(exec -a %[1]s-nohup sleep 1000) & wait' >/dev/null 2>&1 & sleep 1000`, tag), time.Hour, 4000)
	want := 0
	if !s.dedicated && !s.ns {
		want = 1 // without a pid namespace or own uid, a setsid grandchild is out of reach
	}
	deadline := time.Now().Add(5 * time.Second)
	for countTagged(tag) > want && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := countTagged(tag); n > want {
		t.Errorf("%d processes survive Close", n)
	}
}

func countTagged(tag string) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.HasPrefix(string(b), tag) {
			b, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
			if !strings.Contains(string(b), ") Z ") {
				n++
			}
		}
	}
	return n
}

func TestIsolation(t *testing.T) {
	s := newSandbox(t, nil)
	if !s.Isolated() {
		why := ""
		if _, w := namespaces(); w != "" {
			why = w
		}
		lacks(t, "namespaces are not available here (%s): network and filesystem isolation cannot be tested", why)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	if r := run(t, s, fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && echo CONNECTED", port), 10*time.Second); strings.Contains(r.Output, "CONNECTED") || r.ExitCode == 0 {
		t.Errorf("reached the host's loopback: %+v", r)
	}
	if r := run(t, s, "exec 3<>/dev/tcp/1.1.1.1/53 && echo CONNECTED", 10*time.Second); strings.Contains(r.Output, "CONNECTED") {
		t.Errorf("reached the network: %+v", r)
	}

	outside := t.TempDir()
	os.Chmod(outside, 0o777)
	for _, cmd := range []string{
		"echo x > " + filepath.Join(outside, "f"),
		"touch /etc/jspark-escape",
		"echo x > " + filepath.Join(s.Root(), "..", "escape"),
	} {
		run(t, s, cmd, 10*time.Second)
	}
	for _, p := range []string{filepath.Join(outside, "f"), "/etc/jspark-escape", filepath.Join(s.Root(), "..", "escape")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("the sandbox wrote %s", p)
			os.Remove(p)
		}
	}
	if r := run(t, s, "echo in > inside.txt && cat inside.txt && echo t > /tmp/t && cat /tmp/t", 10*time.Second); r.Output != "in\nt\n" {
		t.Errorf("workspace and /tmp must stay writable: %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(s.Root(), "inside.txt")); err != nil || string(b) != "in\n" {
		t.Errorf("workspace file on the host: %q %v", b, err)
	}
	if n := strings.TrimSpace(run(t, s, "ps -e -o pid= | wc -l", 10*time.Second).Output); n != "2" && n != "3" && n != "4" {
		t.Errorf("the pid namespace should show only the sandbox's processes: %q", n)
	}
	if r := run(t, s, "env | sort | tr '\\n' ' '", 10*time.Second); strings.Contains(r.Output, "GOPATH") || strings.Contains(r.Output, initEnv) {
		t.Errorf("environment not clean: %s", r.Output)
	}
}

func TestPathConfinement(t *testing.T) {
	s := newSandbox(t, map[string]string{"ok/file.txt": "x"})
	if err := os.Symlink("/etc", filepath.Join(s.Root(), "link")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"../x", "/etc/passwd", "ok/../../x", "link/passwd", "link"} {
		if _, err := s.Path(p); !errors.Is(err, ErrOutside) {
			t.Errorf("Path(%q) = %v, want ErrOutside", p, err)
		}
		if err := s.WriteFile(p, []byte("x")); !errors.Is(err, ErrOutside) {
			t.Errorf("WriteFile(%q) = %v, want ErrOutside", p, err)
		}
	}
	for _, p := range []string{"ok/file.txt", "ok/../ok/new.txt", "new/dir/f.txt", "."} {
		if _, err := s.Path(p); err != nil {
			t.Errorf("Path(%q): %v", p, err)
		}
	}
	if err := s.WriteFile("new/dir/f.txt", []byte("data")); err != nil {
		t.Fatal(err)
	}
	if r := run(t, s, "cat new/dir/f.txt && echo more >> new/dir/f.txt && echo ok", 10*time.Second); r.Output != "dataok\n" {
		t.Errorf("a tool-written file must be the shell's to change: %+v", r)
	}
}

func TestCutKillsRunningCommand(t *testing.T) {
	s := newSandbox(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := s.Exec(ctx, "sleep 1000", time.Hour, 4000)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	if s.sh != nil {
		t.Errorf("the cut must replace the shell")
	}
}

// Without namespaces the sandbox still runs commands, as its own uid when it
// can, with rlimits, and still cleans up after each command.
func TestWithoutNamespaces(t *testing.T) {
	s, err := New(filepath.Join(t.TempDir(), "ws"), map[string]string{"f": "x"}, Options{NoNamespaces: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Isolated() {
		t.Fatal("NoNamespaces still isolated")
	}
	want := fmt.Sprint(os.Getuid())
	if s.dedicated {
		want = fmt.Sprint(s.uid)
	}
	if r := run(t, s, "cat f; echo; id -u; ulimit -u", 10*time.Second); r.Output != "x\n"+want+"\n256\n" {
		t.Errorf("got %q, want uid %s and the process limit", r.Output, want)
	}
	if r := run(t, s, "sleep 1000 & echo bg", 10*time.Second); r.Output != "bg\n" {
		t.Errorf("%q", r.Output)
	}
	if n := len(members(s.sh.pid(), s.uid, s.dedicated)); n != 1 {
		t.Errorf("%d processes after the command, want the shell alone", n)
	}
}
