package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
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
// NOTE: resuming a run (issue 27's --resume) is to take a folder that holds
// the run it resumes; it needs its own check, not this one.
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
	if err := f.Close(); err != nil {
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
