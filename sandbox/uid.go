//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Sandbox uids (as root) come from [uidBase, uidBase+uidCount). A uid is a
// sandbox's while it holds the uid's lock file, an flock that every jspark
// process on the machine honours and the kernel drops when its holder dies;
// a uid that some process still runs as (one a killed run left behind) is
// skipped too. So concurrent runs never share a uid, and one run's cleanup
// (which kills every process of its uid) cannot touch another's.
const (
	uidBase  = 200000
	uidCount = 1 << 16
)

// uidLock is one held uid.
type uidLock struct {
	uid int
	f   *os.File // nil: not dedicated (the caller's own uid)
}

// record adds a line to the lock file's record of what the sandbox made
// (reap.go), for the next run if this one is killed.
func (l *uidLock) record(line string) {
	if l != nil && l.f != nil {
		l.f.WriteString(line + "\n")
	}
}

// release empties the record (the sandbox has cleaned up) and gives the
// uid back.
func (l *uidLock) release() {
	if l != nil && l.f != nil {
		l.f.Truncate(0)
		l.f.Close() // drops the flock
		l.f = nil
	}
}

// lockDir is where the uid locks live: one folder for the whole machine,
// root's alone (a folder anyone could replace would let them steal uids).
func lockDir() (string, error) {
	for _, base := range []string{"/run/lock", "/var/lock", os.TempDir()} {
		if fi, err := os.Stat(base); err != nil || !fi.IsDir() {
			continue
		}
		dir := filepath.Join(base, "jspark-sandbox-uids")
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return "", err
		}
		fi, err := os.Lstat(dir)
		if err != nil {
			return "", err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !fi.IsDir() || !ok || st.Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
			return "", fmt.Errorf("%s is not a folder that root alone can write", dir)
		}
		return dir, nil
	}
	return "", errors.New("no folder for the sandbox uid locks (/run/lock, /var/lock or the temp folder)")
}

// allocUID gives a sandbox its host uid: as root, a dedicated uid no other
// sandbox holds, so that rlimits on processes bind (root is exempt) and every
// process of the sandbox can be found by its uid; otherwise the caller's own.
func allocUID() (*uidLock, error) {
	if os.Getuid() != 0 {
		return &uidLock{uid: os.Getuid()}, nil
	}
	dir, err := lockDir()
	if err != nil {
		return nil, fmt.Errorf("sandbox uid: %w", err)
	}
	return allocUIDFrom(dir, rand.IntN(uidCount))
}

// allocUIDFrom tries the uids from uidBase+start on.
func allocUIDFrom(dir string, start int) (*uidLock, error) {
	for i := range uidCount {
		uid := uidBase + (start+i)%uidCount
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(uid)), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			return nil, fmt.Errorf("sandbox uid lock: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		if uidInUse(uid) {
			f.Close()
			continue
		}
		l := &uidLock{uid: uid, f: f}
		f.Truncate(0)
		l.record(fmt.Sprintf("pid %d", os.Getpid()))
		return l, nil
	}
	return nil, errors.New("sandbox uid: every uid of the range is taken")
}

// uidInUse reports whether any process runs as uid (real, effective, saved or
// filesystem).
func uidInUse(uid int) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if u, ok := procUIDs(e.Name()); ok {
			for _, x := range u {
				if x == uid {
					return true
				}
			}
		}
	}
	return false
}
