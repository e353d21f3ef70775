//go:build linux

package sandbox

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A run that is killed (SIGKILL) or crashes cannot clean up after itself:
// its sandboxes' cgroups (jspark-sandbox-PID-N) stay for ever, and without
// namespaces what its commands detached (setsid, nohup, a double fork)
// keeps running as its sandbox uids. So each held uid's lock file records
// what its sandbox made (jspark's pid, the cgroups), and is emptied when the
// sandbox closes. The first sandbox of the next run takes each lock that no
// live run holds, kills every process of its uid and of its recorded
// cgroups, removes those cgroups and empties the record; then it removes
// the empty cgroups of dead jspark processes that no record names (a run
// not as root, or of a jspark from before the records). A live run's
// sandboxes are never touched: it holds their locks, and its pid is alive.

var reapOnce sync.Once

// reaped is what reapDead removed.
type reaped struct{ uids, procs, cgroups int }

func (r reaped) String() string {
	return fmt.Sprintf("removed what killed runs left: %d processes of %d sandbox uids, %d cgroups", r.procs, r.uids, r.cgroups)
}

// reapDead removes dead runs' leftovers (see above).
func reapDead() reaped {
	var r reaped
	if os.Getuid() == 0 {
		if dir, err := lockDir(); err == nil {
			r = reapLocks(dir)
		}
	}
	if setup, _ := cgroups(); setup != nil {
		r.cgroups += reapCgroups(setup)
	}
	return r
}

// reapLocks cleans up after the sandboxes whose locks under dir no live run
// holds but whose records say they were not closed. (A uid whose lock has
// no record is left alone: allocUID skips it while a process runs as it.)
func reapLocks(dir string) reaped {
	var r reaped
	ents, err := os.ReadDir(dir)
	if err != nil {
		return r
	}
	for _, e := range ents {
		uid, err := strconv.Atoi(e.Name())
		if err != nil || uid < uidBase || uid >= uidBase+uidCount {
			continue
		}
		if fi, err := e.Info(); err != nil || fi.Size() == 0 {
			continue // closed cleanly (most of them: a lock file stays once made)
		}
		f, err := os.OpenFile(filepath.Join(dir, e.Name()), os.O_RDWR|unix.O_NOFOLLOW, 0)
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			f.Close() // a live sandbox's
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(f, 64<<10))
		var cgs []*cgroup
		for _, line := range strings.Split(string(b), "\n") {
			if p, ok := strings.CutPrefix(line, "cgroup "); ok && strings.HasPrefix(filepath.Base(p), "jspark-sandbox-") {
				cgs = append(cgs, &cgroup{dirs: []string{p}})
			}
		}
		if len(b) > 0 {
			r.uids++
			r.procs += killAll(func() []int {
				pids := members(0, uid, true)
				for _, cg := range cgs {
					pids = append(pids, cg.procs()...)
				}
				return pids
			}, 0)
			for _, cg := range cgs {
				if _, err := os.Stat(cg.dirs[0]); err == nil {
					r.cgroups++
				}
				cg.remove()
			}
			f.Truncate(0)
		}
		f.Close()
	}
	return r
}

// reapCgroups removes the empty sandbox cgroups of jspark processes that
// are gone (a cgroup with processes cannot be removed, and is left).
func reapCgroups(setup *cgroupSetup) int {
	n := 0
	for _, parent := range setup.parents {
		ents, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, e := range ents {
			rest, ok := strings.CutPrefix(e.Name(), "jspark-sandbox-")
			pid, _, ok2 := strings.Cut(rest, "-")
			if !ok || !ok2 || !e.IsDir() {
				continue
			}
			if _, err := os.Stat("/proc/" + pid); err == nil {
				continue // alive (or its pid reused: then the cgroup waits)
			}
			if os.Remove(filepath.Join(parent, e.Name())) == nil {
				n++
			}
		}
	}
	return n
}

// killAll stops and kills every process list returns but keep, stopping
// them first so that a fork bomb cannot outrun the scan, until two scans in
// a row find none; it returns how many it killed.
func killAll(list func() []int, keep int) int {
	killed := map[int]bool{}
	empty := 0
	for range 400 {
		var stopped []int
		for _, pid := range list() {
			if pid != keep {
				syscall.Kill(pid, syscall.SIGSTOP)
				stopped = append(stopped, pid)
			}
		}
		if len(stopped) == 0 {
			if empty++; empty == 2 {
				break
			}
		} else {
			empty = 0
			for _, pid := range stopped {
				syscall.Kill(pid, syscall.SIGKILL)
				killed[pid] = true
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	return len(killed)
}
