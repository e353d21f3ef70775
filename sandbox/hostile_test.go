//go:build linux

package sandbox

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// within runs f and fails the test if it has not returned after d: the
// attacks here used to hang for ever, and a hang must fail, not stall.
func within[T any](t *testing.T, d time.Duration, what string, f func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("%s: still blocked after %s", what, d)
	}
	var zero T
	return zero
}

// A command that moves the shell's own stdout and stderr away from the
// terminal ends at its marker, and the next command's output is back.
func TestExecRedirectingTheShellsOutputEnds(t *testing.T) {
	for _, cmd := range []string{"exec > build.log 2>&1; echo hidden", "exec >/dev/null 2>&1; echo hidden", "exec 1>&- 2>&-"} {
		t.Run(cmd, func(t *testing.T) {
			s := newSandbox(t, nil)
			r := within(t, 30*time.Second, cmd, func() Result { return run(t, s, cmd, time.Minute) })
			if r.TimedOut || r.Restarted || r.ExitCode != 0 || r.Output != "" {
				t.Fatalf("%q: %+v", cmd, r)
			}
			if r := run(t, s, "echo after", 10*time.Second); r.Output != "after\n" {
				t.Errorf("the next command's output: %+v", r)
			}
		})
	}
}

// The cut ends a command whose shell no longer writes to its terminal.
func TestCutEndsRedirectedShell(t *testing.T) {
	s := newSandbox(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err := within(t, 10*time.Second, "the cut", func() error {
		_, err := s.Exec(ctx, "exec >/dev/null 2>&1; sleep 1000", time.Hour, 4000)
		return err
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the cut's", err)
	}
}

// A command that changes the terminal's modes (here: output upper-cased,
// which mangles the PTY's copy of the marker) still ends at its control
// marker, and the next command gets the terminal as the shell started.
func TestTerminalModesCannotHideTheEnd(t *testing.T) {
	s := newSandbox(t, nil)
	r := within(t, 30*time.Second, "stty olcuc", func() Result { return run(t, s, "stty olcuc <&1; echo abc", time.Minute) })
	if r.TimedOut || r.Restarted || r.ExitCode != 0 || r.Output != "ABC\n" {
		t.Fatalf("stty olcuc: %+v", r)
	}
	if r := run(t, s, "echo abc; (exit 4)", 10*time.Second); r.Output != "abc\n" || r.ExitCode != 4 {
		t.Errorf("after stty: %+v", r)
	}
}

func TestHugeCommandRefused(t *testing.T) {
	s := newSandbox(t, nil)
	r := run(t, s, "echo "+strings.Repeat("x", maxCommand), 10*time.Second)
	if r.ExitCode != 2 || !strings.Contains(r.Output, "the most a command may have is 1048576") {
		t.Fatalf("%+v", r)
	}
	if r := run(t, s, "echo ok", 10*time.Second); r.Output != "ok\n" {
		t.Errorf("after a refused command: %+v", r)
	}
}

// A FIFO, a socket or anything else that is not a regular file is refused by
// the host-side file access, which never waits on it.
func TestMkfifoIsRefusedNotWaitedOn(t *testing.T) {
	s := newSandbox(t, nil)
	if r := run(t, s, "mkfifo ff && mkdir d && mkfifo d/ff2", 10*time.Second); r.ExitCode != 0 {
		t.Fatalf("mkfifo: %+v", r)
	}
	for _, p := range []string{"ff", "d/ff2"} {
		err := within(t, 10*time.Second, "Open "+p, func() error { _, err := s.Open(p); return err })
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "a FIFO") {
			t.Errorf("Open(%s): %v, want ErrNotRegular", p, err)
		}
		err = within(t, 10*time.Second, "WriteFile "+p, func() error { return s.WriteFile(p, []byte("x")) })
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("WriteFile(%s): %v, want ErrNotRegular", p, err)
		}
		if fi, err := os.Lstat(filepath.Join(s.Root(), p)); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
			t.Errorf("%s is no longer the FIFO: %v %v", p, fi, err)
		}
	}
	if _, err := s.Open("d"); !errors.Is(err, ErrNotRegular) {
		t.Errorf("Open(dir): %v", err)
	}
}

// What WriteFile writes is bounded by the sandbox's file-size limit, which
// binds the sandbox's own processes through RLIMIT_FSIZE.
func TestWriteOverFileSizeLimitRefused(t *testing.T) {
	l := DefaultLimits
	l.FileSize = 1 << 20
	s, err := New(filepath.Join(t.TempDir(), "ws"), nil, Options{Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.WriteFile("big", make([]byte, 1<<20+1)); err == nil || !strings.Contains(err.Error(), "over the sandbox's file-size limit of 1048576 bytes") {
		t.Fatalf("WriteFile past the limit: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.Root(), "big")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused file exists: %v", err)
	}
	if err := s.WriteFile("ok", make([]byte, 1<<20)); err != nil {
		t.Errorf("at the limit: %v", err)
	}
}

// A component swapped for a symlink is refused by the kernel (openat2), not
// only by the name check.
func TestOpenNeverFollowsSymlinks(t *testing.T) {
	s := newSandbox(t, map[string]string{"d/f": "x"})
	if err := syscall.Symlink("/etc/passwd", filepath.Join(s.Root(), "p")); err != nil {
		t.Fatal(err)
	}
	if _, err := beneath(s.rootFD, "p", 0, 0); err == nil {
		t.Errorf("openat2 followed a symlink")
	}
	if _, err := beneath(s.rootFD, "d/../../x", 0, 0); err == nil {
		t.Errorf("openat2 left the workspace")
	}
	f, err := s.Open("d/f")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}
