//go:build linux

package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func newLimited(t *testing.T, l Limits, files map[string]string) *Sandbox {
	t.Helper()
	s, err := New(filepath.Join(t.TempDir(), "ws"), files, Options{Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// dd past the workspace's cap fails with ENOSPC inside the sandbox (and a
// host-side write past it too); what the workspace holds at the cut is
// copied to its folder.
func TestDiskPastWorkspaceCapIsENOSPC(t *testing.T) {
	l := DefaultLimits
	l.Workspace = 8 << 20
	s := newLimited(t, l, map[string]string{"seed.txt": "seed\n"})
	if !s.tmpfs {
		lacks(t, "no capped workspace here (%s)", s.Isolation().Workspace)
	}
	r := run(t, s, "dd if=/dev/zero of=big bs=1M count=20; echo rc=$?", 30*time.Second)
	if !strings.Contains(r.Output, "No space left on device") || strings.Contains(r.Output, "rc=0") {
		t.Fatalf("dd past the cap: %q", r.Output)
	}
	if err := s.WriteFile("more", make([]byte, 4<<20)); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("host-side write past the cap: %v", err)
	}
	run(t, s, "rm big; echo kept > keep.txt", 10*time.Second)
	dir := s.dir
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"seed.txt": "seed\n", "keep.txt": "kept\n"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
			t.Errorf("%s after the cut: %q %v", name, b, err)
		}
	}
	if s.Root() != dir {
		t.Errorf("Root after Close: %s, want %s", s.Root(), dir)
	}
}

// Three processes that each hold 40 MiB cannot all hold it at once in a
// sandbox of 64 MiB: the bound is the sandbox's, not each process's.
func TestMemoryBoundedInTotalNotPerProcess(t *testing.T) {
	l := DefaultLimits
	l.Memory = 64 << 20
	s := newLimited(t, l, nil)
	if s.cg == nil {
		lacks(t, "no cgroup for sandboxes here: %s", s.Isolation().Warnings)
	}
	if got := s.cg.file("pids.max"); got != "256" {
		t.Errorf("pids.max %q", got)
	}
	r := run(t, s, "for i in 1 2 3; do (dd if=/dev/zero bs=40M count=1 2>/dev/null | (sleep 2; wc -c)) & done; wait", time.Minute)
	held := strings.Count(r.Output, "41943040")
	if held == 3 {
		t.Errorf("all three held 40 MiB at once under a 64 MiB sandbox: %q", r.Output)
	}
	if r := run(t, s, "dd if=/dev/zero bs=20M count=1 2>/dev/null | wc -c", time.Minute); !strings.Contains(r.Output, "20971520") {
		t.Errorf("one process under the bound: %q", r.Output)
	}
}
