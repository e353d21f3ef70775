package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A run's output folder (--out) holds its results and its sessions'
// workspaces; a second run given the same folder would mix its files with
// the first's (and, before the copy-out was made safe, follow the first
// run's symlinks). So a run claims its folder: ClaimOut takes a new or empty
// one and marks it with outMark, created exclusively, so that of two runs
// given one folder at once the second is refused, and so is any later run.
// NewOut picks the default folder so that runs started in the same second
// get folders of their own.

// outMark is the file that makes a folder a run's.
const outMark = ".jspark-run"

// ErrOutTaken is the error of an output folder that holds another run's
// files.
var ErrOutTaken = errors.New("holds another run's results: choose a new --out folder")

// ClaimOut makes dir this run's output folder: it makes it, or takes an
// existing empty one, and marks it. A folder that holds anything (another
// run's results, or its mark: a run in progress or killed) is refused with
// ErrOutTaken.
//
// The claim holds its mark locked (flock) while this process lives, so a
// resume (ResumeOut) can tell a run that still runs from one that was
// killed.
func ClaimOut(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	mark := filepath.Join(dir, outMark)
	f, err := os.OpenFile(mark, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s %w (another run has it: %s)", dir, ErrOutTaken, outMark)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "pid %d\nstarted %s\n", os.Getpid(), time.Now().UTC().Format(time.RFC3339Nano))
	if err := hold(dir, f); err != nil {
		f.Close()
		os.Remove(mark)
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		os.Remove(mark)
		return err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		os.Remove(mark)
		return err
	}
	for _, n := range names {
		if n != outMark {
			os.Remove(mark)
			if _, err := os.Stat(filepath.Join(dir, "results.json")); err == nil {
				n = "results.json"
			}
			return fmt.Errorf("%s %w (it has %s)", dir, ErrOutTaken, n)
		}
	}
	return nil
}

// ErrOutRunning is the error of resuming a folder whose run still runs.
var ErrOutRunning = errors.New("is held by a run that is still running")

// held are the marks this process holds locked, by folder: its claims and
// its resumes. The lock goes with the process, however it ends.
var held sync.Map

// hold locks a folder's mark for this process's life.
func hold(dir string, f *os.File) error {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("%s %w (another jspark has it)", dir, ErrOutRunning)
		}
		return fmt.Errorf("%s: lock %s: %w", dir, outMark, err)
	}
	held.Store(filepath.Clean(dir), f)
	return nil
}

// ResumeOut takes back dir for a run that resumes the one it holds
// (`jspark work --resume`): dir must be a run's folder (ClaimOut's mark in
// it) whose run no longer runs (no live process holds its mark: the run
// that claimed it, or another resume). The mark notes the resume.
// Whether dir holds the run the caller resumes is the caller's to check.
func ResumeOut(dir string) error {
	if _, ok := held.Load(filepath.Clean(dir)); ok {
		return nil
	}
	mark := filepath.Join(dir, outMark)
	f, err := os.OpenFile(mark, os.O_WRONLY|os.O_APPEND, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s is not a run's output folder (no %s): nothing to resume", dir, outMark)
	}
	if err != nil {
		return err
	}
	if err := hold(dir, f); err != nil {
		f.Close()
		return err
	}
	fmt.Fprintf(f, "resumed by pid %d at %s\n", os.Getpid(), time.Now().UTC().Format(time.RFC3339Nano))
	return nil
}

// NewOut makes and claims a fresh output folder named base, or base-2,
// base-3, … where another run (one started in the same second) has the
// name, and returns its path.
func NewOut(base string) (string, error) {
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		return "", err
	}
	for i := 1; i <= 1000; i++ {
		dir := base
		if i > 1 {
			dir = fmt.Sprintf("%s-%d", base, i)
		}
		// Mkdir, not MkdirAll: the folder that this call makes is new.
		if err := os.Mkdir(dir, 0o755); errors.Is(err, fs.ErrExist) {
			continue
		} else if err != nil {
			return "", err
		}
		if err := ClaimOut(dir); err != nil {
			return "", err
		}
		return dir, nil
	}
	return "", fmt.Errorf("%s: a thousand runs have folders of that name", base)
}
