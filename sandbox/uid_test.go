//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// Two runs never get the same sandbox uid: a uid whose lock another holder
// has (another jspark process, here another open of the lock file, which
// flock treats alike) or that a process still runs as is skipped. Before,
// runs whose pids were equal modulo 1000 shared uids, and one run's cleanup
// killed the other's commands.
func TestConcurrentRunsNeverShareAUID(t *testing.T) {
	if os.Getuid() != 0 {
		lacks(t, "dedicated sandbox uids are allocated only as root")
	}
	dir, err := lockDir()
	if err != nil {
		t.Fatal(err)
	}
	const start = 4242
	a, err := allocUIDFrom(dir, start)
	if err != nil {
		t.Fatal(err)
	}
	defer a.release()
	// A leftover process of the next uid, as a killed run might leave.
	busy := a.uid + 1
	sleep := exec.Command("sleep", "60")
	sleep.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(busy), Gid: uint32(busy)}}
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleep.Process.Kill(); sleep.Wait() }()
	b, err := allocUIDFrom(dir, start)
	if err != nil {
		t.Fatal(err)
	}
	defer b.release()
	if b.uid == a.uid || b.uid == busy {
		t.Fatalf("second allocation got uid %d (held: %d, in use: %d)", b.uid, a.uid, busy)
	}
	// Released, the uid is free again.
	held := a.uid
	a.release()
	c, err := allocUIDFrom(dir, start)
	if err != nil {
		t.Fatal(err)
	}
	defer c.release()
	if c.uid != held {
		t.Errorf("after release got %d, want %d again", c.uid, held)
	}
}
